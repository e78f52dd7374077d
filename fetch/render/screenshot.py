"""A picture of the rendered page as a person sees it (``screenshot``: ``viewport`` or ``full``),
taken once consent was answered, overlays removed and the actions run. Runs in the render
process: the standard library and Playwright only.

PNG, or JPEG when the PNG is past ``PNG_MOST`` (a photo-heavy page), at most ``MOST`` bytes either
way; a full page is cut at ``FULL_MOST_PX`` high. A picture that cannot be made that small is
not sent, and the answer says so (``ScreenshotTooLarge``).
"""

from __future__ import annotations

from typing import Any

from playwright.async_api import Page

PNG_MOST = 2 * 1024 * 1024
MOST = 5 * 1024 * 1024
FULL_MOST_PX = 16_384
JPEG_QUALITIES = (80, 60, 40, 25)
PAGE_HEIGHT = (
    "() => Math.max(document.documentElement.scrollHeight, document.body ? document.body.scrollHeight : 0)"
)


class ScreenshotTooLarge(Exception):
    """Even the smallest JPEG is past ``MOST``."""


async def capture(page: Page, kind: str, timeout_ms: float) -> tuple[dict[str, Any], bytes]:
    """The picture's header (``type``, ``width``, ``height``) and its bytes."""
    viewport = page.viewport_size or {"width": 1280, "height": 720}
    width, height = viewport["width"], viewport["height"]
    options: dict[str, Any] = {"timeout": timeout_ms}
    if kind == "full":
        height = max(1, min(int(await page.evaluate(PAGE_HEIGHT)), FULL_MOST_PX))
        options.update(full_page=True, clip={"x": 0, "y": 0, "width": width, "height": height})
    picture = await page.screenshot(type="png", **options)
    media = "image/png"
    for quality in JPEG_QUALITIES if len(picture) > PNG_MOST else ():
        picture, media = await page.screenshot(type="jpeg", quality=quality, **options), "image/jpeg"
        if len(picture) <= MOST:
            break
    if len(picture) > MOST:
        raise ScreenshotTooLarge(f"the picture is past {MOST // (1024 * 1024)} MB even as a JPEG")
    return {"screenshot": kind, "type": media, "width": width, "height": height}, picture
