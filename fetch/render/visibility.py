"""A rendered page's HTML with its hidden marks, read in a world of its own (``hidden_marks.js``).

The page's scripts run in its main world, where they can replace any function a mark script
would call (``setAttribute``, ``checkVisibility``, ``getComputedStyle``) or undo a mark as soon as
it is set. An isolated world (Chrome DevTools Protocol, ``Page.createIsolatedWorld``, the kind
extensions' content scripts run in) shares the page's DOM but none of its JavaScript objects, so
the marks see the browser's own functions and the computed style as the reader sees it. The
script computes the marks and serializes the DOM in one evaluation, never writing to the DOM, so
no script of the page runs between the two. Like ``tab.py``, it imports nothing of sift.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.async_api import Error, Page

MARK_AND_READ = Path(__file__).with_name("hidden_marks.js").read_text(encoding="utf-8")
WORLD = "sift-marks"


async def read_marked(page: Page) -> str:
    """The page's HTML as the browser has it now, each element its computed style hides marked
    ``data-sift-hidden``; a Playwright ``Error`` when it cannot be read (the page went away)."""
    session = await page.context.new_cdp_session(page)
    try:
        frames = await session.send("Page.getFrameTree")
        world = await session.send(
            "Page.createIsolatedWorld",
            {"frameId": frames["frameTree"]["frame"]["id"], "worldName": WORLD, "grantUniveralAccess": False},
        )
        answer: dict[str, Any] = await session.send(
            "Runtime.evaluate",
            {"expression": MARK_AND_READ, "contextId": world["executionContextId"], "returnByValue": True},
        )
    finally:
        await session.detach()
    value = answer.get("result", {}).get("value")
    if "exceptionDetails" in answer or not isinstance(value, str):
        raise Error("the rendered page could not be read")
    return value
