"""The document cache (SPEC §5.6): upstream answers kept for ``CACHE_TTL``, per partition.

What is kept is the answer as fetched (body, type, final URL, validators), before extraction,
so the same document serves any mode and narrowing. The fleet shares one partition; each
restricted caller has its own, so its documents are never written to, nor served from, the
shared one (SPEC §2). The cache has its own byte budget, evicted oldest first.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from batch.fetch.client import Download
from batch.fetch.models import CachedDocument

FLEET_PARTITION = "fleet"


def partition_for(caller_name: str, caller_class: str) -> str:
    return FLEET_PARTITION if caller_class == "fleet" else f"restricted:{caller_name}"


def _url_key(url: str) -> str:
    return hashlib.sha256(url.encode()).hexdigest()


def lookup(partition: str, url: str) -> CachedDocument | None:
    return CachedDocument.objects.filter(partition=partition, url_sha256=_url_key(url)).first()


def is_fresh(document: CachedDocument, now: datetime | None = None) -> bool:
    age = (now or timezone.now()) - document.fetched_at
    return age < timedelta(seconds=settings.SIFT_CACHE_TTL)


def conditional_headers(document: CachedDocument) -> dict[str, str]:
    """Validators for revalidating a stale copy: a 304 answer means it is still good."""
    headers = {}
    if document.etag:
        headers["If-None-Match"] = document.etag
    if document.last_modified:
        headers["If-Modified-Since"] = document.last_modified
    return headers


def refresh(document: CachedDocument) -> None:
    document.fetched_at = timezone.now()
    CachedDocument.objects.filter(pk=document.pk).update(fetched_at=document.fetched_at)


def cacheable(download: Download) -> bool:
    directives = {d.strip().lower() for d in download.headers.get("cache-control", "").split(",")}
    return download.status == 200 and "no-store" not in directives


def store(partition: str, url: str, download: Download) -> None:
    """Keep (or replace) this partition's copy of ``url``, then fit the byte budget."""
    if not cacheable(download) or len(download.body) > settings.SIFT_CACHE_MAX_BYTES:
        return
    with transaction.atomic():
        CachedDocument.objects.update_or_create(
            partition=partition,
            url_sha256=_url_key(url),
            defaults={
                "url": url,
                "final_url": download.final_url,
                "status": download.status,
                "content_type": download.content_type,
                "charset": download.charset or "",
                "etag": download.headers.get("etag", "")[:500],
                "last_modified": download.headers.get("last-modified", "")[:100],
                "body": download.body,
                "n_bytes": len(download.body),
                "fetched_at": timezone.now(),
            },
        )
    evict_over_budget()


def evict_over_budget(max_bytes: int | None = None) -> int:
    """Delete the oldest copies until the cache fits its budget; return how many went."""
    budget = settings.SIFT_CACHE_MAX_BYTES if max_bytes is None else max_bytes
    excess = (CachedDocument.objects.aggregate(total=Sum("n_bytes"))["total"] or 0) - budget
    if excess <= 0:
        return 0
    victims = []
    for pk, n_bytes in CachedDocument.objects.order_by("fetched_at").values_list("pk", "n_bytes").iterator():
        if excess <= 0:
            break
        victims.append(pk)
        excess -= n_bytes
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
