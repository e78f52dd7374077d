"""What a person does on a rendered page once it is ready, in order (docs/rendering.md, "As a
person sees it"): answer its consent banner and close what covers it (``consent.py``), do the
caller's ``actions`` (``actions.py``), then look at it (``screenshot.py``). Runs in the render
process: the standard library and Playwright only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fetch.render import actions, consent, screenshot

if TYPE_CHECKING:
    from fetch.render.tab import Tab


@dataclass(frozen=True)
class Visited:
    """The page's DOM as read at the end, what was done to its consent, and its picture."""

    html: str
    consent: str | None
    picture: tuple[dict[str, Any], bytes] | None


async def finish(tab: Tab) -> Visited:
    """The settled page's visit: its consent answered, the caller's steps, then its DOM read with
    what a reader cannot see marked (``visibility.read_marked``) and its picture taken."""
    job, page = tab.job, tab.page
    mode = job.get("consent", "reject")
    handled, changed = await consent.answer(page, mode)
    if changed:
        await tab.settled()
    if job.get("actions"):
        # From here on nothing takes the top frame elsewhere, downloads or opens a window.
        tab.acting = True
        await actions.run(page, job["actions"], tab.settled, tab.refusals)
        if mode != "leave" and await consent.remove_overlays(page):  # a modal a step opened
            await tab.settled()
    text = await tab.read()
    picture = (
        await screenshot.capture(page, job["screenshot"], job["timeout_ms"])
        if job.get("screenshot")
        else None
    )
    return Visited(text, handled, picture)
