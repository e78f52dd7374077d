"""The monitors service both doors call: create (within the caps), list, read, delete, read the
changes, and the admin's pause and resume (docs/api.md, "Monitors").

Nothing here knows about HTTP or the fetch pipeline: the target arrives validated
(``doors/validation.py``), the callback URL checked (``doors/callbacks.py``). Another caller's
monitor is not found, as another caller's job is.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from batch.engine import wakeups
from batch.errors import Refusal, Refused
from batch.models import JOB_ID_PATTERN, ApiKey, Monitor, MonitorChange, MonitorLock
from fetch.targets import Target

log = logging.getLogger(__name__)

# The longest every: a month.
MAX_EVERY_SECONDS = 30 * 24 * 3600
_EVERY = re.compile(r"^(\d{1,10})(s|m|h|d)?$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# Options that say where to start reading: a monitor reads the whole page each time.
NOT_FOR_MONITORS = ("cursor", "offset", "version")


def parse_every(raw: object) -> int:
    """``every`` as seconds: a whole number of seconds, or ``"90s"``, ``"5m"``, ``"1h"``, ``"1d"``;
    at least ``SIFT_MONITOR_MIN_EVERY``, at most a month; else ``invalid_request`` naming it."""
    least = settings.SIFT_MONITOR_MIN_EVERY
    hint = f'Send every as seconds or as "5m", "1h", "1d": at least {least:g} s, at most 30 days.'
    match = _EVERY.match(raw) if isinstance(raw, str) else None
    if isinstance(raw, int) and not isinstance(raw, bool):
        seconds = raw
    elif match:
        seconds = int(match[1]) * _UNITS[match[2] or "s"]
    else:
        raise _invalid("every", "every must be a number of seconds or a duration like 5m", hint)
    if not least <= seconds <= MAX_EVERY_SECONDS:
        raise _invalid("every", f"every must be from {least:g} to {MAX_EVERY_SECONDS} seconds", hint)
    return seconds


def check_target(target: Target) -> Target:
    """A monitor's target: any reading options, but not where to start reading."""
    for name in NOT_FOR_MONITORS:
        if getattr(target.options, name) is not None:
            raise _invalid(
                f"options.{name}",
                f"a monitor reads the whole page each time: {name} does not apply",
                f"Leave {name} out; max_chars still bounds each change's diff.",
            )
    return target


def _invalid(field: str, message: str, hint: str) -> Refused:
    return Refused(
        Refusal.INVALID_REQUEST,
        f"{field}: {message}",
        hint,
        details=[{"field": field, "message": message}],
    )


def create(caller: ApiKey, target: Target, *, every: int, callback_url: str = "") -> Monitor:
    """A monitor of ``target`` for ``caller``, first due now (its first run is its first reading),
    once both caps have room: the caller's count under its row lock, the total under
    ``MonitorLock``, taken in that order as a submit takes its two locks."""
    options = {k: v for k, v in target.options.to_dict().items() if k != "changes"}
    with transaction.atomic():
        ApiKey.objects.select_for_update(no_key=True).filter(pk=caller.pk).values_list("pk").get()
        if Monitor.objects.filter(caller=caller).count() >= settings.SIFT_MONITORS_PER_CALLER:
            raise Refused(
                Refusal.TOO_MANY_MONITORS,
                f"you have {settings.SIFT_MONITORS_PER_CALLER} monitors, the most a caller may have",
                "Delete a monitor you no longer need (DELETE /v1/monitors/{id}), then create this one.",
            )
        MonitorLock.hold()
        if Monitor.objects.count() >= settings.SIFT_MONITORS_TOTAL:
            raise Refused(
                Refusal.MONITORS_FULL,
                f"this sift holds {settings.SIFT_MONITORS_TOTAL} monitors, the most it may",
                "Try again later, or ask the operator to raise SIFT_MONITORS_TOTAL.",
            )
        now = timezone.now()
        monitor = Monitor.objects.create(
            caller=caller,
            url=target.url,
            options=options,
            every=every,
            callback_url=callback_url,
            created_at=now,
            due_at=now,
        )
        transaction.on_commit(wakeups.wake_on_submit)
    log.info("monitor %s created caller=%s every=%ds", monitor.id, caller.name, every)
    return monitor


def list_monitors(caller: ApiKey, *, limit: int, offset: int) -> tuple[list[Monitor], int]:
    """The caller's monitors, newest first, and how many it has."""
    theirs = Monitor.objects.filter(caller=caller)
    return list(theirs.order_by("-created_at", "-pk")[offset : offset + limit]), theirs.count()


def get_monitor(caller: ApiKey, monitor_id: str) -> Monitor:
    """The caller's monitor, or ``not_found`` (another caller's too)."""
    found = None
    if re.match(JOB_ID_PATTERN, monitor_id):
        found = Monitor.objects.filter(caller=caller, pk=monitor_id).first()
    if found is None:
        raise Refused(
            Refusal.NOT_FOUND,
            f"no monitor {monitor_id!r}",
            "List your monitors with GET /v1/monitors (MCP: monitors).",
        )
    return found


def delete_monitor(caller: ApiKey, monitor_id: str) -> Monitor:
    """Delete the caller's monitor with its changes; a run in flight is dropped when it ends."""
    monitor = get_monitor(caller, monitor_id)
    Monitor.objects.filter(pk=monitor.pk).delete()
    log.info("monitor %s deleted caller=%s", monitor.pk, caller.name)
    return monitor


def changes_of(
    caller: ApiKey, monitor_id: str, *, limit: int, offset: int
) -> tuple[list[MonitorChange], int]:
    """The monitor's changes, newest first, and how many are kept."""
    monitor = get_monitor(caller, monitor_id)
    kept: QuerySet[MonitorChange] = MonitorChange.objects.filter(monitor=monitor)
    return list(kept.order_by("-at", "-pk")[offset : offset + limit]), kept.count()


def pause(monitors: QuerySet[Monitor], reason: str) -> int:
    """Pause monitors (the admin's action): no more runs until resumed; how many were running."""
    return monitors.filter(due_at__isnull=False).update(due_at=None, paused_reason=reason)


def resume(monitors: QuerySet[Monitor], now: datetime | None = None) -> int:
    """Resume paused monitors, due at once, their failures forgotten; how many."""
    resumed = monitors.filter(due_at__isnull=True).update(
        due_at=now or timezone.now(), paused_reason="", failures_in_a_row=0
    )
    if resumed:
        transaction.on_commit(wakeups.wake_on_submit)
    return resumed
