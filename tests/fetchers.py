"""A scripted FetchFunc for the worker tests, steered by the target URL's query string.

    ?sleep=0.2        take that long
    ?fail=timeout     fail with that outcome
    ?busy=2           answer busy for the first 2 attempts (``?busy=always`` never stops)
    ?wait=3           with busy: ask for that many seconds of wait
    ?block=1          block until the file ``release`` appears in SIFT_TEST_FETCH_DIR
    ?boom=1           raise an unexpected exception

Every call appends ``start``/``end`` lines (time, pid, url) to ``calls.log`` in
SIFT_TEST_FETCH_DIR, so tests can count calls and measure concurrency across processes.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from batch.engine.worker import Caller, Result, RetryLater, TargetFailed
from fetch.outcomes import Outcome
from fetch.targets import Target


def _dir() -> Path:
    return Path(os.environ["SIFT_TEST_FETCH_DIR"])


def _record(event: str, url: str) -> None:
    with open(_dir() / "calls.log", "a") as log:
        log.write(f"{event} {time.time():.6f} {os.getpid()} {url}\n")


def _count_attempt(url: str) -> int:
    counter = _dir() / ("attempts-" + hashlib.sha256(url.encode()).hexdigest()[:16])
    with open(counter, "a") as f:
        f.write("x")
    return counter.stat().st_size


def scripted(caller: Caller, target: Target) -> Result:
    params = {k: v[0] for k, v in parse_qs(urlsplit(target.url).query).items()}
    _record("start", target.url)
    try:
        return _behave(caller, target, params)
    finally:
        _record("end", target.url)


def _behave(caller: Caller, target: Target, params: dict[str, str]) -> Result:
    attempt = _count_attempt(target.url)
    if "busy" in params and (params["busy"] == "always" or attempt <= int(params["busy"])):
        raise RetryLater("upstream said 429", wait=float(params["wait"]) if "wait" in params else None)
    if "block" in params:
        (_dir() / f"blocked-{os.getpid()}").write_text(target.url)
        while not (_dir() / "release").exists():
            time.sleep(0.05)
    time.sleep(float(params.get("sleep", 0)))
    if "fail" in params:
        raise TargetFailed(Outcome.of(params["fail"]), f"scripted {params['fail']}", "scripted hint")
    if "boom" in params:
        raise RuntimeError("scripted crash")
    return {"content": f"content of {target.url}", "meta": {"caller": caller.name, "attempt": attempt}}


def read_calls(directory: Path) -> list[tuple[str, float, int, str]]:
    path = directory / "calls.log"
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        event, at, pid, url = line.split(" ", 3)
        rows.append((event, float(at), int(pid), url))
    return rows


def max_concurrency(directory: Path) -> int:
    level = peak = 0
    for event, *_ in sorted(read_calls(directory), key=lambda row: (row[1], row[0] == "start")):
        level += 1 if event == "start" else -1
        peak = max(peak, level)
    return peak
