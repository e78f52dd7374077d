"""One render in its tab (``server.py`` runs it): a fresh context whose every request is
routed to the render's client, the page's readiness (``ready.js`` and a short quiet window), and
its DOM read with the hidden marks set, in a world of its own (``visibility.py``). Like the
server, it imports nothing of sift and no Django: only the standard library and Playwright.

Frames between the render process and its client, both ways: a JSON line, then ``size`` raw
bytes when it has a ``size`` (``server.py`` lists them).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from pathlib import Path
from typing import Any

from playwright.async_api import Browser, Download, Error, Page, Request, Route, WebSocketRoute

from fetch.render import consent, visit
from fetch.render.visibility import read_marked

# Skipped for speed: they never change the text (a render with a screenshot loads images and fonts).
SKIPPED_TYPES = frozenset({"image", "media", "font"})
PICTURED_TYPES = frozenset({"image", "font"})
PAGE_COUNTED = frozenset({"fetch", "xhr"})
# The page is ready when, after `load`, nothing it waits for is pending (a request, a body, a
# script or stylesheet it added, a counted timer or animation frame), its DOM has not changed
# for QUIET_SECONDS (longer than a frame at 60 Hz) and no routed request has ended for
# ROUTED_QUIET_SECONDS (what a response starts, a module running, a worker's message, is not
# counted); at SETTLE_CAP_SECONDS after `load` when no request is pending (a page that never
# goes quiet), at REQUEST_CAP_SECONDS in any case.
QUIET_SECONDS = 0.02
ROUTED_QUIET_SECONDS = 0.03
# The window while the page has a timer or interval due within 0.1 s that is not waited for
# (READY_SCRIPT's `short`): it may be checking for something that often.
LONGER_QUIET_SECONDS = 0.1
SETTLE_CAP_SECONDS = 2.0
REQUEST_CAP_SECONDS = 5.0
CHECK_SECONDS = 0.1  # the longest the page waits in itself before this process looks again
ROUTED_CHECK_SECONDS = 0.01  # how often a routed request still pending is looked at
# Runs in every frame before the page's scripts: what the page still waits for, and when its DOM
# last changed.
READY_SCRIPT = Path(__file__).with_name("ready.js").read_text(encoding="utf-8")
# The wait: [ms the DOM has not changed, timers and requests pending, the quiet window in ms].
READY_WAIT = (
    "([quiet, longer, most]) => { const s = window.__siftReady;"
    " if (!s) return [1e9, 0, 0, quiet]; return s.settled(quiet, longer, most); }"
)


async def read_frame(reader: asyncio.StreamReader) -> tuple[dict[str, Any], bytes]:
    line = await reader.readline()
    if not line:
        raise EOFError
    header: dict[str, Any] = json.loads(line)
    body = await reader.readexactly(int(header["size"])) if header.get("size") else b""
    return header, body


def write_frame(writer: asyncio.StreamWriter, header: dict[str, Any], body: bytes = b"") -> None:
    if body:
        header = {**header, "size": len(body)}
    writer.write(json.dumps(header).encode() + b"\n" + body)


class Job:
    """One connection's render: its requests to the client, and what it has pending."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.waiting: dict[int, asyncio.Future[tuple[dict[str, Any], bytes]]] = {}
        self.numbers = itertools.count()
        self.pending = 0
        self.last_change = asyncio.get_running_loop().time()

    async def fetch(self, url: str) -> tuple[dict[str, Any], bytes]:
        number = next(self.numbers)
        answer = asyncio.get_running_loop().create_future()
        self.waiting[number] = answer
        write_frame(self.writer, {"fetch": url, "id": number})
        await self.writer.drain()
        return await answer

    async def answers(self) -> None:
        """Hands each answer of the client to the request waiting for it; ends when it goes (an
        error) or gives the render up (``abandon``: it returns)."""
        while True:
            header, body = await read_frame(self.reader)
            if header.get("abandon"):  # its deadline passed: the client gives the render up
                return
            answer = self.waiting.pop(int(header["id"]), None)
            if answer is not None and not answer.done():
                answer.set_result((header, body))


class Tab:
    """A fresh context with one page, its routes bound to the render it will serve.

    Made ahead of the render (the server keeps one spare, never navigated), so a render does not
    wait for the context and the page's renderer process to start; it serves one render only.
    """

    def __init__(self, browser: Browser) -> None:
        self.browser = browser
        self.talk: Job | None = None
        self.job: dict[str, Any] = {}
        self.document = b""
        self.served = False
        self.crashed: list[bool] = []
        # While a caller's actions run, what they would do and may not (fetch/render/actions.py).
        self.acting = False
        self.refusals: list[str] = []

    async def open(self) -> Tab:
        self.context = await self.browser.new_context(
            service_workers="block", accept_downloads=False, permissions=[]
        )
        # Together (one round trip's wait, not four), and all in place before the page exists; the
        # consent library's script where it is installed (fetch/render/consent.py).
        scripts = (READY_SCRIPT, consent.init_script())
        await asyncio.gather(
            *(self.context.add_init_script(script) for script in scripts if script is not None),
            self.context.route("**/*", self.handle),
            self.context.route_web_socket("**/*", refuse_socket),
        )
        self.page = await self.context.new_page()
        # Popups are closed as they open; the page they came from goes on.
        self.context.on("page", self.close_popup)
        self.page.on("dialog", lambda dialog: dialog.dismiss())
        self.page.on("crash", lambda _: self.crashed.append(True))
        self.page.on("download", self.refuse_download)
        return self

    def usable(self) -> bool:
        return self.browser.is_connected() and not self.page.is_closed()

    async def close_popup(self, popup: Page) -> None:
        if popup != self.page:
            self.refused("open a window")
            await popup.close()

    async def refuse_download(self, download: Download) -> None:
        self.refused("download a file")
        await download.cancel()

    def refused(self, what: str) -> None:
        if self.acting:
            self.refusals.append(what)

    async def handle(self, route: Route) -> None:
        request, talk = route.request, self.talk
        if talk is None:
            await route.abort("blockedbyclient")
            return
        if self.acting and request.is_navigation_request() and (leaving := self.leaving(request)):
            self.refused(leaving)
            await route.abort("blockedbyclient")
            return
        if not self.served and request.url == self.job["url"] and request.is_navigation_request():
            self.served = True
            await route.fulfill(status=200, content_type=self.job["content_type"], body=self.document)
            return
        if request.method != "GET" or self.skipped(request.resource_type):
            await route.abort("blockedbyclient")
            return
        # The page counts its own fetch() and XHR (READY_SCRIPT), and knows which of them poll.
        counted = request.resource_type not in PAGE_COUNTED
        talk.pending += counted
        try:
            answer, body = await talk.fetch(request.url)
            if "refused" in answer:
                await route.abort("blockedbyclient")
            else:
                await route.fulfill(status=answer["status"], content_type=answer["content_type"], body=body)
        finally:
            if counted:
                talk.pending -= 1
                talk.last_change = asyncio.get_running_loop().time()

    async def render(self, talk: Job, job: dict[str, Any], document: bytes) -> visit.Visited:
        """The page's DOM once it is ready and a person's work on it done (``visit.finish``),
        hidden marks set; the tab serves no other render."""
        self.talk, self.job, self.document = talk, job, document
        # The client ends the render at its deadline; this bound only keeps a lost one from staying.
        await self.page.goto(job["url"], wait_until="load", timeout=job["timeout_ms"] + 5000)
        await settle(self.page, talk)
        return await visit.finish(self)

    def leaving(self, request: Request) -> str | None:
        """What a navigation would do that a caller's step may not: the page's own top frame going
        elsewhere, or a new window's (whose frame Playwright does not know yet) first page."""
        try:
            frame = request.frame
        except Error:
            return "open a window"
        if frame == self.page.main_frame:
            return "take the page elsewhere"
        return "open a window" if frame.parent_frame is None else None

    def skipped(self, resource_type: str) -> bool:
        pictured = bool(self.job.get("screenshot")) and resource_type in PICTURED_TYPES
        return resource_type in SKIPPED_TYPES and not pictured

    async def settled(self) -> None:
        """The page settled again (after a person's step)."""
        assert self.talk is not None
        await settle(self.page, self.talk)

    async def read(self) -> str:
        """The DOM, what a reader cannot see marked, read in a world of its own (``visibility``)."""
        return await read_marked(self.page)

    async def close(self) -> None:
        with contextlib.suppress(Error):
            await self.context.close()


async def refuse_socket(socket: WebSocketRoute) -> None:
    # Never connect_to_server: the socket ends here without a connection anywhere.
    await socket.close(code=1008, reason="sift refuses WebSockets")


async def settle(page: Page, talk: Job) -> None:
    """Wait until the page is quiet (docs/rendering.md, "When a page is ready"), at most the caps.

    The page waits in itself (READY_SCRIPT's ``settled``) for its own counts and DOM, up to
    CHECK_SECONDS at a time; what only this process knows, the routed requests, is added here.
    """
    loop = asyncio.get_running_loop()
    loaded = loop.time()
    while loop.time() - loaded < REQUEST_CAP_SECONDS:
        try:
            windows = [QUIET_SECONDS * 1000, LONGER_QUIET_SECONDS * 1000, CHECK_SECONDS * 1000]
            unchanged_ms, timers, requests, window_ms = await page.evaluate(READY_WAIT, windows)
        except Error:
            return  # a page navigating away or gone is read as it is
        requests += talk.pending
        now = loop.time()
        routed_quiet = now - talk.last_change >= ROUTED_QUIET_SECONDS
        if requests == 0 and timers == 0 and routed_quiet and unchanged_ms >= window_ms:
            return
        if requests == 0 and now - loaded >= SETTLE_CAP_SECONDS:
            return  # never quiet: polling, animating
        if talk.pending or not routed_quiet:  # the page alone would not wait
            await asyncio.sleep(max(ROUTED_CHECK_SECONDS, ROUTED_QUIET_SECONDS - (now - talk.last_change)))
    # a request pending at the cap: the page is read as it is
