"""Twelve script-built pages for ``bench/render.py``, each with the text a render must find.

Each page writes its marker sentence with a script, in a different way: inline, on
DOMContentLoaded, after a ``fetch()`` of JSON, after a 300 ms timer, from an external bundle (an
app shell), from a module script, at the end of an XHR chain, after ``load``; plus a static
control, a page with 10 stylesheets and scripts, a page that polls forever and a 2,000-paragraph
DOM. Served on loopback by a threading HTTP server; ``/poll.json`` answers forever.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOOPBACK = "127.0.0.1"


def _marker(name: str) -> str:
    return f"The {name} page wrote this sentence about neap tides and harbour charts."


def _page(body: str, head: str = "") -> bytes:
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Bench</title>{head}</head>'
        '<body><main><article id="out"><h1>Bench page</h1><p>Loading…</p></article></main>'
        f"{body}</body></html>"
    ).encode()


def _write(name: str) -> str:
    """JavaScript that appends the page's marker paragraph to the article."""
    return (
        f'{{const p = document.createElement("p"); p.textContent = {json.dumps(_marker(name))};'
        ' document.getElementById("out").appendChild(p);}'
    )


def build() -> tuple[dict[str, tuple[str, bytes]], dict[str, str]]:
    """The files served (path → content type, body) and each page's marker (path → sentence)."""
    files: dict[str, tuple[str, bytes]] = {}
    markers: dict[str, str] = {}
    html, js, css = "text/html; charset=utf-8", "text/javascript", "text/css"

    def page(name: str, body: str, head: str = "") -> None:
        files[f"/{name}"] = (html, _page(body, head))
        markers[f"/{name}"] = _marker(name)

    page("inline", f"<script>{_write('inline')}</script>")
    page(
        "domcontentloaded",
        "<script>document.addEventListener('DOMContentLoaded', () => "
        f"{_write('domcontentloaded')});</script>",
    )
    files["/story.json"] = ("application/json", json.dumps({"ok": True}).encode())
    page(
        "fetch-json",
        f'<script>fetch("/story.json").then(r => r.json()).then(() => {_write("fetch-json")});</script>',
    )
    page("timer", f"<script>setTimeout(() => {_write('timer')}, 300);</script>")
    files["/bundle.js"] = (
        js,
        ("document.addEventListener('DOMContentLoaded', () => {" + _write("app-shell") + "});").encode(),
    )
    page("app-shell", '<div id="root"></div>', head='<script defer src="/bundle.js"></script>')
    files["/static"] = (html, _page(f"<p>{_marker('static')}</p>"))
    markers["/static"] = _marker("static")
    head = "".join(f'<link rel="stylesheet" href="/s{n}.css">' for n in range(5))
    scripts = "".join(f'<script src="/s{n}.js"></script>' for n in range(5))
    for n in range(5):
        files[f"/s{n}.css"] = (css, f".c{n} {{ color: #00{n}; }}\n".encode() * 200)
        files[f"/s{n}.js"] = (js, f"window.part{n} = {n};\n".encode() + b"// padding\n" * 200)
    page(
        "subresources",
        scripts + f"<script>if (window.part4 === 4) {_write('subresources')}</script>",
        head=head,
    )
    files["/poll.json"] = ("application/json", b'{"tick": 1}')
    page(
        "polling",
        "<script>let n = 0; setInterval(() => fetch('/poll.json').then(r => r.json()).then(() => {"
        " document.title = 'tick ' + (++n); }), 200);"
        f"fetch('/poll.json').then(() => {_write('polling')});</script>",
    )
    page(
        "big-dom",
        "<script>const out = document.getElementById('out');"
        " for (let i = 0; i < 2000; i++) { const p = document.createElement('p');"
        " p.textContent = 'Paragraph ' + i + ' of the long page about tides, currents and charts.';"
        f" out.appendChild(p); }} {_write('big-dom')}</script>",
    )
    files["/chain-1.json"] = ("application/json", b'{"next": "/chain-2.json"}')
    files["/chain-2.json"] = ("application/json", b'{"next": "/chain-3.json"}')
    files["/chain-3.json"] = ("application/json", b'{"next": null}')
    page(
        "xhr-chain",
        "<script>function get(url) { const x = new XMLHttpRequest(); x.open('GET', url);"
        " x.onload = () => { const next = JSON.parse(x.responseText).next;"
        f" if (next) get(next); else {_write('xhr-chain')} }}; x.send(); }} get('/chain-1.json');</script>",
    )
    files["/module.js"] = (js, ("export function show() " + _write("module") + "").encode())
    page("module", '<script type="module">import { show } from "/module.js"; show();</script>')
    page(
        "after-load",
        "<script>window.addEventListener('load', () => fetch('/story.json')"
        f".then(() => {_write('after-load')}));</script>",
    )
    return files, markers


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, files: dict[str, tuple[str, bytes]]) -> None:
        super().__init__((LOOPBACK, 0), _Handler)
        self.files = files


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        content_type, body = self.server.files.get(self.path.split("?")[0], ("text/plain", b""))
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serving(files: dict[str, tuple[str, bytes]]) -> Iterator[int]:
    server = _Server(files)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
