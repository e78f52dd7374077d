"""A caller's share of the fetch slots holds across the deployment: fetches, maps, renders and
batch targets of one caller, whichever processes run them, hold at most its share (docs/security.md)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.core.checks import run_checks
from django.db import connection
from django.utils import timezone

from batch import pipeline_bridge
from batch.engine.seam import Caller, RetryLater
from doors.validation import validate_targets
from fetch import pipeline
from fetch.errors import FetchError
from fetch.gate import FETCH_SLOTS
from fetch.models import FetchSlot
from fetch.sandbox.pool import SANDBOX_CHILDREN

from .deployment import wait_for
from .factories import LOOPBACK
from .upstream import slow_upstream


def _held_elsewhere(caller: str, *numbers: int, lease: timedelta = timedelta(minutes=1)) -> None:
    """Slots held for ``caller`` by fetches of other processes, as their rows say."""
    until = timezone.now() + lease
    FetchSlot.objects.bulk_create(
        [FetchSlot(number=n, holder=f"elsewhere{n}", caller=caller, lease_until=until) for n in numbers]
    )


def test_a_caller_at_its_share_gets_no_slot_while_another_caller_does(db):
    _held_elsewhere("alice", 0, 1)
    now, until = timezone.now(), timezone.now() + timedelta(minutes=1)
    assert FETCH_SLOTS.take(8, "more", until, now, caller="alice", share=2) == (None, True)
    assert FETCH_SLOTS.take(8, "bobs", until, now, caller="bob", share=2) == (2, False)
    assert FETCH_SLOTS.take(8, "more", until, now, caller="alice", share=3) == (3, False)


def test_a_slot_whose_lease_ran_out_no_longer_counts_in_its_callers_share(db):
    _held_elsewhere("alice", 0, 1, lease=timedelta(seconds=-1))
    now, until = timezone.now(), timezone.now() + timedelta(minutes=1)
    assert FETCH_SLOTS.take(8, "mine", until, now, caller="alice", share=1) == (0, False)


def test_a_share_above_the_sandbox_children_of_a_process_is_warned_of_at_start_up(settings):
    settings.SIFT_FETCH_PER_CALLER = SANDBOX_CHILDREN
    assert not [m for m in run_checks() if m.id == "sift.W007"]
    settings.SIFT_FETCH_PER_CALLER = SANDBOX_CHILDREN + 1
    [warned] = [m for m in run_checks() if m.id == "sift.W007"]
    assert f"above the sandbox children a process has here ({SANDBOX_CHILDREN}" in warned.msg


def test_a_caller_holding_its_share_elsewhere_is_refused_busy_and_other_callers_are_served(
    make_caller, httpserver, settings
):
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    settings.SIFT_FETCH_PER_CALLER = 2
    _, alice = make_caller("alice")
    _, bob = make_caller("bob")
    httpserver.expect_request("/page").respond_with_data("plain words", content_type="text/plain")
    url = httpserver.url_for("/page")
    _held_elsewhere("alice", 0, 1)  # two of alice's fetches in other processes, say the MCP's

    refused = alice.get("/v1/fetch", url=f"{url}?1", mode="raw")
    served = bob.get("/v1/fetch", url=f"{url}?2", mode="raw")
    with pytest.raises(RetryLater) as batch_target:  # the worker retries it later, as any busy target
        pipeline_bridge.fetch_target(Caller("alice", "fleet"), validate_targets([f"{url}?3"])[0])

    assert (refused.status_code, refused.json()["code"], refused.headers["Retry-After"]) == (429, "busy", "2")
    assert refused.json()["retry_after"] == 2
    assert "you already hold 2 of the fetch slots" in refused.json()["error"]
    assert served.status_code == 200
    assert batch_target.value.wait == 2
    FetchSlot.objects.filter(number=0).update(holder="", caller="", lease_until=None)  # one ended
    assert alice.get("/v1/fetch", url=f"{url}?4", mode="raw").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_one_caller_fetching_in_many_processes_at_once_holds_its_share_and_another_caller_gets_a_slot(
    settings,
):
    """Three of alice's fetches at once, as from two web workers and the MCP process (threads
    with connections of their own, past any one process's thread shares), on three slots."""
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    settings.SIFT_FETCH_SLOTS = 3
    settings.SIFT_FETCH_PER_CALLER = 2
    answers: dict[str, object] = {}
    barrier = threading.Barrier(3)

    def fetch(name: str, url: str, together: bool) -> None:
        try:
            if together:
                barrier.wait(timeout=30)
            target = validate_targets([url])[0]
            answers[name] = pipeline.fetch(target, partition="fleet", caller=name.rstrip("0123456789"))
        except FetchError as exc:
            answers[name] = str(exc.outcome)
        finally:
            connection.close()

    with slow_upstream(delay=4) as base:
        alices = [threading.Thread(target=fetch, args=(f"alice{n}", f"{base}/a{n}", True)) for n in range(3)]
        for thread in alices:
            thread.start()
        # Each of alice's fetches has taken a slot or been refused.
        wait_for(
            lambda: FetchSlot.objects.exclude(holder="").count() + len(answers) == 3, what="alice's takes"
        )
        alice_held = FetchSlot.objects.exclude(holder="").count()
        fetch("bob", f"{base}/b", together=False)
        for thread in alices:
            thread.join()

    assert alice_held == 2
    refused_or_ok = sorted(
        answer if isinstance(answer, str) else "ok" for name, answer in answers.items() if name != "bob"
    )
    assert refused_or_ok == ["busy", "ok", "ok"]
    bob = answers["bob"]
    assert isinstance(bob, dict)
    assert bob["status"] == 200


@pytest.mark.django_db(transaction=True)
def test_takes_of_one_caller_racing_from_many_connections_never_pass_its_share():
    barrier, taken, lock = threading.Barrier(16), [], threading.Lock()
    now, until = timezone.now(), timezone.now() + timedelta(minutes=1)

    def take(n: int) -> None:
        caller = "alice" if n % 2 else "bob"
        try:
            barrier.wait(timeout=30)
            got = FETCH_SLOTS.take(8, f"t{n}", until, now, caller=caller, share=3)
            with lock:
                taken.append((caller, got.number))
        finally:
            connection.close()

    threads = [threading.Thread(target=take, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(taken) == 16
    numbers = [number for _, number in taken if number is not None]
    assert len(numbers) == len(set(numbers)) == 6
    assert (
        sorted(FetchSlot.objects.exclude(holder="").values_list("caller", flat=True))
        == ["alice"] * 3 + ["bob"] * 3
    )
