"""The sandbox: warm children with CPU, memory and wall limits, shared by threads and processes."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from fetch.errors import FetchError
from fetch.outcomes import Outcome
from fetch.sandbox import pipes
from fetch.sandbox import pool as sandbox_module
from fetch.sandbox.pool import Sandbox, get_sandbox
from tests.fixtures.pdf_writer import build_pdf

LIMITS: dict[str, Any] = {
    "subject": "the test program",
    "hint": "Try something smaller.",
    "max_reply_bytes": 1 << 20,
}


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    pool = Sandbox(children=2)
    yield pool
    pool.close()


def ping(pool: Sandbox) -> int:
    reply, _ = pool.run("ping", {}, b"", cpu_seconds=5, wall_seconds=10, **LIMITS)
    return int(reply["pid"])


def jq(pool: Sandbox, program: str, *, cpu: float = 2, wall: float = 10, **overrides: Any) -> str:
    limits = {**LIMITS, **overrides}
    _, data = pool.run(
        "json",
        {"program": program, "max_chars": 1000},
        b"[1, 2, 3]",
        cpu_seconds=cpu,
        wall_seconds=wall,
        **limits,
    )
    return data.decode()


def counted(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_a_child_is_started_once_and_reused_by_the_next_call(sandbox: Sandbox) -> None:
    assert ping(sandbox) == ping(sandbox)


def test_a_runaway_program_ends_with_filter_timeout_and_a_new_child_serves_the_next_call(
    sandbox: Sandbox,
) -> None:
    before = ping(sandbox)

    with pytest.raises(FetchError) as caught:
        jq(sandbox, "def f: f; f", cpu=1)

    assert caught.value.outcome == "filter_timeout"
    assert "CPU time" in caught.value.message
    assert caught.value.hint == "Try something smaller."
    assert jq(sandbox, ".[1]") == "2"
    assert ping(sandbox) != before


def test_the_wall_deadline_ends_a_child_that_does_not_answer_in_time(sandbox: Sandbox) -> None:
    kills = counted("sift_sandbox_kills_total", reason="filter_timeout")
    with pytest.raises(FetchError) as caught:
        jq(sandbox, "def f: f; f", cpu=60, wall=0.5)

    assert caught.value.outcome == "filter_timeout"
    assert "took longer than" in caught.value.message
    assert jq(sandbox, ".[0]") == "1"
    assert counted("sift_sandbox_kills_total", reason="filter_timeout") == kills + 1
    assert counted("sift_sandbox_children_busy") == 0


def test_a_child_that_exhausts_its_memory_is_memory_limit_and_is_replaced() -> None:
    pool = Sandbox(children=1, memory_bytes=256 << 20)
    kills = counted("sift_sandbox_kills_total", reason="memory_limit")
    try:
        before = ping(pool)
        with pytest.raises(FetchError) as caught:
            jq(pool, "[range(1e9)] | length", cpu=60, wall=60, memory_hint="Build less.")
        assert counted("sift_sandbox_kills_total", reason="memory_limit") == kills + 1

        assert caught.value.outcome == "memory_limit"
        assert caught.value.http_status == 422
        # jq aborts when an allocation fails under RLIMIT_AS: the signal says it was memory.
        assert caught.value.message == "the test program ran out of memory (ended by SIGABRT)"
        assert caught.value.hint == "Build less."
        assert jq(pool, "length") == "3"
        assert ping(pool) != before
    finally:
        pool.close()


def test_a_payload_the_child_has_no_memory_to_read_is_memory_limit() -> None:
    # A child holds about 60 MB of address space once its parsers are imported: 96 MiB leaves it
    # no room for a 63 MiB request, and the MemoryError comes before any op runs.
    pool = Sandbox(children=1, memory_bytes=96 << 20)
    try:
        before = ping(pool)
        with pytest.raises(FetchError) as caught:
            pool.run("ping", {}, b"x" * (63 << 20), cpu_seconds=5, wall_seconds=30, **LIMITS)

        assert caught.value.outcome == "memory_limit"
        assert caught.value.message == "the test program ran out of memory"
        assert ping(pool) != before
    finally:
        pool.close()


def test_without_a_memory_hint_of_its_own_memory_limit_carries_the_outcomes_hint() -> None:
    pool = Sandbox(children=1, memory_bytes=256 << 20)
    try:
        with pytest.raises(FetchError) as caught:
            jq(pool, "[range(1e9)] | length", cpu=60, wall=60)

        assert caught.value.outcome == "memory_limit"
        assert caught.value.hint == Outcome.MEMORY_LIMIT.hint
    finally:
        pool.close()


def test_a_child_that_ends_for_another_reason_is_internal_and_is_replaced(sandbox: Sandbox) -> None:
    before = ping(sandbox)

    # An op the child does not know raises in it, uncaught: the child exits with status 1.
    with pytest.raises(FetchError) as caught:
        sandbox.run("no_such_op", {}, b"", cpu_seconds=5, wall_seconds=10, **LIMITS)

    assert caught.value.outcome == "internal"
    assert caught.value.message == "the test program failed"
    assert ping(sandbox) != before


def test_a_child_killed_while_idle_is_replaced_transparently(sandbox: Sandbox) -> None:
    victim = ping(sandbox)
    os.kill(victim, signal.SIGKILL)
    time.sleep(0.2)

    assert jq(sandbox, ".[2]") == "3"
    assert ping(sandbox) != victim


def test_a_reply_larger_than_the_caller_accepts_is_refused_and_the_child_replaced(sandbox: Sandbox) -> None:
    before = ping(sandbox)

    with pytest.raises(FetchError) as caught:
        jq(sandbox, "[range(100)]", max_reply_bytes=10)

    assert caught.value.outcome == "internal"
    assert ping(sandbox) != before


def test_a_caller_waiting_for_a_busy_pool_gets_busy_with_retry_after() -> None:
    pool = Sandbox(children=1)
    occupied = threading.Event()

    def occupy() -> None:
        occupied.set()
        with pytest.raises(FetchError):
            jq(pool, "def f: f; f", cpu=2, wall=10)

    worker = threading.Thread(target=occupy)
    worker.start()
    try:
        occupied.wait()
        time.sleep(0.3)  # let the worker take the only child
        with pytest.raises(FetchError) as caught:
            jq(pool, ".", wall=0.5)
        assert caught.value.outcome == "busy"
        assert caught.value.retry_after
    finally:
        worker.join()
        pool.close()


def test_many_threads_share_the_pool_and_each_gets_its_own_answer(sandbox: Sandbox) -> None:
    results: dict[int, str] = {}
    barrier = threading.Barrier(8)

    def call(index: int) -> None:
        barrier.wait()
        results[index] = jq(sandbox, f".[0] + {index}")

    threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert results == {i: str(1 + i) for i in range(8)}


def _pdf_in_daemonic_worker(queue: Any) -> None:
    from fetch.documents.pdf_text import pdf_text

    try:
        pdf = pdf_text(build_pdf([["first"], ["second"]]), ((2, 2),), max_chars=10_000)
        queue.put(("ok", pdf.content, ping(get_sandbox())))
    except BaseException as exc:  # report anything, the test asserts on it
        queue.put(("error", repr(exc), 0))


def test_pdfs_are_read_from_inside_a_daemonic_multiprocessing_worker_with_its_own_children() -> None:
    parent_child = ping(get_sandbox())  # the parent process has a warm child before the fork
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    worker = context.Process(target=_pdf_in_daemonic_worker, args=(queue,), daemon=True)
    worker.start()
    status, content, worker_child = queue.get(timeout=60)
    worker.join(timeout=10)

    assert (status, content) == ("ok", "## Page 2\n\nsecond")
    assert worker_child != parent_child
    assert ping(get_sandbox()) == parent_child  # the fork did not disturb the parent's child


def test_a_child_that_dies_before_it_is_ready_is_internal_and_frees_its_place(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    broken = tmp_path / "broken_child.py"
    broken.write_text("raise SystemExit(2)\n")
    pool = Sandbox(children=1)
    try:
        monkeypatch.setattr(pipes, "CHILD_SCRIPT", broken)
        with pytest.raises(FetchError) as caught:
            ping(pool)
        assert caught.value.outcome == "internal"

        monkeypatch.undo()
        assert ping(pool) > 0  # the one place in the pool was given back
    finally:
        pool.close()


def test_shutdown_stops_the_idle_children_of_this_process() -> None:
    child_pid = ping(get_sandbox())

    sandbox_module.shutdown()

    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child_pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the child is still running after shutdown")


def _ended(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _wait_until_ended(pid: int, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while not _ended(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_child_idle_past_the_idle_period_is_stopped_and_the_next_parse_starts_another() -> None:
    pool = Sandbox(children=2, idle_seconds=0.5)
    try:
        idle = ping(pool)

        assert _wait_until_ended(idle)
        assert pool.pids() == []
        assert jq(pool, ".[1]") == "2"
        assert ping(pool) not in (idle, 0)
    finally:
        pool.close()


def test_a_child_taken_by_a_parse_is_not_stopped_while_the_parse_runs_past_the_idle_period() -> None:
    pool = Sandbox(children=1, idle_seconds=0.2)
    try:
        ping(pool)  # the child is idle from now on, and due to stop 0.2 s later
        # The next parse takes it at once and runs for a second or more: were it stopped
        # under the parse, the parse would end in an error.
        assert jq(pool, "[range(1e6)] | length", cpu=60, wall=60) == "1000000"
    finally:
        pool.close()


def test_as_many_children_as_were_started_ahead_of_use_stay_when_idle() -> None:
    pool = Sandbox(children=2, idle_seconds=0.5)
    try:
        pool.warm_up(1)
        # Two children at once: the warm one and one started on demand.
        replies = pool.run_shared("ping", {}, b"", cpu_seconds=5, wall_seconds=10, max_children=2, **LIMITS)
        pids = {int(reply["pid"]) for reply, _ in replies}
        assert len(pids) == 2

        wait_until = time.monotonic() + 10
        while not any(_ended(pid) for pid in pids) and time.monotonic() < wait_until:
            time.sleep(0.05)
        (kept,) = pool.pids()
        assert kept in pids
        time.sleep(1.5)  # three idle periods more
        assert ping(pool) == kept
    finally:
        pool.close()


def test_the_child_reads_html_with_the_page_modules_alone_and_nothing_of_django_or_the_rest_of_sift() -> None:
    child = Path(sandbox_module.__file__).with_name("child.py")
    script = (
        "import runpy, sys; child = runpy.run_path(sys.argv[1]);"
        "child['_html_module'](); child['_fetch_module']('discovery.sitemap_parse');"
        "print(sorted(m for m in sys.modules if m == 'django' or m.startswith(('django.', 'fetch'))))"
    )
    shown = subprocess.run(
        [sys.executable, "-I", "-c", script, str(child)], capture_output=True, text=True, check=True, cwd="/"
    ).stdout
    page_modules = [
        "html",
        "html.block_text",
        "html.declared_kind",
        "html.facts",
        *(
            f"html.facts.{name}"
            for name in ("declared", "elements", "jsonld", "meta_tags", "metadata", "microdata", "product")
        ),
        "html.facts.tables",
        "html.facts.values",
        "html.hidden",
        "html.line_cleanup",
        "html.main_content",
        "html.markdown",
        "html.page_kinds",
        "html.peers",
        "html.reader",
        "html.selector_matching",
        "html.style_hiding",
        "html.stylesheets",
    ]
    modules = [
        "fetch",
        "fetch.discovery",
        "fetch.discovery.sitemap_parse",
        *(f"fetch.{name}" for name in page_modules),
    ]
    assert shown.strip() == str(sorted(modules))
