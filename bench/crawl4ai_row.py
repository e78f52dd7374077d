"""Crawl4AI's row of ``bench/render.py --crawl4ai PYTHON`` and ``bench/consent.py --crawl4ai
PYTHON``: run by that interpreter (a separate venv with ``crawl4ai`` installed, never the
project's), not imported by sift.

One crawler, reused for every page, with Crawl4AI's shipped defaults (``domcontentloaded``, then
100 ms before the HTML is read; its cache bypassed), on the same Chromium as sift: Crawl4AI 0.9.5's
``BrowserConfig`` has no executable path for the browser it launches, so the launch arguments it
builds get one here. Protocol: a line ``{"ready": seconds}`` once the browser is up; then, for each
line ``{"url", "marker"}`` read on stdin, ``{"seconds", "right", "markdown"}`` (the marker in the
HTML it read, and the markdown it made of it). A line may also hold ``"config"``: more keyword
arguments of ``CrawlerRunConfig`` for that page (``magic``, ``js_code``, ...).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

from crawl4ai import AsyncWebCrawler, BrowserConfig, CacheMode, CrawlerRunConfig
from crawl4ai.browser_manager import BrowserManager

CHROMIUM = os.environ.get("SIFT_RENDER_CHROMIUM", "/usr/bin/chromium")  # the bench passes sift's
_build = BrowserManager._build_browser_args


def _with_chromium(self: Any) -> dict[str, Any]:
    return {**_build(self), "executable_path": CHROMIUM}


async def main() -> None:
    BrowserManager._build_browser_args = _with_chromium
    began = time.monotonic()
    config = BrowserConfig(browser_type="chromium", headless=True, verbose=False)
    async with AsyncWebCrawler(config=config) as crawler:
        _say({"ready": time.monotonic() - began})
        for line in sys.stdin:
            job = json.loads(line)
            run = CrawlerRunConfig(cache_mode=CacheMode.BYPASS, verbose=False, **job.get("config", {}))
            began = time.monotonic()
            try:
                result = await crawler.arun(url=job["url"], config=run)
                html, markdown = result.html or "", str(result.markdown or "")
            except Exception as exc:
                html = markdown = f"failed: {exc}"
            seconds = time.monotonic() - began
            _say({"seconds": seconds, "right": job["marker"] in html, "markdown": markdown})


def _say(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main())
