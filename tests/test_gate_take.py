"""The fetch gate's take and release, through the one slot algorithm (``capacity.slots``)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from fetch import gate
from fetch.gate import FETCH_GATE, FETCH_SLOTS
from fetch.models import FetchSlot


def _rows(count: int) -> None:
    FetchSlot.objects.bulk_create([FetchSlot(number=n) for n in range(count)], ignore_conflicts=True)


def test_the_lowest_free_slot_is_taken_and_stamped_with_its_caller(db):
    _rows(3)
    now = timezone.now()
    FetchSlot.objects.filter(number=0).update(holder="busy", lease_until=now + timedelta(minutes=1))
    number = FETCH_SLOTS.take(3, "mine", now + timedelta(seconds=35), now, caller="alice").number
    assert number == 1
    slot = FetchSlot.objects.get(number=1)
    assert (slot.holder, slot.caller, slot.lease_until) == ("mine", "alice", now + timedelta(seconds=35))


def test_a_slot_whose_lease_ran_out_is_free_again(db):
    _rows(1)
    now = timezone.now()
    FetchSlot.objects.filter(number=0).update(
        holder="dead", caller="bob", lease_until=now - timedelta(seconds=1)
    )
    assert FETCH_SLOTS.take(1, "mine", now + timedelta(seconds=35), now, caller="alice").number == 0
    assert FetchSlot.objects.values_list("holder", "caller").get(number=0) == ("mine", "alice")


def test_no_slot_is_taken_when_all_are_held_or_beyond_the_count(db):
    _rows(3)
    now = timezone.now()
    FetchSlot.objects.filter(number__lt=2).update(holder="busy", lease_until=now + timedelta(minutes=1))
    assert FETCH_SLOTS.take(2, "mine", now + timedelta(seconds=35), now).number is None
    assert not FetchSlot.objects.filter(holder="mine").exists()


def test_a_gate_without_rows_makes_them_and_takes_one(db, settings):
    settings.SIFT_FETCH_SLOTS = 2
    with FETCH_GATE.slot("alice", 35) as first, FETCH_GATE.slot("bob", 35) as second:
        assert {first, second} == {0, 1}
        assert sorted(FetchSlot.objects.exclude(holder="").values_list("caller", flat=True)) == [
            "alice",
            "bob",
        ]
    assert FetchSlot.objects.exclude(holder="").count() == 0
    assert not FetchSlot.objects.exclude(caller="").exists()


def test_a_callers_slots_are_counted_while_held_and_not_once_released_or_expired(db):
    now = timezone.now()
    with gate.fetch_slot("alice"), gate.fetch_slot("alice"), gate.fetch_slot("bob"):
        assert (FETCH_SLOTS.held_by("alice", now), FETCH_SLOTS.held_by("bob", now)) == (2, 1)
        later = timezone.now() + gate.slot_lease() + timedelta(seconds=1)
        assert FETCH_SLOTS.held_by("alice", later) == 0
    assert FETCH_SLOTS.held_by("alice", timezone.now()) == 0


@pytest.mark.django_db(transaction=True)
def test_threads_taking_at_once_never_share_a_slot_nor_exceed_the_count():
    _rows(4)
    now = timezone.now()
    barrier, taken, lock = threading.Barrier(16), [], threading.Lock()

    def take(token: str) -> None:
        try:
            barrier.wait(timeout=30)
            number = FETCH_SLOTS.take(4, token, now + timedelta(minutes=1), now, caller=token).number
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


@pytest.mark.django_db(transaction=True)
def test_a_slot_taken_is_held_at_once_for_every_other_connection():
    _rows(2)
    now = timezone.now()
    assert FETCH_SLOTS.take(2, "mine", now + timedelta(minutes=1), now).number == 0
    seen: list[object] = []

    def other_process() -> None:  # a thread has a connection of its own
        try:
            seen.append(FETCH_SLOTS.take(2, "theirs", now + timedelta(minutes=1), now).number)
            seen.append(FETCH_SLOTS.take(2, "third", now + timedelta(minutes=1), now).number)
        finally:
            connection.close()

    thread = threading.Thread(target=other_process)
    thread.start()
    thread.join()
    assert seen == [1, None]


def test_a_slot_is_released_only_by_its_holder(db):
    _rows(1)
    now = timezone.now()
    assert FETCH_SLOTS.take(1, "mine", now + timedelta(minutes=1), now, caller="alice").number == 0
    assert not FETCH_SLOTS.release(0, "not-mine")
    assert FetchSlot.objects.get().holder == "mine"
    assert FETCH_SLOTS.release(0, "mine")
    assert FetchSlot.objects.values_list("holder", "caller", "lease_until").get() == ("", "", None)
