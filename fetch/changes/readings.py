"""Each caller's last readings, and a new reading compared with the last one of the same URL and
reading options (docs/api.md, "Changes").

The text compared is the whole text the options shape (mode, narrowing, render, hidden ...),
never the slice an answer carries: ``max_chars``, ``cursor`` and how the page is reached do not
make another reading. A caller's readings are its own, under its name; a monitor's are kept under
its caller with a ``scope`` of their own, so they count toward the same bounds: at most
``SIFT_CHANGES_PER_CALLER`` readings, and ``SIFT_CHANGES_BYTES_PER_CALLER`` bytes shared with the
caller's monitors' changes (``capacity.caller_budget``), the oldest of either evicted first.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from capacity import caller_budget
from fetch.changes.diff import unified
from fetch.models import LastReading
from fetch.targets import Target

# Options that say where to start, how much to answer, or how to reach the site (and changes
# itself): the same page read with other values of these is the same reading.
NOT_READING_OPTIONS = frozenset(
    {"max_chars", "cursor", "offset", "version", "recover", "robots", "max_age", "changes"}
)
Status = Literal["new", "same", "changed"]


@dataclass(frozen=True)
class Change:
    status: Status
    previous_at: datetime | None = None
    diff: str | None = None
    added: int = 0
    removed: int = 0
    diff_truncated: bool = False

    def as_dict(self) -> dict[str, Any]:
        previous = self.previous_at.isoformat().replace("+00:00", "Z") if self.previous_at else None
        return {
            "status": self.status,
            "previous_at": previous,
            "diff": self.diff,
            "added": self.added,
            "removed": self.removed,
            "diff_truncated": self.diff_truncated,
        }


def reading_key(target: Target, scope: str = "") -> str:
    """What makes two readings the same reading: the scope, the URL and the options that shape the text."""
    options = {k: v for k, v in target.options.to_dict().items() if k not in NOT_READING_OPTIONS}
    shaped = json.dumps([scope, target.url, options], sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(shaped.encode()).hexdigest()


def track(caller: str, target: Target, text: str, *, scope: str = "", now: datetime | None = None) -> Change:
    """Compare ``text`` with the caller's last reading of the same kind, then keep it as the last.

    The comparison and the diff happen outside any transaction; two readings at once both compare
    with the one before them, and the later store wins.
    """
    now = now or timezone.now()
    key = reading_key(target, scope)
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    previous = (
        LastReading.objects.filter(caller=caller, key=key).values("text", "text_sha256", "read_at").first()
    )
    change = _compare(previous, text, digest, target)
    _keep(caller, key, url=target.url, text=text, digest=digest, now=now)
    return change


def _compare(previous: Mapping[str, Any] | None, text: str, digest: str, target: Target) -> Change:
    if previous is None:
        return Change("new")
    if previous["text_sha256"] == digest:
        return Change("same", previous["read_at"], diff="")
    before = zlib.decompress(bytes(previous["text"])).decode("utf-8", "surrogatepass")
    most = target.options.max_chars or settings.SIFT_FETCH_MAX_CHARS
    diff = unified(before, text, most_chars=most)
    return Change("changed", previous["read_at"], diff.text, diff.added, diff.removed, diff.truncated)


def _keep(caller: str, key: str, *, url: str, text: str, digest: str, now: datetime) -> None:
    """Store the reading as the caller's last of its kind, then evict the caller's oldest readings
    and monitor changes beyond its bounds, under the caller's lock. A text too big for the whole
    budget is not kept (the next reading is new)."""
    packed = zlib.compress(text.encode("utf-8", "surrogatepass"))
    rows = LastReading.objects.filter(caller=caller)
    with transaction.atomic():
        caller_budget.hold(caller)
        if len(packed) > settings.SIFT_CHANGES_BYTES_PER_CALLER:
            rows.filter(key=key).delete()
            return
        fields = {"url": url, "text": packed, "text_sha256": digest, "n_bytes": len(packed), "read_at": now}
        LastReading.objects.update_or_create(caller=caller, key=key, defaults=fields)
        evict(caller)


def evict(caller: str) -> int:
    """The caller's oldest readings beyond ``SIFT_CHANGES_PER_CALLER``, then its oldest readings
    or monitor changes beyond ``SIFT_CHANGES_BYTES_PER_CALLER``, deleted; how many. In the store's
    transaction, after ``caller_budget.hold``."""
    rows = _readings_of(caller)
    newest_first = rows.order_by("-read_at", "-pk").values_list("pk", flat=True)
    victims = list(newest_first[settings.SIFT_CHANGES_PER_CALLER :])
    counted = int(rows.filter(pk__in=victims).delete()[0]) if victims else 0
    return counted + caller_budget.evict_oldest(caller, settings.SIFT_CHANGES_BYTES_PER_CALLER)


def _readings_of(caller: str) -> QuerySet[LastReading]:
    return LastReading.objects.filter(caller=caller)


# The caller's last readings count toward its change bytes (registered by ``fetch.apps``).
READINGS = caller_budget.KeptRows("last readings", _readings_of, at="read_at")
