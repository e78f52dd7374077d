"""The browser side of rendering: one shared render process per machine (docs/rendering.md).

It imports nothing of sift and no Django but ``tab.py`` (one render in its tab), what a person
does in it (``visit.py``, ``consent.py``, ``actions.py``, ``screenshot.py``), how the DOM is read
with what a reader cannot see marked (``visibility.py``) and ``sift_site/log_lines.py`` (how its
lines are written, standard library only):
``fetch/render/server_process.py`` starts it as a plain script with
``python -I``, an environment of ``PATH``, Node's compile cache and how to log only and, where the platform
allows, in a network namespace of its own (``unshare --user --map-root-user --net``: only a
loopback that is down), so Playwright's driver and Chromium inherit no secret and have no route.

It listens on a Unix socket (``argv[1]``); each connection is one render, in a fresh context
made ahead of it (one spare). Every request the page makes is routed here and handed to the
connection's client, which fetches it with sift's guarded client; the route handlers run
concurrently (Playwright's async API), so a page's subrequests are asked for together. Started
for a render (``argv[4:]`` = ``for PID``, the starter's), it launches the browser (``argv[3]``)
at once, and ends, browser and all, after ``argv[2]`` seconds without a render or once the
processes it serves have all ended: its starter and every process that sent it a render or a
start (known by the socket's peer credentials), so it stops with the deployment that used it.
As the render line (``argv[4:]`` = ``line FD``: the starters' lock, released once it listens) it
runs until SIGTERM or SIGINT, starts the browser for the first render and after ``argv[2]``
seconds without one closes it and Playwright's driver, returning their memory.
Frames, both ways: a JSON line, then ``size`` raw bytes when it has a ``size``.
Server → client: ``{"pid", "line"}`` on connecting; ``{"started": true}`` once the browser and the
page's context are ready; ``{"fetch": url, "id"}`` for each request of the page; last
``{"screenshot": kind, "type", "width", "height", "size"}`` with the picture when one was asked,
then ``{"html": true, "consent", "size"}`` with the DOM as UTF-8; or ``{"failed": reason,
"page_crashed": bool}``, ``{"action_failed": index, "reason"}``, ``{"too_large": reason}``.
Client → server: the job ``{"chromium", "url", "content_type", "timeout_ms", "consent",
"actions", "screenshot", "size"}`` with the document's bytes, then answers
``{"id", "status", "content_type", "size"}`` or ``{"id", "refused": reason}``; or, past the
render's deadline, ``{"abandon": true}``: the render is given up and its context closed, only
its, and the server says ``{"abandoned": bool}`` (whether the context closed within
``ABANDON_CLOSE_SECONDS``; if not, the client kills the render process's tree). ``page_crashed``:
the tab died (its V8 heap, ``--max-old-space-size``, or its renderer killed for memory) while the
browser lived on. A connection may instead bring ``{"start": true, "chromium"}`` (a render is on
its way: start the browser) or ``{"reset": true}`` (its driver and browser were killed: drop
them). A file beside the socket, ``<socket>.browser``, exists while the browser runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import struct
import sys
from pathlib import Path
from typing import Any

if not __package__:  # run as a script (``python -I``): its one sibling is found from the checkout
    sys.path.append(str(Path(__file__).resolve().parents[2]))

from playwright.async_api import Browser, Error, Playwright, async_playwright

from fetch.render.actions import ActionFailed
from fetch.render.screenshot import ScreenshotTooLarge
from fetch.render.tab import Job, Tab, read_frame, write_frame
from fetch.render.visit import Visited
from sift_site.log_lines import configure_isolated

logger = logging.getLogger("fetch.render.server")

# Fail closed: a request that escaped interception (the page's, or the browser's own background
# traffic) goes to a proxy whose name resolves nowhere: every host name maps to NOTFOUND, so no
# connection is even tried, and loopback is not exempt from the proxy (Chromium bypasses it for
# loopback by default). In the network namespace there is no route at all besides.
LAUNCH_ARGS = [
    "--proxy-server=http://sift-no-proxy.invalid:9",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--proxy-bypass-list=<-loopback>",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--disable-sync",
    "--no-pings",
    "--dns-prefetch-disable",
    "--disable-features=NetworkPrediction,InterestFeedContentSuggestions,MediaRouter,"
    "OptimizationHints,DialMediaRouteProvider,AutofillServerCommunication,NetworkTimeServiceQuerying",
    "--disable-blink-features=SharedWorker",
    "--js-flags=--max-old-space-size=256",
    "--disable-dev-shm-usage",
]
SPARE_WAIT_SECONDS = 3.0  # how long a render waits for the spare tab before making its own
# A render's tab is closed and the next spare made this long after its answer, not beside the
# caller's extraction of it; a render that comes sooner begins them at once.
TIDY_SECONDS = 0.05
CLOSE_SECONDS = 5.0  # a browser or driver slower to close is left to end with this process
# A render given up at its deadline has its context closed within this, or the client kills the
# tree (server_process.ABANDON_SECONDS waits a little longer for the answer).
ABANDON_CLOSE_SECONDS = 2.5
_PEER_CREDENTIALS = struct.Struct("3i")  # SO_PEERCRED: pid, uid, gid


def started_at(pid: int) -> str | None:
    """When process ``pid`` started (its ``/proc`` start time), None if it has ended (a zombie
    too): with the pid, it names one process even after its pid is given to another."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else fields[19]


class Server:
    def __init__(self, idle_seconds: float, line: bool, browser_mark: Path) -> None:
        self.idle_seconds, self.line, self.browser_mark = idle_seconds, line, browser_mark
        self.playwright: Playwright | None = None
        self.browser: Browser | None = None
        self.launching = asyncio.Lock()
        self.spare: asyncio.Task[Tab] | None = None
        self.finished: list[Tab] = []
        self.closing: set[asyncio.Task[None]] = set()
        self.tidying: asyncio.TimerHandle | None = None
        self.active = 0
        self.last_used = asyncio.get_running_loop().time()
        self.users: dict[int, str] = {}  # started for a render: the processes it serves

    def serves(self, pid: int) -> None:
        """Count process ``pid`` among those this render process lives for (not the line)."""
        started = None if self.line else started_at(pid)
        if started is not None:
            self.users[pid] = started

    def users_gone(self) -> bool:
        """Whether every process this render process served has ended (never for the line)."""
        self.users = {pid: started for pid, started in self.users.items() if started_at(pid) == started}
        return not self.line and not self.users

    async def browser_for(self, chromium: str) -> Browser:
        async with self.launching:
            if self.browser is None or not self.browser.is_connected():
                if self.playwright is None:
                    self.playwright = await async_playwright().start()
                self.browser = await self.playwright.chromium.launch(
                    executable_path=chromium, args=LAUNCH_ARGS, env={}, headless=True
                )
                self.browser_mark.touch()
                logger.info("render process %d: browser started", os.getpid())
            return self.browser

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.active += 1
        self.tidy()
        try:
            write_frame(writer, {"pid": os.getpid(), "line": self.line})
            await writer.drain()
            job, document = await read_frame(reader)
            # Only a connection that asks for something counts its process: a probe for the pid
            # (server_process.listening_pid) does not keep this process up.
            peer = writer.get_extra_info("socket").getsockopt(
                socket.SOL_SOCKET, socket.SO_PEERCRED, _PEER_CREDENTIALS.size
            )
            self.serves(_PEER_CREDENTIALS.unpack(peer)[0])
            if job.get("reset"):  # its browser and driver were killed (a render's stop): anew later
                await self.close()
                return
            if job.get("start"):  # a render is on its way (its page downloading): the browser now
                with contextlib.suppress(Error):
                    await self.start(job["chromium"])
                return
            talk, opened = Job(reader, writer), list[Tab]()
            listening = asyncio.create_task(talk.answers())
            rendering = asyncio.create_task(self.render(talk, job, document, opened))
            await asyncio.wait({listening, rendering}, return_when=asyncio.FIRST_COMPLETED)
            if rendering.done():
                listening.cancel()
                visited, failed = rendering.result()
                if visited is not None:
                    if visited.picture is not None:
                        write_frame(writer, *visited.picture)
                    write_frame(
                        writer, {"html": True, "consent": visited.consent}, visited.html.encode("utf-8")
                    )
                else:
                    write_frame(writer, failed or {})
                await writer.drain()
            else:  # the client went, or gave the render up at its deadline
                rendering.cancel()
                with contextlib.suppress(BaseException):
                    await rendering
                if listening.exception() is None:  # given up: its context alone goes, now
                    write_frame(writer, {"abandoned": await self.close_now(opened)})
                    await writer.drain()
        except (EOFError, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.active -= 1
            self.last_used = asyncio.get_running_loop().time()
            writer.close()
            if self.tidying is None:
                self.tidying = asyncio.get_running_loop().call_later(TIDY_SECONDS, self.tidy)

    async def tab(self, chromium: str) -> Tab:
        """The spare tab if it is ready on the running browser, a new one otherwise; the next
        spare is begun shortly after this render's answer (``tidy``)."""
        browser = await self.browser_for(chromium)
        spare, self.spare = self.spare, None
        if spare is not None:
            # A spare being made when the browser died may never be ready: wait for it briefly.
            with contextlib.suppress(Error, TimeoutError):
                tab = await asyncio.wait_for(spare, SPARE_WAIT_SECONDS)
                if tab.browser is browser and tab.usable():
                    return tab
                await tab.context.close()
        try:
            return await Tab(browser).open()
        except Error:  # its driver was killed with the browser (a render's stop): both anew, once
            await self.close()
            return await Tab(await self.browser_for(chromium)).open()

    async def start(self, chromium: str) -> None:
        """The browser, then a spare tab: begun before a render waiting for the browser resumes."""
        await self.browser_for(chromium)
        self.prepare_spare()

    def tidy(self) -> None:
        """The next spare begun and the finished tabs closed, now."""
        if self.tidying is not None:
            self.tidying.cancel()
            self.tidying = None
        self.prepare_spare()
        for tab in self.finished:
            closing = asyncio.create_task(tab.close())
            self.closing.add(closing)
            closing.add_done_callback(self.closing.discard)
        self.finished.clear()

    def prepare_spare(self) -> None:
        if self.spare is None and self.browser is not None and self.browser.is_connected():
            self.spare = asyncio.create_task(Tab(self.browser).open())

    async def close_now(self, opened: list[Tab]) -> bool:
        """Close a given-up render's tab (its context, and the renderer process of its page) now,
        leaving every other render of the browser alone; whether it closed in time."""
        for tab in opened:
            with contextlib.suppress(ValueError):
                self.finished.remove(tab)
            try:
                await asyncio.wait_for(tab.close(), ABANDON_CLOSE_SECONDS)
            except TimeoutError:
                return False
        return bool(opened)

    async def render(
        self, talk: Job, job: dict[str, Any], document: bytes, opened: list[Tab]
    ) -> tuple[Visited | None, dict[str, Any] | None]:
        tab: Tab | None = None
        try:
            tab = await self.tab(job["chromium"])
            opened.append(tab)
            write_frame(talk.writer, {"started": True})  # the render's deadline starts now
            await talk.writer.drain()
            return await tab.render(talk, job, document), None
        except ActionFailed as exc:
            return None, {"action_failed": exc.index, "reason": exc.reason}
        except ScreenshotTooLarge as exc:
            return None, {"too_large": str(exc)}
        except Error as exc:
            reason = str(exc).splitlines()[0] if str(exc) else "the browser failed"
            tab_died = (tab is not None and bool(tab.crashed)) or "Page crashed" in reason
            alive = self.browser is not None and self.browser.is_connected()
            return None, {"failed": reason, "page_crashed": tab_died and alive}
        finally:
            if tab is not None:  # closed after the answer went out, not before (``tidy``)
                self.finished.append(tab)

    async def run(self) -> None:
        """Until a stop signal; or, started for a render, until it has been idle for its time or
        the processes it served have all ended."""
        loop = asyncio.get_running_loop()
        stopping = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stopping.set)
        while not stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), min(1.0, self.idle_seconds))
            if self.active == 0 and self.users_gone():
                return
            if self.active == 0 and loop.time() - self.last_used >= self.idle_seconds:
                if not self.line:
                    return
                if self.playwright is not None:
                    await self.close()
                    logger.info(
                        "render process %d: browser closed, idle %.0fs", os.getpid(), self.idle_seconds
                    )

    async def close(self) -> None:
        """The browser and Playwright's driver closed; a later render starts them again."""
        async with self.launching:
            self.browser_mark.unlink(missing_ok=True)
            spare, self.spare = self.spare, None
            if spare is not None:
                spare.cancel()
            with contextlib.suppress(Exception):
                if self.browser is not None:
                    await asyncio.wait_for(self.browser.close(), CLOSE_SECONDS)
                if self.playwright is not None:
                    await asyncio.wait_for(self.playwright.stop(), CLOSE_SECONDS)
            self.browser = self.playwright = None


async def main(path: str, idle_seconds: float, chromium: str, line_lock: int | None, starter: int) -> None:
    server = Server(idle_seconds, line=line_lock is not None, browser_mark=Path(f"{path}.browser"))
    server.serves(starter)
    listener = await asyncio.start_unix_server(server.serve, path=path, limit=1 << 20)
    os.chmod(path, 0o600)
    logger.debug(
        "render process %d listening (%s)",
        os.getpid(),
        "the render line" if line_lock is not None else f"for {starter}",
    )
    if line_lock is not None:
        os.close(line_lock)  # listening: starters may look now
    else:  # started for a render on its way: the browser starts while it comes, then a spare tab
        starting = asyncio.create_task(server.start(chromium))
        starting.add_done_callback(lambda task: task.cancelled() or task.exception())
    try:
        await server.run()
    finally:
        listener.close()
        with contextlib.suppress(OSError):
            os.unlink(path)
        await server.close()
        logger.info("render process %d stopped", os.getpid())


if __name__ == "__main__":
    configure_isolated(dict(os.environ))  # its lines as the process that started it writes them
    role, number = sys.argv[4], int(sys.argv[5])
    line_lock, starter = (number, 0) if role == "line" else (None, number)
    asyncio.run(main(sys.argv[1], float(sys.argv[2]), sys.argv[3], line_lock, starter))
