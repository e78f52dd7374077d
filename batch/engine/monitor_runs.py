"""The run of a due monitor in the cluster's drains (docs/workers.md, "Monitors").

A run is the monitor's own piece of work, not a batch job: a drain takes a due monitor instead of
a waiting target when the monitor's caller's turn comes first (``batch/engine/rounds.py``), in a
worker slot like a target's. The claim moves ``due_at`` to the end of the run's lease in the
transaction that locks the monitor (``skip_locked``); the store, conditional on that lease, moves
it to the next time and records the run: a change (with its ``monitor.changed`` webhook made due
in the same transaction), or a failure, the tenth in a row pausing the monitor. A run whose
worker died is due again when its lease ends. The fetch is the drain's ``FetchFunc`` with the
caller's ``changes`` scoped to the monitor, so the pipeline compares it with the monitor's last
reading.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Min
from django.utils import timezone

from batch import metrics
from batch.engine import rounds, storable
from batch.engine.reconnect import database_went_away
from batch.engine.seam import Caller, FetchFunc, RetryLater, TargetFailed
from batch.models import MONITOR_CHANGED, ApiKey, Monitor, MonitorChange
from batch.monitors.shapes import change_out, monitor_summary
from batch.webhooks import events
from capacity import caller_budget
from fetch.outcomes import Outcome
from fetch.targets import Target

log = logging.getLogger(__name__)

MAX_FAILURES_IN_A_ROW = 10
CHANGES_KEPT = 100
# How often a process looks for the next due monitor when none was due at its last look.
LOOK_EVERY = timedelta(seconds=1)
INTERNAL = TargetFailed(Outcome.INTERNAL, "internal error", Outcome.INTERNAL.hint)

DUE_MONITORS = (
    Monitor.objects.select_for_update(skip_locked=True, of=("self",))
    .annotate(turn=rounds.MONITOR_TURN, own=rounds.MONITOR_OWN)
    .order_by("turn", "own", "due_at", "pk")
    .values(
        "pk",
        "url",
        "options",
        "every",
        "due_at",
        "caller_id",
        "caller__name",
        "caller__caller_class",
        "turn",
        "own",
    )
)


@dataclass(frozen=True)
class MonitorRun:
    """A claimed monitor: what to read for whom, the slot it runs in, and the lease its store
    must still find (``due_at``), from the due time it was claimed at (``due``)."""

    monitor_id: str
    caller: Caller
    target: Target
    slot: int
    lease_until: datetime
    due: datetime
    every: int
    keep_slot: bool = False


class NextDue:
    """When this process last saw a monitor due, so that a drain looks for one at most once a
    ``LOOK_EVERY`` while none is (a batch target's claim then costs no extra query)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.looked_at: datetime | None = None
        self.next_due: datetime | None = None

    def maybe_due(self, now: datetime) -> bool:
        with self.lock:
            if self.looked_at is None or not self.looked_at <= now < self.looked_at + LOOK_EVERY:
                self.looked_at = now
                self.next_due = Monitor.objects.aggregate(next=Min("due_at"))["next"]
            return self.next_due is not None and self.next_due <= now

    def none_due(self) -> None:
        with self.lock:
            self.next_due = None


NEXT_DUE = NextDue()


def claim_if_its_turn(now: datetime, *, kept: Any = None) -> MonitorRun | None:
    """Claim the fairest due monitor if its caller's turn comes before every waiting target's.

    ``kept``: the claim (a target's or a monitor's) whose slot a drain keeps: the run takes that
    slot and keeps it in turn for the drain's next claim; without one, a free slot, freed by the store.
    """
    if not NEXT_DUE.maybe_due(now):
        return None
    with transaction.atomic():
        row = DUE_MONITORS.filter(due_at__lte=now).first()
        if row is None:
            NEXT_DUE.none_due()
            return None
        target = rounds.WAITING_TARGETS.exclude(not_before__gt=now).values("turn", "own").first()
        if target is not None and rounds.key_of(target) <= rounds.key_of(row):
            return None
        run = _take(row, now, kept)
        if run is None:
            transaction.set_rollback(True)
    if run is not None:
        log.info("monitor %s claimed slot=%d", run.monitor_id, run.slot)
    return run


def _take(row: Mapping[str, Any], now: datetime, kept: Any) -> MonitorRun | None:
    lease_until = now + timedelta(seconds=settings.SIFT_BATCH_CLAIM_LEASE)
    slot = _handed_on(kept, row["pk"], lease_until)
    if slot is None:
        if kept is not None:  # a target's kept slot, or one whose lease ran out: freed, then taken
            _release_kept(kept)
        slot = rounds.MONITOR_SLOTS.take_free(settings.SIFT_BATCH_WORKERS, now)
        if slot is None:
            return None
        rounds.MONITOR_SLOTS.hold(slot, row["pk"], lease_until)
    Monitor.objects.filter(pk=row["pk"]).update(due_at=lease_until)
    ApiKey.objects.filter(pk=row["caller_id"]).update(monitors_served_at=now)
    caller = Caller(row["caller__name"], row["caller__caller_class"], scope=f"monitor:{row['pk']}")
    target = Target.from_stored(row["url"], {**row["options"], "changes": True})
    every, due = row["every"], row["due_at"]
    return MonitorRun(row["pk"], caller, target, slot, lease_until, due, every, keep_slot=kept is not None)


def _handed_on(kept: Any, monitor_id: str, lease_until: datetime) -> int | None:
    """The slot of the drain's last monitor run, handed on to this one if that run still holds it."""
    if not isinstance(kept, MonitorRun):
        return None
    held = rounds.MONITOR_SLOTS.hold(kept.slot, monitor_id, lease_until, instead_of=kept.monitor_id)
    return kept.slot if held else None


def _release_kept(kept: Any) -> None:
    if isinstance(kept, MonitorRun):
        free_slot(kept)
    else:
        rounds.WORKER_SLOTS.release(kept.slot, kept.target_id)


def free_slot(run: MonitorRun) -> None:
    """Free the run's slot if it still holds it (a drain that kept it stops claiming)."""
    rounds.MONITOR_SLOTS.release(run.slot, run.monitor_id)


def run_monitor(run: MonitorRun, fetch: FetchFunc) -> None:
    """Read the page outside any transaction, then store the run's end and free its slot."""
    started = time.monotonic()
    try:
        result = fetch(run.caller, run.target)
    except RetryLater as busy:
        if busy.host_turn:  # the host's turn: due again then, not a failure
            _give_back(run, wait=busy.wait or 0.0)
            return
        _store(run, failure=TargetFailed(Outcome.BUSY, str(busy), Outcome.BUSY.hint))
    except TargetFailed as failed:
        _store(run, failure=failed)
    except Exception as error:
        if database_went_away(error):
            raise
        log.exception("monitor %s: the fetch function raised", run.monitor_id)
        _store(run, failure=INTERNAL)
    else:
        _store(run, change=_change_of(result))
    finally:
        metrics.MONITOR_RUN_SECONDS.observe(time.monotonic() - started)


def _change_of(result: object) -> dict[str, Any] | None:
    meta = result.get("meta") if isinstance(result, dict) else None
    change = meta.get("change") if isinstance(meta, dict) else None
    return storable.storable_result(change) if isinstance(change, dict) else None


def _give_back(run: MonitorRun, *, wait: float) -> None:
    due = timezone.now() + timedelta(seconds=min(max(wait, 0.0), run.every))
    with transaction.atomic():
        Monitor.objects.filter(pk=run.monitor_id, due_at=run.lease_until).update(due_at=due)
        if not run.keep_slot:
            free_slot(run)


def release_run(run: MonitorRun) -> None:
    """Give a run back, due at once, and free its slot: its worker is stopping."""
    _give_back(run, wait=0.0)
    free_slot(run)


def _store(
    run: MonitorRun, *, change: dict[str, Any] | None = None, failure: TargetFailed | None = None
) -> None:
    now = timezone.now()
    due = run.due + timedelta(seconds=run.every)
    due = due if due > now else now + timedelta(seconds=run.every)
    current = Monitor.objects.filter(pk=run.monitor_id, due_at=run.lease_until)
    with transaction.atomic():
        if not run.keep_slot:
            free_slot(run)
        if failure is not None:
            stored = _store_failure(run, current, failure, now, due)
        else:
            stored = _store_reading(run, current, change, now, due)
    outcome = "ok" if failure is None else str(failure.outcome)
    if stored:
        metrics.MONITOR_RUNS.labels(outcome).inc()
        log.info("monitor %s run outcome=%s", run.monitor_id, outcome)


def _store_failure(
    run: MonitorRun, current: Any, failure: TargetFailed, now: datetime, due: datetime
) -> bool:
    error = storable.storable_text(str(failure.error), storable.ERROR_MAX_CHARS)
    stored = current.update(
        due_at=due,
        runs=F("runs") + 1,
        failures_in_a_row=F("failures_in_a_row") + 1,
        last_run_at=now,
        last_outcome=str(failure.outcome),
        last_error=error,
    )
    if stored:
        metrics.MONITOR_FAILURES.inc()
        reason = (
            f"paused after {MAX_FAILURES_IN_A_ROW} failed runs in a row; the last: {failure.outcome}: {error}"
        )
        failing = Monitor.objects.filter(pk=run.monitor_id, failures_in_a_row__gte=MAX_FAILURES_IN_A_ROW)
        if failing.update(due_at=None, paused_reason=reason):
            log.warning("monitor %s paused after %d failed runs", run.monitor_id, MAX_FAILURES_IN_A_ROW)
    return bool(stored)


def _store_reading(
    run: MonitorRun, current: Any, change: dict[str, Any] | None, now: datetime, due: datetime
) -> bool:
    changed = change is not None and change.get("status") == "changed"
    columns: dict[str, Any] = {"last_change_at": now} if changed else {}
    stored = current.update(
        due_at=due,
        runs=F("runs") + 1,
        failures_in_a_row=0,
        last_run_at=now,
        last_outcome="ok",
        last_error="",
        **columns,
    )
    if stored and changed and change is not None:
        _record_change(run, change, now)
    return bool(stored)


def _record_change(run: MonitorRun, change: dict[str, Any], now: datetime) -> None:
    """The change kept (the monitor's last ``CHANGES_KEPT``, within its caller's change bytes
    shared with its last readings) and, with a ``callback_url``, its signed webhook made due, in
    the store's transaction."""
    caller_budget.hold(run.caller.name)  # before any write of the caller's rows, as a reading's store
    diff = str(change.get("diff") or "")
    recorded = MonitorChange.objects.create(
        monitor_id=run.monitor_id,
        at=now,
        previous_at=_parsed(change.get("previous_at")),
        diff=diff,
        added=int(change.get("added") or 0),
        removed=int(change.get("removed") or 0),
        diff_truncated=bool(change.get("diff_truncated")),
        n_bytes=len(diff.encode("utf-8", "replace")),
    )
    _prune(run.monitor_id, run.caller.name)
    metrics.MONITOR_CHANGES.inc()
    monitor = Monitor.objects.select_related("caller").get(pk=run.monitor_id)
    if monitor.callback_url:
        data = {"monitor": monitor_summary(monitor), "change": change_out(recorded)}
        events.schedule_event(monitor.caller, monitor.callback_url, MONITOR_CHANGED, data, now=now)


def _prune(monitor_id: str, caller: str) -> None:
    """Keep the monitor's newest ``CHANGES_KEPT`` changes, then the caller's changes and last
    readings within their change bytes, the oldest of either evicted first."""
    theirs = MonitorChange.objects.filter(monitor_id=monitor_id)
    old = list(theirs.order_by("-at", "-pk").values_list("pk", flat=True)[CHANGES_KEPT:])
    if old:
        MonitorChange.objects.filter(pk__in=old).delete()
    caller_budget.evict_oldest(caller, settings.SIFT_CHANGES_BYTES_PER_CALLER)


def _parsed(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None
