"""jq programs from callers compiled so that they can never load a module (``import``, ``include``).

Standard library and jq only: the sandbox child loads this module by path (``child.py``), and
``fetch.targets`` compiles every caller's program with it once, as it validates the options.
"""

from __future__ import annotations

import re
from typing import Any

# jq reads modules (``import "x" as $x {search: "/etc"};`` loads any ``x.json`` or ``x.jq``
# it can open) only in directives at the very top of a program. Inside a definition a directive
# is a syntax error, so a program compiled as the body of this wrapper can never load a file,
# whatever its comments and strings look like. The body starts on the wrapper's first line so
# that ``$__loc__`` and error positions keep their line numbers; the closing line stands apart,
# after an empty line, so that a comment on the program's last line (even one continued by a
# trailing backslash) cannot swallow it.
_JQ_WRAPPER = "def __sift_program__: {program}\n\n; __sift_program__"
MODULES_REFUSED = "jq modules (import, include, module) are not available"
_MODULE_DIRECTIVE = re.compile(r"unexpected (?:import|include|module)\b")


def jq_without_modules(program: str) -> str:
    """``program`` as a jq program that behaves the same but cannot import or include modules.

    It fails to compile where ``program`` starts with an ``import``, ``include`` or ``module``
    directive; compile this (or use ``compile_jq``), never the bare program, wherever a program
    from a caller is compiled: compiling alone already reads the modules (validation included),
    and its errors tell which files exist and where they fail to parse.
    """
    return _JQ_WRAPPER.format(program=program)


def compile_jq(program: str) -> Any:
    """``program`` compiled by jq so that it cannot load modules (``jq_without_modules``).

    Raises ``ValueError`` with one line: ``MODULES_REFUSED`` for a module directive, else jq's
    own first line about the program.
    """
    import jq  # noqa: PLC0415 — the child imports it at start-up; callers outside have it too

    try:
        return jq.compile(jq_without_modules(program))
    except ValueError as exc:
        message = _first_line(exc)
    if _MODULE_DIRECTIVE.search(message):
        raise ValueError(MODULES_REFUSED)
    # A directive would have been the first token, and the parser's first complaint: the bare
    # program has none, so compiling it reads no file, and its message has its own columns.
    try:
        jq.compile(program)
    except ValueError as exc:
        message = _first_line(exc)
    raise ValueError(message)


def _first_line(exc: ValueError) -> str:
    return str(exc).splitlines()[0] if str(exc) else "jq does not compile"
