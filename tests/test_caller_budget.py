"""One change-bytes budget per caller, shared by its last readings and its monitors' changes
(``capacity.caller_budget``; docs/api.md, "Changes" and "Monitors"): storing either evicts the
caller's oldest of either until the sum fits ``SIFT_CHANGES_BYTES_PER_CALLER``, never another
caller's rows, and two stores at once cannot both overshoot."""

from __future__ import annotations

import contextlib
import threading
import zlib
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.models import Sum
from django.utils import timezone
from werkzeug import Response

from batch.engine import monitor_runs
from batch.models import ApiKey, Monitor, MonitorChange
from batch.pipeline_bridge import fetch_target
from capacity import caller_budget
from fetch.changes import readings
from fetch.models import LastReading
from fetch.targets import Target

from .factories import LOOPBACK, MakeCaller

pytestmark = pytest.mark.django_db(transaction=True)
SEED_BYTES = 1000


def page(*lines: str) -> str:
    return "<html><body><article>" + "".join(f"<p>{line}</p>" for line in lines) + "</article></body></html>"


@pytest.fixture(autouse=True)
def monitors_allowed(settings: Any) -> None:
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    settings.SIFT_MONITOR_MIN_EVERY = 1
    monitor_runs.NEXT_DUE.looked_at = None


def held_bytes(caller: ApiKey) -> int:
    readings_bytes = LastReading.objects.filter(caller=caller.name).aggregate(n=Sum("n_bytes"))["n"]
    changes = MonitorChange.objects.filter(monitor__caller=caller).aggregate(n=Sum("n_bytes"))["n"]
    return int(readings_bytes or 0) + int(changes or 0)


def seeded(caller: ApiKey, monitor: Monitor, ages: str) -> list[str]:
    """Rows of ``SEED_BYTES`` each, "c" a change and "r" a reading, the first the oldest: their labels."""
    now, labels = timezone.now(), []
    for n, kind in enumerate(ages):
        at = now - timedelta(minutes=60 - n)
        label = f"{kind}{n}"
        if kind == "c":
            MonitorChange.objects.create(monitor=monitor, at=at, diff=label, n_bytes=SEED_BYTES)
        else:
            LastReading.objects.create(
                caller=caller.name,
                key=label,
                url=label,
                text=b"",
                text_sha256="",
                n_bytes=SEED_BYTES,
                read_at=at,
            )
        labels.append(label)
    return labels


def seeds_left(caller: ApiKey) -> set[str]:
    kept = set(
        LastReading.objects.filter(caller=caller.name, url__regex=r"^r\d+$").values_list("url", flat=True)
    )
    return kept | set(
        MonitorChange.objects.filter(monitor__caller=caller, diff__regex=r"^c\d+$").values_list(
            "diff", flat=True
        )
    )


def monitor_of(caller: ApiKey, url: str, *, due: datetime | None = None) -> Monitor:
    now = timezone.now()
    return Monitor.objects.create(
        caller=caller, url=url, every=3600, created_at=now, due_at=due or now + timedelta(hours=1)
    )


def run_due() -> int:
    ran, monitor_runs.NEXT_DUE.looked_at = 0, None  # this process looks again at once
    while (run := monitor_runs.claim_if_its_turn(timezone.now())) is not None:
        monitor_runs.run_monitor(run, fetch_target)
        monitor_runs.NEXT_DUE.looked_at = None
        ran += 1
    return ran


def test_readings_and_monitor_changes_share_one_budget_oldest_first_and_never_anothers(
    agent, make_caller: MakeCaller, settings, httpserver
):
    caller, client = agent
    other, _ = make_caller("other")
    html = {"text": page("The changelog.", "Version 1.0 is out.")}
    httpserver.expect_request("/changelog").respond_with_handler(
        lambda request: Response(html["text"], content_type="text/html")
    )
    url = httpserver.url_for("/changelog")
    watched = monitor_of(caller, url)
    labels = seeded(caller, monitor_of(caller, "https://example.com/"), "crcr")
    others = seeded(other, monitor_of(other, "https://example.com/"), "crcrcr")
    settings.SIFT_CHANGES_BYTES_PER_CALLER = SEED_BYTES * 5 // 2

    # A reading stored: the oldest change, then the oldest reading, go.
    assert (
        client.post("/v1/fetch", {"url": url, "options": {"changes": True}}).json()["change"]["status"]
        == "new"
    )
    assert held_bytes(caller) <= settings.SIFT_CHANGES_BYTES_PER_CALLER
    assert seeds_left(caller) == set(labels[2:])

    # The monitor's first reading fits; its change, a long diff, evicts the oldest left (a change).
    Monitor.objects.filter(pk=watched.pk).update(due_at=timezone.now())
    assert run_due() == 1
    html["text"] = page("The changelog.", *(f"Version 2.{n} is out, with its notes." for n in range(15)))
    Monitor.objects.filter(pk=watched.pk).update(due_at=timezone.now())
    assert run_due() == 1
    change = MonitorChange.objects.get(monitor=watched)
    assert change.n_bytes > SEED_BYTES // 2
    assert held_bytes(caller) <= settings.SIFT_CHANGES_BYTES_PER_CALLER
    assert seeds_left(caller) == set(labels[3:])
    # The other caller's rows are over the budget, and untouched: only its own stores evict them.
    assert seeds_left(other) == set(others)


def test_two_stores_for_one_caller_at_once_cannot_both_overshoot(agent, settings, monkeypatch):
    """Each store pauses after its write, before it evicts, until the other writes too (or a
    moment passes): without the caller's lock both would evict seeing only their own row."""
    caller, _ = agent
    seeded(caller, monitor_of(caller, "https://example.com/"), "cr")
    one = len(zlib.compress(b"text 0"))  # each store's reading: either fits alone, not both
    budget = settings.SIFT_CHANGES_BYTES_PER_CALLER = SEED_BYTES * 2 + one + one // 2
    both_written = threading.Barrier(2, timeout=2)
    evict = caller_budget.evict_oldest

    def evict_when_both_wrote(name: str, most: int) -> int:
        with contextlib.suppress(threading.BrokenBarrierError):  # the other waits for the lock
            both_written.wait()
        return evict(name, most)

    monkeypatch.setattr(caller_budget, "evict_oldest", evict_when_both_wrote)

    def store(n: int) -> None:
        try:
            readings.track(
                caller.name, Target.from_stored(f"https://example.com/{n}", {"changes": True}), f"text {n}"
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=store, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert LastReading.objects.filter(caller=caller.name, url__startswith="https://example.com/").count() == 2
    assert held_bytes(caller) <= budget
