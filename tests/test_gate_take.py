"""The fetch gate's one-statement take (``gate.take_at_once``) and the cache's one-statement store."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from fetch import cache, gate
from fetch.client import Download
from fetch.gate import FETCH_GATE, FETCH_SLOTS, take_at_once
from fetch.models import CachedDocument, FetchSlot


def _rows(count: int) -> None:
    FetchSlot.objects.bulk_create([FetchSlot(number=n) for n in range(count)], ignore_conflicts=True)


def test_the_lowest_free_slot_is_taken_and_stamped(db):
    _rows(3)
    now = timezone.now()
    FetchSlot.objects.filter(number=0).update(holder="busy", lease_until=now + timedelta(minutes=1))
    number = take_at_once(FETCH_SLOTS, 3, "mine", now, now + timedelta(seconds=35))
    assert number == 1
    slot = FetchSlot.objects.get(number=1)
    assert (slot.holder, slot.lease_until) == ("mine", now + timedelta(seconds=35))


def test_a_slot_whose_lease_ran_out_is_free_again(db):
    _rows(1)
    now = timezone.now()
    FetchSlot.objects.filter(number=0).update(holder="dead", lease_until=now - timedelta(seconds=1))
    assert take_at_once(FETCH_SLOTS, 1, "mine", now, now + timedelta(seconds=35)) == 0
    assert FetchSlot.objects.get(number=0).holder == "mine"


def test_no_slot_is_taken_when_all_are_held_or_beyond_the_count(db):
    _rows(3)
    now = timezone.now()
    FetchSlot.objects.filter(number__lt=2).update(holder="busy", lease_until=now + timedelta(minutes=1))
    assert take_at_once(FETCH_SLOTS, 2, "mine", now, now + timedelta(seconds=35)) is None
    assert not FetchSlot.objects.filter(holder="mine").exists()


def test_a_gate_without_rows_makes_them_and_takes_one(db, settings):
    settings.SIFT_FETCH_SLOTS = 2
    with FETCH_GATE.slot(35) as first, FETCH_GATE.slot(35) as second:
        assert {first, second} == {0, 1}
        assert FetchSlot.objects.exclude(holder="").count() == 2
    assert FetchSlot.objects.exclude(holder="").count() == 0


@pytest.mark.django_db(transaction=True)
def test_threads_taking_at_once_never_share_a_slot_nor_exceed_the_count():
    _rows(4)
    now = timezone.now()
    barrier, taken, lock = threading.Barrier(16), [], threading.Lock()

    def take(token: str) -> None:
        try:
            barrier.wait(timeout=30)
            number = take_at_once(FETCH_SLOTS, 4, token, now, now + timedelta(minutes=1))
            with lock:
                taken.append(number)
        finally:
            connection.close()

    threads = [threading.Thread(target=take, args=(f"t{i}",)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    numbers = [n for n in taken if n is not None]
    assert len(taken) == 16
    assert sorted(numbers) == [0, 1, 2, 3]
    assert FetchSlot.objects.exclude(holder="").count() == 4


def _download(body: bytes) -> Download:
    return Download(
        url="http://127.0.0.1/a",
        final_url="http://127.0.0.1/a",
        status=200,
        headers={"etag": '"v1"'},
        content_type="text/html",
        charset="utf-8",
        body=body,
        elapsed_ms=1,
    )


def test_storing_a_url_again_replaces_its_one_copy(db):
    cache.store("fleet", "http://127.0.0.1/a", _download(b"first"))
    cache.store("fleet", "http://127.0.0.1/a", _download(b"second copy"))
    copy = CachedDocument.objects.get()
    assert (bytes(copy.body), copy.n_bytes, copy.etag) == (b"second copy", 11, '"v1"')
    assert cache.lookup("fleet", "http://127.0.0.1/a") == copy


def test_a_copy_over_the_budget_is_evicted_at_the_next_check(db, settings):
    settings.SIFT_CACHE_MAX_BYTES = 100
    for name in ("a", "b", "c"):
        cache.store("fleet", f"http://127.0.0.1/{name}", _download(name.encode() * 40))
    assert sorted(CachedDocument.objects.values_list("url", flat=True)) == [
        "http://127.0.0.1/b",
        "http://127.0.0.1/c",
    ]


def test_a_slot_costs_one_statement_to_take_and_one_to_release(db):
    _rows(1)
    with CaptureQueriesContext(connection) as queries, gate.fetch_slot():
        assert FetchSlot.objects.get().holder != ""
    statements = [q["sql"].split()[0] for q in queries.captured_queries]
    assert statements == ["UPDATE", "SELECT", "UPDATE"]  # take, the test's own look, release
    assert FetchSlot.objects.get().holder == ""


@pytest.mark.django_db(transaction=True)
def test_a_slot_taken_outside_a_transaction_is_held_at_once_for_every_other_connection():
    _rows(2)
    now = timezone.now()
    assert take_at_once(FETCH_SLOTS, 2, "mine", now, now + timedelta(minutes=1)) == 0
    seen: list[object] = []

    def other_process() -> None:  # a thread has a connection of its own
        try:
            seen.append(take_at_once(FETCH_SLOTS, 2, "theirs", now, now + timedelta(minutes=1)))
            seen.append(take_at_once(FETCH_SLOTS, 2, "third", now, now + timedelta(minutes=1)))
        finally:
            connection.close()

    thread = threading.Thread(target=other_process)
    thread.start()
    thread.join()
    assert seen == [1, None]
    if connection.vendor == "postgresql":  # the session keeps its synchronous commits
        with connection.cursor() as cursor:
            cursor.execute("SHOW synchronous_commit")
            assert cursor.fetchone() == ("on",)


@pytest.mark.django_db(transaction=True)
def test_a_slot_released_outside_a_transaction_is_free_and_only_by_its_holder():
    _rows(1)
    now = timezone.now()
    assert take_at_once(FETCH_SLOTS, 1, "mine", now, now + timedelta(minutes=1)) == 0
    gate.release_without_waiting(FETCH_SLOTS, 0, "not-mine")
    assert FetchSlot.objects.get().holder == "mine"
    gate.release_without_waiting(FETCH_SLOTS, 0, "mine")
    assert (FetchSlot.objects.get().holder, FetchSlot.objects.get().lease_until) == ("", None)
    if connection.vendor == "postgresql":  # the session keeps its synchronous commits
        with connection.cursor() as cursor:
            cursor.execute("SHOW synchronous_commit")
            assert cursor.fetchone() == ("on",)
