"""A FetchFunc that only downloads, for ``bench/batch_latency.py --fetch plain``: no cache, gate,
guard or extraction, so that a job's time over the ideal is the engine's (claims, stores, the
job's start) and the bare HTTP exchange's.

Point ``SIFT_TEST_FETCH_FUNC`` at ``bench.plain_get.get``. It fetches loopback URLs only.
"""

from __future__ import annotations

import http.client
import time
from urllib.parse import urlsplit

from batch.engine.worker import Caller, Result
from fetch.targets import Target

LOOPBACK = "127.0.0.1"


def get(caller: Caller, target: Target) -> Result:
    url = urlsplit(target.url)
    if url.scheme != "http" or url.hostname != LOOPBACK:
        raise ValueError(f"bench.plain_get fetches http://{LOOPBACK} only")
    started = time.monotonic()
    conn = http.client.HTTPConnection(LOOPBACK, url.port, timeout=30)
    try:
        conn.request("GET", url.path)
        body = conn.getresponse().read()
    finally:
        conn.close()
    elapsed_ms = round((time.monotonic() - started) * 1000)
    return {"content": body.decode(errors="replace"), "meta": {"elapsed_ms": elapsed_ms}}
