"""A caller's ``actions`` run in a rendered page, in order, as a person would (docs/rendering.md,
"Actions"). Runs in the render process: the standard library and Playwright only.

Selectors are CSS only: an element is found by the page's own ``document.querySelector``, which
reads nothing else, and clicked by Playwright as a person clicks (scrolled into view, waited for
until it can be). After each step the page settles (``tab.settle``). A step fails, naming its
index, when its element is missing, when it would take the top frame elsewhere, download a file
or open a window: all three are refused by the tab (``Tab.refusals``) whatever the step.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from playwright.async_api import ElementHandle, Error, Page
from playwright.async_api import TimeoutError as PlaywrightTimeout

# How long a click waits for its element to become clickable, and a wait_for for its element,
# at most (the render's deadline is the client's, and ends a longer wait as a timeout).
ELEMENT_SECONDS = 5.0
QUERY = "(selector) => document.querySelector(selector)"
SHOWN = (
    "(selector) => { const el = document.querySelector(selector);"
    " return !!el && el.checkVisibility({ checkOpacity: true, checkVisibilityCSS: true }); }"
)
# To the page's end, where an endless list loads its next part; answered once the scroll event
# has been dispatched (it comes with the next frame), so that what it starts is then counted.
DOWNLOAD_LINK = "(element) => !!element.closest('a[download]')"
SCROLL = (
    "() => { window.scrollTo(0, document.scrollingElement ? document.scrollingElement.scrollHeight : 0);"
    " return new Promise((done) => { setTimeout(done, 100);"
    " requestAnimationFrame(() => requestAnimationFrame(done)); }); }"
)


class _Refused(Exception):
    """What a step would do and may not."""


class ActionFailed(Exception):
    """Step ``index`` (0-based) could not be done; ``reason`` says why, in a caller's words."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(reason)
        self.index, self.reason = index, reason


async def run(
    page: Page, steps: list[dict[str, Any]], settle: Callable[[], Awaitable[None]], refusals: list[str]
) -> None:
    """Each step, then the page settled."""
    for index, step in enumerate(steps):
        try:
            await _do(page, step, settle)
        except PlaywrightTimeout:
            what = "shown" if step["type"] == "wait_for" else "clickable"
            raise ActionFailed(
                index, f"no element matching {step['selector']!r} was {what} in time"
            ) from None
        except Error as exc:
            raise ActionFailed(index, _first_line(exc)) from None
        except LookupError:
            raise ActionFailed(index, f"no element matches {step['selector']!r}") from None
        except _Refused as refused:
            raise ActionFailed(index, f"the step would {refused}: refused") from None
        await settle()
        if refusals:
            raise ActionFailed(index, f"the step would {refusals[0]}: refused")


async def _do(page: Page, step: dict[str, Any], settle: Callable[[], Awaitable[None]]) -> None:
    kind = step["type"]
    if kind == "click":
        element = await _element(page, step["selector"])
        if await element.evaluate(DOWNLOAD_LINK):  # refused before the browser begins it
            raise _Refused("download a file")
        await element.click(timeout=ELEMENT_SECONDS * 1000)
    elif kind == "scroll":
        for time in range(step.get("times", 1)):
            await page.evaluate(SCROLL)
            if time + 1 < step.get("times", 1):
                await settle()  # what the scroll loads comes before the next one
    elif kind == "wait_for":
        await page.wait_for_function(SHOWN, arg=step["selector"], timeout=ELEMENT_SECONDS * 1000, polling=100)
    elif kind == "wait":
        await asyncio.sleep(step["milliseconds"] / 1000)
    elif kind == "press":
        await page.keyboard.press(step["key"])


async def _element(page: Page, selector: str) -> ElementHandle:
    handle = await page.evaluate_handle(QUERY, selector)
    element = handle.as_element()
    if element is None:
        raise LookupError(selector)
    return element


def _first_line(exc: Error) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else "the browser refused the step"
