"""What a target may ask the pipeline: a URL and its options (docs/api.md), parsed, validated
and normalised.

This is the one place a target is validated, for batch submissions and for ``/v1/fetch``
alike. It knows nothing about jobs or HTTP; it only makes sure that whatever reaches the
pipeline is well formed, so that bad input is refused before anything is stored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import re2

from fetch.limits import MAX_URL_CHARS
from fetch.options import (
    MAX_JQ_CHARS,
    InvalidTarget,
    PageRange,
    TargetOptions,
    parse_pages,
    shared_option_schemas,
)
from fetch.sandbox.child import compile_jq

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
]

# jq compiles in time quadratic in the program and RE2 in time that grows with its compile
# memory, so a submission may carry only so many distinct grep and jq programs, and so many
# characters of them in all.
MAX_PROGRAM_CHARS_PER_SUBMISSION = 16_000
MAX_PROGRAMS_PER_SUBMISSION = 8
# RE2's compile memory; a pattern that needs more is refused rather than built.
RE2_MAX_MEM = 1 << 20
_CONTROL = re.compile(r"[\x00-\x20\x7f]")


@dataclass(frozen=True)
class Target:
    url: str
    options: TargetOptions = field(default_factory=TargetOptions)

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "options": self.options.to_dict()}

    @classmethod
    def from_stored(cls, url: str, options: dict[str, Any]) -> Target:
        """A target that was validated when it was submitted, rebuilt without compiling again."""
        known = {k: v for k, v in options.items() if k in TargetOptions.model_fields}
        return cls(url, TargetOptions.model_construct(**known))


def printable(name: str) -> str:
    """A name from the request, safe to echo: lone surrogates become escapes."""
    return name.encode("utf-8", "backslashreplace").decode("utf-8")


def _check_unicode(value: str, field: str) -> None:
    # JSON's \ud800 escapes decode to lone surrogates, which no database column can store.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidTarget(
            field,
            f"{field} is not valid Unicode text (it holds a lone surrogate)",
            "Send text as valid UTF-8; escape only whole characters or surrogate pairs.",
        ) from None


def _check_text(name: str, value: object, limit: int) -> None:
    field = f"options.{name}"
    if not isinstance(value, str) or not value.strip():
        raise InvalidTarget(
            field, f"{name} must be a non-empty string", f"Send {name} as a string, or leave it out."
        )
    if len(value) > limit:
        raise InvalidTarget(
            field,
            f"{name} is longer than {limit} characters",
            f"Shorten {name} to at most {limit} characters.",
        )
    _check_unicode(value, field)
    if "\x00" in value:
        raise InvalidTarget(field, f"{name} holds a NUL character", f"Remove the NUL character from {name}.")


def _check_option(name: str, value: object, schema: dict[str, Any]) -> None:
    """One option against its JSON Schema (``fetch.options``), refused in words naming it."""
    if "anyOf" in schema:
        _check_either(name, value, schema["anyOf"])
    elif "enum" in schema:
        if not isinstance(value, str) or value not in schema["enum"]:
            shown = printable(value) if isinstance(value, str) else type(value).__name__
            raise InvalidTarget(
                f"options.{name}",
                f"unknown {name} {shown!r}",
                "Use one of: " + ", ".join(schema["enum"]) + ".",
            )
    elif schema["type"] == "boolean":
        if not isinstance(value, bool):
            raise InvalidTarget(
                f"options.{name}", f"{name} must be true or false", f"Send {name} as a JSON boolean."
            )
    elif schema["type"] == "integer":
        _check_integer(name, value, schema)
    else:
        _check_text(name, value, schema["maxLength"])
        if "pattern" in schema and name != "pages" and not re.fullmatch(schema["pattern"], str(value)):
            # pages are read by parse_pages, which says which range it cannot read.
            raise InvalidTarget(
                f"options.{name}",
                f"{name} does not match {schema['pattern']}",
                f"Send {name} as the API answered it.",
            )


def _check_either(name: str, value: object, branches: list[dict[str, Any]]) -> None:
    """An option of a boolean or a fixed string (``render``: true, false or "auto")."""
    words = [value for branch in branches for value in branch.get("enum", [])]
    if isinstance(value, bool) or (isinstance(value, str) and value in words):
        return
    shown = printable(value) if isinstance(value, str) else type(value).__name__
    raise InvalidTarget(
        f"options.{name}",
        f"{name} must be true, false or one of {', '.join(map(repr, words))}, not {shown!r}",
        f"Send {name} as a JSON boolean or as one of: {', '.join(words)}.",
    )


def _check_integer(name: str, value: object, schema: dict[str, Any]) -> None:
    least, most = schema["minimum"], schema["maximum"]
    # A JSON boolean is a Python int: refused as any other non-integer.
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise InvalidTarget(
            f"options.{name}",
            f"{name} must be a whole number from {least} to {most}",
            f"Send {name} as a JSON integer, or leave it out.",
        )


def _check_slicing(given: dict[str, Any]) -> None:
    """What the schema cannot say about where a fetch starts reading: a cursor, or an offset into
    a version, never both; an offset only into the whole text, never into grep or question."""
    if "cursor" in given and ("offset" in given or "version" in given):
        raise InvalidTarget(
            "options.cursor",
            "cursor cannot be sent with offset or version",
            "Send cursor alone to read the next slice, or offset with version to read from an offset.",
        )
    if "offset" in given and "version" not in given:
        raise InvalidTarget(
            "options.offset",
            "offset needs version",
            "Send version too: the content_sha256 of the answer the offset was taken from.",
        )
    narrowing = [name for name in ("grep", "question") if name in given]
    if "offset" in given and narrowing:
        raise InvalidTarget(
            f"options.{narrowing[0]}",
            f"offset reads the whole text, and {narrowing[0]} narrows it",
            f"Leave {narrowing[0]} out to read from an offset (a span's start), or leave offset out.",
        )


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
    """Raw options checked against their schema; null means left out. Page ranges are read, and
    grep and jq compiled unless ``compile_programs`` is false (the caller compiles them later)."""
    if raw is None:
        return TargetOptions()
    if not isinstance(raw, dict):
        raise InvalidTarget(
            "options", "options must be an object", 'Send options as an object, e.g. {"mode": "text"}.'
        )
    known = shared_option_schemas()
    unknown = sorted(printable(name) for name in set(raw) - set(known))
    if unknown:
        raise InvalidTarget(
            f"options.{unknown[0]}",
            f"unknown option {unknown[0]!r}",
            "Known options: " + ", ".join(known) + ".",
        )
    given = {name: value for name, value in raw.items() if value is not None}
    for name, schema in known.items():
        if name in given:
            _check_option(name, given[name], schema)
    if "pages" in given:
        parse_pages(given["pages"])
    _check_slicing(given)
    options = TargetOptions.model_construct(**given)  # every value was checked above
    if compile_programs:
        compile_checks(options)
    return options


def normalise_url(raw: object) -> str:
    """Refuse what is not a plain http(s) URL; lower-case the scheme and host."""
    hint = "Send an absolute http:// or https:// URL without user name or password."
    if not isinstance(raw, str) or not raw:
        raise InvalidTarget("url", "url must be a non-empty string", hint)
    if len(raw) > MAX_URL_CHARS:
        raise InvalidTarget("url", f"url is longer than {MAX_URL_CHARS} characters", "Shorten the URL.")
    _check_unicode(raw, "url")
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
    _check_program_budget(targets)
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


def _check_program_budget(targets: list[Target]) -> None:
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
