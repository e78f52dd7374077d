"""A caller's monitor changes in its change bytes: the rows and the caller's lock that
``capacity.caller_budget`` counts and takes, registered as the app becomes ready, so that the
changes and the last readings (the fetch app's) share one ``SIFT_CHANGES_BYTES_PER_CALLER``."""

from __future__ import annotations

from django.db.models import QuerySet

from batch.models import ApiKey, MonitorChange
from capacity import caller_budget


def changes_of(caller: str) -> QuerySet[MonitorChange]:
    """The changes of every monitor of the caller named ``caller``."""
    return MonitorChange.objects.filter(monitor__caller__name=caller)


def lock_caller(caller: str) -> None:
    """Lock the caller's row until the transaction ends (the row a monitor's creation locks too)."""
    list(ApiKey.objects.select_for_update(no_key=True).filter(name=caller).values_list("pk"))


CHANGES = caller_budget.KeptRows("monitor changes", changes_of, at="at")


def register() -> None:
    caller_budget.register(CHANGES)
    caller_budget.register_caller_lock(lock_caller)
