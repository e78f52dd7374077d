"""The document cache: upstream answers kept for ``CACHE_TTL``, per partition.

What is kept is the answer as fetched (body, type, final URL, validators), before extraction,
so the same document serves any mode and narrowing. The fleet shares one partition; each
restricted caller has its own, so its documents are never written to, nor served from, the
shared one. The cache has its own byte budget, evicted oldest first. See docs/fetch-pipeline.md.

Everything stored comes from an upstream, so it is cleaned first: validators are kept only when
they parse (``headers.etag``, ``headers.last_modified``), and every string is rid of NUL and
lone surrogates and cut to its column, so a store never fails because of what a site sent and a
stored value can never make a later request for the URL malformed.
"""

from __future__ import annotations

import hashlib
import logging
import re
from datetime import datetime, timedelta
from typing import Literal

from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import Field
from django.utils import timezone

from capacity.eviction import UncheckedBytes, oldest_over_budget
from fetch.client import Download
from fetch.models import CachedDocument
from fetch.wire import headers

FLEET_PARTITION = "fleet"
# Where an answer came from (its ``cache`` field): downloaded now, a copy young enough, a copy
# the site said is still good (a 304), or the last copy, recovered after the site failed.
CacheState = Literal["miss", "hit", "revalidated", "stale"]
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
log = logging.getLogger(__name__)


def partition_for(caller_name: str, caller_class: str) -> str:
    """A caller's partition for pages: ``fleet``, or ``restricted:<name>`` of its own."""
    return FLEET_PARTITION if caller_class == "fleet" else f"restricted:{caller_name}"


def kind_partition(kind: str, partition: str) -> str:
    """Where documents of another ``kind`` (``rendered``, ``robots``) of a page ``partition``
    live, apart from its pages: ``<kind>|<partition>``.

    The kind comes first, so no caller name can reach another partition: a page partition starts
    with ``fleet`` or ``restricted:``, never with a kind and ``|``, and the caller's name comes
    last, whole.
    """
    return f"{kind}|{partition}"


def rendered_partition(partition: str) -> str:
    """Where rendered documents of ``partition`` live: apart from the raw ones of the same URLs."""
    return kind_partition("rendered", partition)


def _url_key(url: str) -> str:
    # surrogatepass: a key for any string, even one that could never be stored as UTF-8.
    return hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest()


def column_text(value: str, field: str) -> str:
    """``value`` without NUL or lone surrogates, cut to the size of ``CachedDocument.<field>``."""
    cleaned = _LONE_SURROGATE.sub("\ufffd", value.replace("\x00", ""))
    size = _column_size(field)
    return cleaned[:size] if size is not None else cleaned


def _column_size(field: str) -> int | None:
    column = CachedDocument._meta.get_field(field)
    return column.max_length if isinstance(column, Field) else None


def _validator(value: str | None, field: str) -> str:
    """A validator that parses and fits its column whole, else ``""``: a cut one is wrong."""
    size = _column_size(field)
    return value if value is not None and (size is None or len(value) <= size) else ""


def lookup(partition: str, url: str) -> CachedDocument | None:
    # get(), not first(): one row at most (a unique constraint), so no ORDER BY to build.
    try:
        return CachedDocument.objects.get(partition=partition, url_sha256=_url_key(url))
    except CachedDocument.DoesNotExist:
        return None


def is_fresh(document: CachedDocument, max_age: int | None = None, now: datetime | None = None) -> bool:
    """Younger than the cache TTL, and than ``max_age`` when the caller asks for one.

    A ``max_age`` above the TTL changes nothing: no copy is answered as it is once the TTL is
    over. ``max_age=0`` makes every copy too old, so the site is always asked.
    """
    limit = settings.SIFT_CACHE_TTL if max_age is None else min(max_age, settings.SIFT_CACHE_TTL)
    return (now or timezone.now()) - document.fetched_at < timedelta(seconds=limit)


def age_seconds(fetched_at: datetime, now: datetime | None = None) -> int:
    """Whole seconds since the copy fetched at ``fetched_at`` was fetched (never below 0)."""
    return max(0, int(((now or timezone.now()) - fetched_at).total_seconds()))


def conditional_headers(document: CachedDocument) -> dict[str, str]:
    """Validators for revalidating a stale copy: a 304 answer means it is still good.

    A stored validator is sent only if it parses, so a row holding a malformed one (edited by
    hand, say) cannot make the request malformed.
    """
    conditions = {}
    if etag := headers.etag(document.etag or None):
        conditions["If-None-Match"] = etag
    if last_modified := headers.last_modified(document.last_modified or None):
        conditions["If-Modified-Since"] = last_modified
    return conditions


def refresh(document: CachedDocument, not_modified: Download) -> None:
    """The site answered 304: the copy is good as of now, under the validators the 304 sent, if any
    (a site may change its ETag while the body stays: the next revalidation must send the new one)."""
    changes: dict[str, object] = {"fetched_at": timezone.now()}
    if etag := headers.etag(not_modified.headers.get("etag")):
        changes["etag"] = _validator(etag, "etag")
    if last_modified := headers.last_modified(not_modified.headers.get("last-modified")):
        changes["last_modified"] = _validator(last_modified, "last_modified")
    for name, value in changes.items():
        setattr(document, name, value)
    CachedDocument.objects.filter(pk=document.pk).update(**changes)


def cacheable(download: Download) -> bool:
    directives = {d.strip().lower() for d in download.headers.get("cache-control", "").split(",")}
    return download.status == 200 and "no-store" not in directives


def store(partition: str, url: str, download: Download, *, any_answer: bool = False) -> None:
    """Keep (or replace) this partition's copy of ``url``, then fit the byte budget (checked
    once this process has stored a 64th of it since it last checked).

    ``any_answer`` keeps it whatever its status and ``Cache-Control`` (robots.txt: a 404 is a rule).
    A cache is an optimisation: a store the database refuses anyway is logged and skipped, and
    the fetch that produced the document still succeeds.
    """
    if not (any_answer or cacheable(download)) or len(download.body) > settings.SIFT_CACHE_MAX_BYTES:
        return
    row = _row(url, download)
    try:
        # One upsert (INSERT ... ON CONFLICT DO UPDATE), not a look-up then a write: two processes
        # storing the same URL at once leave one copy, the later. Its own atomic(): inside a
        # caller's transaction, a refused copy rolls back to a savepoint, not the caller's work.
        with transaction.atomic():
            CachedDocument.objects.bulk_create(
                [CachedDocument(partition=partition, url_sha256=_url_key(url), **row)],
                update_conflicts=True,
                unique_fields=["partition", "url_sha256"],
                update_fields=list(row),
            )
        if UNCHECKED_BYTES.check_due(len(download.body), settings.SIFT_CACHE_MAX_BYTES):
            evict_over_budget()
    except DatabaseError:
        log.exception("the document cache refused a copy; the fetch goes on without caching it")


# The cache is summed (a scan of every row) when this process has stored a share of its budget
# since it last summed, not after every store.
UNCHECKED_BYTES = UncheckedBytes()


def _row(url: str, download: Download) -> dict[str, object]:
    return {
        "url": column_text(url, "url"),
        "final_url": column_text(download.final_url, "final_url"),
        "status": download.status,
        "content_type": column_text(download.content_type, "content_type"),
        "charset": column_text(download.charset or "", "charset"),
        "etag": _validator(headers.etag(download.headers.get("etag")), "etag"),
        "last_modified": _validator(
            headers.last_modified(download.headers.get("last-modified")), "last_modified"
        ),
        "body": download.body,
        "n_bytes": len(download.body),
        "fetched_at": timezone.now(),
    }


def evict_over_budget(max_bytes: int | None = None) -> int:
    """Delete the oldest copies until the cache fits its budget; return how many went."""
    budget = settings.SIFT_CACHE_MAX_BYTES if max_bytes is None else max_bytes
    documents = CachedDocument.objects.all()
    victims = oldest_over_budget(documents, documents.order_by("fetched_at"), budget)
    if not victims:
        return 0
    deleted, _ = CachedDocument.objects.filter(pk__in=victims).delete()
    return deleted


def as_download(document: CachedDocument) -> Download:
    """The cached answer in the shape the client returns, for the rest of the pipeline."""
    return Download(
        url=document.url,
        final_url=document.final_url,
        status=document.status,
        headers={},
        content_type=document.content_type,
        charset=document.charset or None,
        body=bytes(document.body),
        elapsed_ms=0,
    )
