"""A JSON document pretty-printed, or the outputs of a jq program over it, in the sandbox."""

from __future__ import annotations

from fetch.errors import FetchError
from fetch.outcomes import Outcome
from fetch.sandbox.pool import get_sandbox

# CPU seconds jq may take: enough to parse a 20 MiB document, short enough that a runaway
# program (``def f: f; f``) is cut off within a few seconds.
JQ_CPU_SECONDS = 2.0
JQ_CPU_SECONDS_PER_MIB = 0.5
TIME_HINT = "Simplify the jq program, or select a smaller part of the document first."
MEMORY_HINT = (
    "The document or what jq builds from it needs more memory than jq has: select a smaller part "
    "first (e.g. '.items[:100]'), build smaller values, or look for a smaller document."
)


class NotJson(Exception):
    """The body is not JSON; the caller decides whether that is an error."""


def json_text(text: str, program: str | None, *, max_chars: int) -> str:
    """Each output of ``program`` (``.`` when None) over ``text``, indented, one after another.

    Raises ``NotJson`` when ``text`` is not JSON, and ``FetchError``: ``invalid_request`` when
    the program fails on this document, ``too_long`` for output over ``max_chars``,
    ``filter_timeout`` when jq runs out of time, ``memory_limit`` when it runs out of memory.
    """
    payload = text.encode("utf-8")
    cpu_seconds = JQ_CPU_SECONDS + JQ_CPU_SECONDS_PER_MIB * len(payload) / (1 << 20)
    reply, data = get_sandbox().run(
        "json",
        {"program": program, "max_chars": max_chars},
        payload,
        cpu_seconds=cpu_seconds,
        wall_seconds=cpu_seconds * 1.5 + 2,
        subject="the jq program" if program else "the JSON formatter",
        hint=TIME_HINT,
        memory_hint=MEMORY_HINT,
        max_reply_bytes=max_chars * 4 + 1024,
    )
    error = reply.get("error")
    if error == "not_json":
        raise NotJson(reply.get("message", "not JSON"))
    if error == "jq_error":
        raise FetchError(
            Outcome.INVALID_REQUEST,
            f"jq failed on this document: {reply.get('message', '')}",
            "Check the jq program against the document's shape, e.g. fetch it without jq first.",
        )
    if error == "too_long":
        raise FetchError(
            Outcome.TOO_LONG,
            f"the JSON output is over {max_chars} characters",
            "Select less with jq, e.g. '.items[:20]'.",
        )
    return data.decode("utf-8", "replace")
