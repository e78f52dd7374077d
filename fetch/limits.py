"""Limits of the fetch pipeline, defined once: URL lengths (read by the API's validation, its
OpenAPI schema, the guard and the client's redirects) and the waits that make up the longest
fetch (read by the gate, the pipeline and the settings checks) (docs/fetch-client.md)."""

from __future__ import annotations

# The longest URL sift accepts from a caller, or fetches: a target, a redirect's resolved URL.
MAX_URL_CHARS = 2048
# The longest ``Location`` value a redirect may send. Longer than a URL: resolving a relative
# reference (dot segments) can shorten it, and the resolved URL meets MAX_URL_CHARS in the guard.
MAX_LOCATION_CHARS = 2 * MAX_URL_CHARS

# How long a fetch waits for a free gate slot before it answers busy.
GATE_WAIT_SECONDS = 5.0
# Extraction ends by the fetch deadline counted from the start of the request, or this long after
# the download, whichever is later: a download that used the whole deadline still leaves the
# parsers a few seconds, and a hostile document never holds the answer much past the deadline.
EXTRACT_GRACE_SECONDS = 5.0


def longest_fetch_seconds(fetch_timeout: float) -> float:
    """The longest one fetch may take: the gate wait, the download deadline, then extraction."""
    return GATE_WAIT_SECONDS + fetch_timeout + EXTRACT_GRACE_SECONDS


# Rendering (fetch/render/renderer.py): how long a render process may take to start listening and the
# browser to be ready before the render's own deadline starts; and how long ending a render that
# ran out of time or memory may take: its context closed alone (up to 3 s), else the render
# process's tree killed.
RENDER_START_SECONDS = 15.0
RENDER_STOP_SECONDS = 11.0


def longest_render_seconds(fetch_timeout: float, render_timeout: float) -> float:
    """The longest a rendered fetch may hold its fetch slot: the document's download, the wait
    for a render slot, then two attempts (a crash is tried once more), each its start, its render
    and the stop of a render process that ran out of time. (The wait for the fetch slot itself
    comes before it is held.)"""
    attempt = RENDER_START_SECONDS + render_timeout + RENDER_STOP_SECONDS
    return GATE_WAIT_SECONDS + fetch_timeout + 2 * attempt
