"""Consent answered and overlays removed in a rendered page, once it is ready (docs/rendering.md,
"As a person sees it"). Runs in the render process: the standard library and Playwright only.

The consent platforms are found and answered by DuckDuckGo's ``@duckduckgo/autoconsent`` (its
rules and its code, installed from npm by ``make`` into ``node_modules/``), run by
``consent.js`` in each frame of the page: "reject" clicks the platform's reject, "accept" its
accept, and a banner or wall it cannot answer so is removed, never accepted. Then
``overlays.js`` removes what still covers the viewport. Without ``node_modules/`` consent is
not answered (a system check says so) and overlays are still removed.
"""

from __future__ import annotations

import asyncio
import json
from functools import cache
from pathlib import Path
from typing import Any

from playwright.async_api import Error, Frame, Page

from fetch.render.autoconsent import COMPACT_RULES, FULL_RULES, LIBRARY, installed

HERE = Path(__file__).parent
OVERLAYS = (HERE / "overlays.js").read_text(encoding="utf-8")
# How long one frame's platform may take to be found and answered (clicks, its own waits).
ANSWER_SECONDS = 3.0
# Frames besides the top one looked in: platforms that live in a frame of their own.
MOST_FRAMES = 4


ANSWER = "([mode, rules, most]) => window.__siftConsent ? window.__siftConsent(mode, rules, most) : null"
# In the top frame, one round trip: its consent answered, then what covers it removed.
ANSWER_AND_UNCOVER = (
    "async ([mode, rules, most, answering]) => ["
    " answering && window.__siftConsent ? await window.__siftConsent(mode, rules, most) : null,"
    " (" + OVERLAYS + ")()]"
)


@cache
def init_script() -> str | None:
    """consent.js with the library and the compact rules in place (read once), for the tab's
    context to add to every frame; None without the library (consent is then not answered)."""
    if not installed():
        return None
    script = (HERE / "consent.js").read_text(encoding="utf-8")
    rules = json.dumps(COMPACT_RULES.read_text(encoding="utf-8"))  # a string literal of the JSON
    return script.replace("/*COMPACT_RULES*/", rules).replace(
        "/*LIBRARY*/", LIBRARY.read_text(encoding="utf-8")
    )


@cache
def _full_rules() -> str:
    """The rules with accept's steps, as JSON text: sent with the call, for consent accept only
    (parsed in the page, far quicker than Playwright's serialization of a large object)."""
    return json.dumps(json.loads(FULL_RULES.read_text(encoding="utf-8"))["autoconsent"])


async def answer(page: Page, mode: str) -> tuple[str | None, bool]:
    """What was done to the page's consent (``rejected``, ``accepted``, ``removed`` or None) and
    whether anything in it changed. ``leave`` touches nothing."""
    if mode == "leave":
        return None, False
    answering = init_script() is not None
    rules = _full_rules() if answering and mode == "accept" else None
    inner = [frame for frame in page.frames if frame != page.main_frame and frame.url.startswith("http")]
    in_frames = await asyncio.gather(*(_answer_frame(frame, mode, rules) for frame in inner[:MOST_FRAMES]))
    try:
        top, (removed, consent_like) = await page.evaluate(
            ANSWER_AND_UNCOVER, [mode, rules, int(ANSWER_SECONDS * 1000), answering]
        )
    except Error:
        return None, False  # a page navigating away or gone is read as it is
    handled = next((h for h in [_handled(top), *in_frames] if h is not None), None)
    if handled is None and consent_like:
        handled = "removed"
    return handled, handled is not None or removed > 0


async def remove_overlays(page: Page) -> bool:
    """Whether anything covering the viewport was removed (``overlays.js``)."""
    removed, _ = await _remove_overlays(page)
    return removed > 0


async def _remove_overlays(page: Page) -> tuple[int, bool]:
    try:
        removed, consent_like = await page.evaluate(OVERLAYS)
    except Error:
        return 0, False  # a page navigating away is read as it is
    return int(removed), bool(consent_like)


async def _answer_frame(frame: Frame, mode: str, rules: str | None) -> str | None:
    """A platform living in a frame of its own (answered before the top frame's overlays go)."""
    try:
        return _handled(await frame.evaluate(ANSWER, [mode, rules, int(ANSWER_SECONDS * 1000)]))
    except Error:
        return None  # a frame gone, or a page that broke what the library needs


def _handled(outcome: Any) -> str | None:
    handled = outcome[0] if isinstance(outcome, list) and outcome else None
    return handled if handled in ("rejected", "accepted", "removed") else None
