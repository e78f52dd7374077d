"""The browser side of rendering, run as a child with an empty environment (docs/rendering.md).

It imports nothing of sift and no Django: the parent starts it as a plain script with ``-I``, so
Playwright's driver and Chromium inherit only what the parent gave this process. Every request
the page makes is routed here and handed to the parent over stdout; the parent fetches it with
sift's guarded client and answers over stdin. This process never opens a connection itself.

The child keeps one browser warm and renders one job after another, each in a fresh context;
its parent kills it (and so the browser) after any render that did not end well.

Protocol, one JSON object per line. Parent → child: a job ``{"chromium", "url", "body",
"content_type", "timeout_ms"}``, then answers ``{"status", "content_type", "body"}`` or
``{"refused": reason}``. Child → parent: ``{"fetch": url}``, then ``{"html": ...}`` or
``{"failed": reason, "page_crashed": bool}``. Bodies are base64. ``page_crashed`` says the tab
died while the browser lived on: Chromium ends a tab whose page outgrew its V8 heap
(``--max-old-space-size``) or whose renderer process was killed for its memory, and Playwright
reports it as a ``crash`` event and "Page crashed"; the parent reports that as ``memory_limit``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser, Error, Route, WebSocketRoute, sync_playwright

# Fail closed: a request that escaped interception goes to a proxy on a closed port, and
# loopback is not exempt from it (Chromium bypasses the proxy for loopback by default).
LAUNCH_ARGS = [
    "--proxy-server=http://127.0.0.1:9",
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
    "OptimizationHints,DialMediaRouteProvider",
    "--js-flags=--max-old-space-size=256",
    "--disable-dev-shm-usage",
]
# Marks each element the page's computed style hides, for fetch/hidden.py to drop.
HIDDEN_MARKS = Path(__file__).with_name("hidden_marks.js").read_text(encoding="utf-8")
# Skipped for speed: they never change the text.
SKIPPED_TYPES = frozenset({"image", "media", "font"})


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def receive() -> dict[str, Any]:
    line = sys.stdin.readline()
    if not line:
        raise SystemExit(0)
    answer: dict[str, Any] = json.loads(line)
    return answer


crashed: list[bool] = []


def render(browser: Browser, job: dict[str, Any]) -> str:
    """One page in a fresh context of the warm browser; the context goes with the render."""
    document = base64.b64decode(job["body"])
    served = False
    crashed.clear()

    def handle(route: Route) -> None:
        nonlocal served
        request = route.request
        if not served and request.url == job["url"] and request.is_navigation_request():
            served = True
            route.fulfill(status=200, content_type=job["content_type"], body=document)
            return
        if request.method != "GET" or request.resource_type in SKIPPED_TYPES:
            route.abort("blockedbyclient")
            return
        send({"fetch": request.url})
        answer = receive()
        if "refused" in answer:
            route.abort("blockedbyclient")
            return
        route.fulfill(
            status=answer["status"],
            content_type=answer["content_type"],
            body=base64.b64decode(answer["body"]),
        )

    def refuse_socket(socket: WebSocketRoute) -> None:
        # Never connect_to_server: the socket ends here without a connection anywhere.
        socket.close(code=1008, reason="sift refuses WebSockets")

    context = browser.new_context(
        service_workers="block", accept_downloads=False, permissions=[], java_script_enabled=True
    )
    context.route("**/*", handle)
    context.route_web_socket("**/*", refuse_socket)
    page = context.new_page()
    # Popups are closed as they open; the page they came from goes on.
    context.on("page", lambda popup: popup.close() if popup != page else None)
    page.on("dialog", lambda dialog: dialog.dismiss())
    # The tab dies alone when the page outgrows its V8 heap (--max-old-space-size): the page's
    # own doing, unlike a browser that went away.
    page.on("crash", lambda _: crashed.append(True))
    page.goto(job["url"], wait_until="load", timeout=job["timeout_ms"])
    with contextlib.suppress(Error):  # a page that keeps polling is read as it is now
        page.wait_for_load_state("networkidle", timeout=min(2000, job["timeout_ms"]))
    try:
        page.evaluate(HIDDEN_MARKS)
        return page.content()
    finally:
        context.close()


def main() -> None:
    """One warm browser for this child's life: it renders job after job until its parent goes."""
    job = receive()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=job["chromium"], args=LAUNCH_ARGS, env={}, headless=True
        )
        while True:
            try:
                send({"html": render(browser, job)})
            except Error as exc:
                reason = str(exc).splitlines()[0] if str(exc) else "the browser failed"
                tab_died = bool(crashed) or "Page crashed" in reason
                send({"failed": reason, "page_crashed": tab_died and browser.is_connected()})
                if not browser.is_connected():
                    return  # the parent starts a new child, and with it a new browser
            job = receive()


if __name__ == "__main__":
    main()
