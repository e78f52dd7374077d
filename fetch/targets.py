"""What a target may ask the pipeline: a URL and its options (docs/api.md), parsed, validated
and normalised, for batch submissions, ``/v1/fetch`` and MCP alike.

``TargetOptions`` validates the options; here its refusal is put in a caller's words
(``refusal``, also for a map's options), the URL is normalised, and grep and jq are compiled,
the costly check, after every cheap one and within a submission's program budget. It knows
nothing about jobs or HTTP: whatever reaches the pipeline is well formed, so that bad input is
refused before anything is stored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import re2
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from fetch.limits import MAX_URL_CHARS
from fetch.options import (
    MAX_JQ_CHARS,
    InvalidTarget,
    PageRange,
    TargetOptions,
    shared_option_schemas,
)
from fetch.sandbox.jq_program import compile_jq

# The option types come from fetch.options; callers take them from here too, with the target.
__all__ = [
    "MAX_JQ_CHARS",
    "MAX_PROGRAMS_PER_SUBMISSION",
    "MAX_PROGRAM_CHARS_PER_SUBMISSION",
    "InvalidTarget",
    "PageRange",
    "Target",
    "TargetOptions",
    "compile_checks",
    "normalise_url",
    "parse_options",
    "parse_target",
    "parse_targets",
    "printable",
    "re2_options",
    "refusal",
]

# jq compiles in time quadratic in the program and RE2 in time that grows with its compile
# memory, so a submission may carry only so many distinct grep and jq programs, and so many
# characters of them in all.
MAX_PROGRAM_CHARS_PER_SUBMISSION = 16_000
MAX_PROGRAMS_PER_SUBMISSION = 8
# RE2's compile memory; a pattern that needs more is refused rather than built.
RE2_MAX_MEM = 1 << 20
_CONTROL = re.compile(r"[\x00-\x20\x7f]")
OPTIONS_SHAPE_HINT = 'Send options as an object, e.g. {"mode": "text"}.'


@dataclass(frozen=True)
class Target:
    url: str
    options: TargetOptions = field(default_factory=TargetOptions)

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "options": self.options.to_dict()}

    @classmethod
    def from_stored(cls, url: str, options: dict[str, Any]) -> Target:
        """A target this service validated at submit, rebuilt as it was accepted: not validated
        again nor compiled. The worker claims it in a transaction that a refusal here would roll
        back again and again, and a limit tightened since (``SIFT_FETCH_MAX_CHARS``) must not fail
        a job accepted before it; an option no longer known is dropped."""
        known = {k: v for k, v in options.items() if k in TargetOptions.model_fields}
        return cls(url, TargetOptions.model_construct(**known))


def printable(name: str) -> str:
    """A name from the request, safe to echo: lone surrogates become escapes."""
    return name.encode("utf-8", "backslashreplace").decode("utf-8")


def refusal(exc: ValidationError, known: Mapping[str, dict[str, Any]], shape_hint: str) -> InvalidTarget:
    """pydantic's refusal of an option set (``TargetOptions``, ``MapOptions``) in a caller's words:
    the one place a ``ValidationError`` becomes ``InvalidTarget``. An unknown option is named first,
    else the first option refused, as ``options.<name>``; ``known`` is the set's option schemas
    (their limits as the settings say now), ``shape_hint`` what to send when options is no object."""
    errors = exc.errors(include_url=False)
    unknown = sorted(printable(str(e["loc"][0] if e["loc"] else e["input"])) for e in errors if _unknown(e))
    if unknown:
        return InvalidTarget(
            f"options.{unknown[0]}",
            f"unknown option {unknown[0]!r}",
            "Known options: " + ", ".join(known) + ".",
        )
    error = errors[0]
    cause = error.get("ctx", {}).get("error")
    if isinstance(cause, InvalidTarget):  # a rule with words of its own (pages, where reading starts)
        name = str(error["loc"][0]) if error["loc"] else cause.field
        return InvalidTarget(f"options.{name}", cause.message, cause.hint)
    if not error["loc"]:
        return InvalidTarget("options", "options must be an object", shape_hint)
    name = str(error["loc"][0])
    if name == "actions" and len(error["loc"]) > 1 and isinstance(error["loc"][1], int):
        return _step_refusal(error)
    return InvalidTarget(f"options.{name}", *_words(name, error, known[name]))


def _step_refusal(error: ErrorDetails) -> InvalidTarget:
    """One step of ``actions`` refused: named by its index, with pydantic's words for the fault."""
    index, place = error["loc"][1], [str(part) for part in error["loc"][3:]]
    where = f"actions[{index}]" + "".join(f".{part}" for part in place)
    return InvalidTarget(
        f"options.{where}",
        f"{where}: {printable(error['msg'])}",
        'Each step is {"type": "click", "selector": "..."}, {"type": "scroll", "times": 2}, '
        '{"type": "wait_for", "selector": "..."}, {"type": "wait", "milliseconds": 500} or '
        '{"type": "press", "key": "Enter"}.',
    )


def _unknown(error: ErrorDetails) -> bool:
    # A name holding a lone surrogate is refused as text before pydantic sees that it is unknown.
    # A step's unknown field is the step's fault (``_step_refusal``), not an unknown option.
    if len(error["loc"]) > 1:
        return False
    return error["type"] == "extra_forbidden" or (error["type"] == "string_unicode" and not error["loc"])


def _words(name: str, error: ErrorDetails, schema: dict[str, Any]) -> tuple[str, str]:
    """What is wrong with option ``name`` and what to send instead, from its schema's type."""
    value = error["input"]
    shown = printable(value) if isinstance(value, str) else type(value).__name__
    if "anyOf" in schema:  # a boolean or a fixed string (render: true, false or "auto")
        words = [word for branch in schema["anyOf"] for word in branch.get("enum", [])]
        return (
            f"{name} must be true, false or one of {', '.join(map(repr, words))}, not {shown!r}",
            f"Send {name} as a JSON boolean or as one of: {', '.join(words)}.",
        )
    if "enum" in schema:
        return f"unknown {name} {shown!r}", "Use one of: " + ", ".join(schema["enum"]) + "."
    if schema.get("type") == "array":  # actions
        least, most = schema["minItems"], schema["maxItems"]
        return (
            f"{name} must be a list of {least} to {most} steps",
            f"Send {name} as a JSON list, or leave it out.",
        )
    if schema["type"] == "boolean":
        return f"{name} must be true or false", f"Send {name} as a JSON boolean."
    if schema["type"] == "integer":
        least, most = schema["minimum"], schema["maximum"]
        return (
            f"{name} must be a whole number from {least} to {most}",
            f"Send {name} as a JSON integer, or leave it out.",
        )
    return _text_words(name, error["type"], schema)


def _text_words(name: str, kind: str, schema: dict[str, Any]) -> tuple[str, str]:
    if kind == "string_too_long":
        limit = schema["maxLength"]
        return f"{name} is longer than {limit} characters", f"Shorten {name} to at most {limit} characters."
    if kind == "string_unicode":  # JSON's \ud800 escapes decode to lone surrogates, which no column stores
        return (
            f"{name} is not valid Unicode text (it holds a lone surrogate)",
            "Send text as valid UTF-8; escape only whole characters or surrogate pairs.",
        )
    if kind == "string_nul":
        return f"{name} holds a NUL character", f"Remove the NUL character from {name}."
    if kind == "string_pattern_mismatch" or (kind == "string_too_short" and schema["minLength"] > 1):
        return f"{name} does not match {schema['pattern']}", f"Send {name} as the API answered it."
    return f"{name} must be a non-empty string", f"Send {name} as a string, or leave it out."


def re2_options() -> re2.Options:
    """RE2 options with a bounded compile memory, as validation checks them."""
    options = re2.Options()
    options.log_errors = False
    options.max_mem = RE2_MAX_MEM
    return options


def _grep_error(pattern: str) -> str | None:
    try:
        re2.compile(pattern, options=re2_options())
    except re2.error as exc:
        message = exc.args[0] if exc.args else exc
        text = message.decode("utf-8", "replace") if isinstance(message, bytes) else str(message)
        return printable(text)
    return None


def _jq_error(program: str) -> str | None:
    # Never the bare program: compiling alone would read the modules it imports from any path.
    try:
        compile_jq(program)
    except ValueError as exc:
        return printable(str(exc).splitlines()[0] if str(exc) else "syntax error")
    return None


def compile_checks(options: TargetOptions) -> None:
    """Compile the target's grep and jq: the expensive part, done only after every cheap check."""
    if options.grep is not None:
        grep_error = _grep_error(options.grep)
        if grep_error is not None:
            raise InvalidTarget(
                "options.grep",
                f"grep does not compile: {grep_error}",
                "Use RE2 syntax (no backreferences or lookaround) and keep the pattern small.",
            )
    if options.jq is not None:
        jq_error = _jq_error(options.jq)
        if jq_error is not None:
            raise InvalidTarget(
                "options.jq",
                f"jq does not compile: {jq_error}",
                "Check the jq program, for example '.items[0].name'.",
            )


def parse_options(raw: object, *, compile_programs: bool = True) -> TargetOptions:
    """Raw options validated by ``TargetOptions``; null means left out. grep and jq are compiled
    unless ``compile_programs`` is false (the caller compiles them later)."""
    try:
        options = TargetOptions.model_validate({} if raw is None else raw)
    except ValidationError as exc:
        raise refusal(exc, shared_option_schemas(), OPTIONS_SHAPE_HINT) from None
    if compile_programs:
        compile_checks(options)
    return options


# Options about reaching a site, which an uploaded document has not.
SITE_OPTIONS = ("render", "max_age", "recover", "robots")


def parse_upload_options(raw: object) -> TargetOptions:
    """The options of an uploaded document (``POST /v1/read``, MCP ``read``): ``parse_options``,
    and none of the ``SITE_OPTIONS`` other than its default, since they need a site to fetch from."""
    options = parse_options(raw)
    for name in SITE_OPTIONS:
        if getattr(options, name) != TargetOptions.model_fields[name].default:
            raise site_option_refusal(name)
    return options


def site_option_refusal(name: str) -> InvalidTarget:
    return InvalidTarget(
        f"options.{name}",
        f"{name} applies to a URL fetched from its site, and an upload has none",
        f"Leave {name} out: the document read is the one sent.",
    )


def normalise_url(raw: object) -> str:
    """Refuse what is not a plain http(s) URL; lower-case the scheme and host."""
    hint = "Send an absolute http:// or https:// URL without user name or password."
    if not isinstance(raw, str) or not raw:
        raise InvalidTarget("url", "url must be a non-empty string", hint)
    if len(raw) > MAX_URL_CHARS:
        raise InvalidTarget("url", f"url is longer than {MAX_URL_CHARS} characters", "Shorten the URL.")
    if raw != printable(raw):  # a lone surrogate, which no database column can store
        raise InvalidTarget(
            "url",
            "url is not valid Unicode text (it holds a lone surrogate)",
            "Send text as valid UTF-8; escape only whole characters or surrogate pairs.",
        )
    if _CONTROL.search(raw):
        raise InvalidTarget(
            "url", "url holds spaces or control characters", "Percent-encode spaces and control characters."
        )
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError as exc:
        raise InvalidTarget("url", f"url cannot be parsed: {exc}", hint) from None
    if parts.scheme.lower() not in ("http", "https"):
        raise InvalidTarget("url", f"scheme {parts.scheme or '(none)'!r} is not allowed", hint)
    if parts.username is not None or parts.password is not None:
        raise InvalidTarget("url", "url carries credentials", hint)
    if not parts.hostname:
        raise InvalidTarget("url", "url has no host", hint)
    if port is not None and port == 0:
        raise InvalidTarget("url", "url has port 0", hint)
    netloc = _host(parts.hostname) + (f":{port}" if port is not None else "")
    return urlunsplit((parts.scheme.lower(), netloc, parts.path, parts.query, parts.fragment))


def _host(hostname: str) -> str:
    """The host as compared and stored: lower-case, without the root's trailing dot."""
    if ":" in hostname:
        if "%" in hostname:
            raise InvalidTarget(
                "url", "url carries an IPv6 zone id", "Send the IPv6 address without a zone id (%25...)."
            )
        return f"[{hostname}]"
    host = hostname.removesuffix(".")
    if not host or host.startswith(".") or ".." in host or host.endswith("."):
        raise InvalidTarget("url", "url has an empty host name label", "Check the URL's host name.")
    return host


def parse_target(raw: object, *, compile_programs: bool = True) -> Target:
    """A bare string or ``{"url": ..., "options": {...}}``."""
    if isinstance(raw, str):
        return Target(normalise_url(raw))
    if not isinstance(raw, dict):
        raise InvalidTarget(
            "url",
            "a target must be a URL string or an object",
            'Send "https://..." or {"url": "https://...", "options": {}}.',
        )
    unknown = sorted(printable(name) for name in set(raw) - {"url", "options"})
    if unknown:
        raise InvalidTarget(
            unknown[0], f"unknown field {unknown[0]!r}", 'A target has only "url" and "options".'
        )
    options = parse_options(raw.get("options"), compile_programs=compile_programs)
    return Target(normalise_url(raw.get("url")), options)


def parse_targets(raw: list[object]) -> list[Target]:
    """Cheap checks of every target first, then the program budget, then each distinct program once."""
    targets = []
    for index, item in enumerate(raw):
        try:
            targets.append(parse_target(item, compile_programs=False))
        except InvalidTarget as exc:
            raise exc.at(index) from None
    _within_program_budget(targets)
    compiled: set[tuple[str | None, str | None]] = set()
    for index, target in enumerate(targets):
        programs = (target.options.grep, target.options.jq)
        if programs in compiled:
            continue
        try:
            compile_checks(target.options)
        except InvalidTarget as exc:
            raise exc.at(index) from None
        compiled.add(programs)
    return targets


def _within_program_budget(targets: list[Target]) -> None:
    seen: set[tuple[str, str]] = set()
    total = 0
    for index, target in enumerate(targets):
        for name in ("grep", "jq"):
            program = getattr(target.options, name)
            if program is None or (name, program) in seen:
                continue
            seen.add((name, program))
            total += len(program)
            if len(seen) > MAX_PROGRAMS_PER_SUBMISSION:
                raise InvalidTarget(
                    f"options.{name}",
                    f"this submission has more than {MAX_PROGRAMS_PER_SUBMISSION} distinct programs",
                    "Reuse the same program across targets, or split the targets into several jobs.",
                ).at(index)
            if total > MAX_PROGRAM_CHARS_PER_SUBMISSION:
                raise InvalidTarget(
                    f"options.{name}",
                    f"the distinct grep and jq programs of this submission exceed "
                    f"{MAX_PROGRAM_CHARS_PER_SUBMISSION} characters in all",
                    "Reuse the same program across targets, or split the targets into several jobs.",
                ).at(index)
