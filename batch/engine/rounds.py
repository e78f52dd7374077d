"""Whose turn it is: the round-robin that batch targets and monitor runs share, and the worker
slots both are run in (docs/workers.md, "Fairness" and "Monitors").

A caller's turn is the later of its live jobs' last turn and its monitors' last turn
(``ApiKey.monitors_served_at``), so a caller with many due monitors and a batch gets one turn a
round, not one for each: whichever of its own was served longer ago goes next within it. Times
never served count as the epoch, the oldest of all.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from django.db.models import DateTimeField, F, Max, OuterRef, Subquery, Value
from django.db.models.expressions import Combinable
from django.db.models.functions import Coalesce, Greatest

from batch.models import LIVE_STATUSES, BatchJob, BatchTarget, TargetStatus, WorkerSlot
from capacity.slots import SlotTable

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
Key = tuple[datetime, datetime]


def _never_is_epoch(expression: Combinable) -> Coalesce:
    return Coalesce(expression, Value(EPOCH, output_field=DateTimeField()), output_field=DateTimeField())


# A waiting target's: its caller's turn, then its job's own.
TARGET_OWN = _never_is_epoch(F("job__served_at"))
TARGET_TURN = Greatest(TARGET_OWN, _never_is_epoch(F("job__caller__monitors_served_at")))

# The waiting targets, fairest first; each use adds its own filters, locks and columns.
WAITING_TARGETS = (
    BatchTarget.objects.filter(status=TargetStatus.PENDING, job__status__in=LIVE_STATUSES)
    .annotate(turn=TARGET_TURN, own=TARGET_OWN)
    .order_by("turn", F("job__served_at").asc(nulls_first=True), "job__created_at", "job_id", "idx")
)

# A due monitor's: its caller's turn, then its monitors' own.
_LIVE_JOBS_SERVED = (
    BatchJob.objects.filter(caller=OuterRef("caller"), status__in=LIVE_STATUSES)
    .values("caller")
    .annotate(last=Max("served_at"))
    .values("last")
)
MONITOR_OWN = _never_is_epoch(F("caller__monitors_served_at"))
MONITOR_TURN = Greatest(MONITOR_OWN, _never_is_epoch(Subquery(_LIVE_JOBS_SERVED)))


def key_of(row: Mapping[str, Any]) -> Key:
    """The ``turn`` and ``own`` a query annotated, as a key that sorts by whose turn it is."""
    turn, own = row["turn"], row["own"]
    assert isinstance(turn, datetime)
    assert isinstance(own, datetime)
    return (turn, own)


# A worker slot holds a target or a monitor's run: free only when it holds neither.
WORKER_SLOTS = SlotTable(WorkerSlot, holder="target_id", empty=None, also=("monitor_id",))
MONITOR_SLOTS = SlotTable(WorkerSlot, holder="monitor_id", empty=None, also=("target_id",))
