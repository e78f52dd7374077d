"""The shared mechanisms of capacity/: slot rows with leases, oldest-first eviction by bytes."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from batch.engine import worker
from batch.models import WorkerSlot
from capacity.eviction import oldest_over_budget
from fetch.gate import FETCH_SLOTS
from fetch.models import CachedDocument, FetchSlot


def test_a_raised_slot_count_gets_its_rows_without_a_migration(db, settings):
    settings.SIFT_FETCH_SLOTS = 3
    now = timezone.now()
    taken = []
    for holder in ("a", "b", "c"):
        number = FETCH_SLOTS.take_free(3, now)
        assert number is not None
        FETCH_SLOTS.hold(number, holder, now + timedelta(minutes=1))
        taken.append(number)
    assert taken == [0, 1, 2]
    assert FETCH_SLOTS.take_free(3, now) is None
    assert FetchSlot.objects.count() == 3


def test_a_slot_whose_lease_ran_out_is_free_and_only_its_holder_releases_it(db):
    now = timezone.now()
    assert FETCH_SLOTS.take_free(1, now) == 0
    FETCH_SLOTS.hold(0, "old", now + timedelta(seconds=1))
    assert FETCH_SLOTS.take_free(1, now) is None
    FETCH_SLOTS.hold(0, "old", now - timedelta(seconds=1))
    assert FETCH_SLOTS.take_free(1, now) == 0
    FETCH_SLOTS.hold(0, "new", now + timedelta(minutes=1))
    assert not FETCH_SLOTS.release(0, "old")
    assert FetchSlot.objects.get(number=0).holder == "new"
    assert FETCH_SLOTS.release(0, "new")
    assert FetchSlot.objects.get(number=0).holder == ""


def test_the_worker_slots_follow_the_same_rule(db):
    WorkerSlot.objects.all().delete()
    assert worker.WORKER_SLOTS.take_free(2, timezone.now()) == 0
    assert sorted(WorkerSlot.objects.values_list("number", flat=True)) == [0, 1]


def _document(n: int, n_bytes: int) -> CachedDocument:
    return CachedDocument.objects.create(
        partition="fleet", url=f"https://example.org/{n}", url_sha256=f"{n:064x}", final_url="",
        status=200, body=b"", n_bytes=n_bytes, fetched_at=timezone.now() - timedelta(minutes=10 - n),
    )  # fmt: skip


def test_eviction_takes_the_oldest_first_until_the_budget_fits(db):
    docs = [_document(n, 100) for n in range(5)]
    everything = CachedDocument.objects.all()
    assert oldest_over_budget(everything, everything.order_by("fetched_at"), 500) == []
    assert oldest_over_budget(everything, everything.order_by("fetched_at"), 250) == [d.pk for d in docs[:3]]


def test_eviction_never_picks_what_may_not_go_even_when_it_alone_is_over_budget(db):
    docs = [_document(n, 100) for n in range(3)]
    everything = CachedDocument.objects.all()
    may_go = everything.exclude(pk=docs[0].pk).order_by("fetched_at")
    assert oldest_over_budget(everything, may_go, 50) == [docs[1].pk, docs[2].pk]
