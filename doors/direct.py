"""What is answered at once, without a job: one target fetched (``/v1/fetch``, MCP ``fetch``), one
uploaded document read (``/v1/read``, MCP ``read``) or one site mapped (``/v1/map``, MCP ``map``)
for a caller.

No job is stored. A caller's fetches and maps are bounded twice by its fetch share
(``SIFT_FETCH_PER_CALLER``): in this process, by the request threads it may hold (a map holds
its thread for up to ``SIFT_MAP_TIMEOUT``, so it takes a share as a fetch does), and across the
deployment, by the fetch slots it may hold, which the gate counts with its batch targets and
renders.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings

from batch.models import ApiKey
from batch.threads import ThreadShares
from fetch import cache, pipeline
from fetch.discovery import site_urls
from fetch.discovery.map_options import MapRequest
from fetch.documents.uploads import Upload, read_upload
from fetch.errors import FetchError
from fetch.outcomes import Outcome, RetryAfter
from fetch.targets import Target, TargetOptions

# Each caller's fetches in flight in this process, at most its fetch share: a request thread
# waiting for the gate or a slow site is held, and a process has only so many.
FETCHES = ThreadShares(lambda: settings.SIFT_FETCH_PER_CALLER, lambda: None)


def fetch_for(caller: ApiKey, target: Target) -> dict[str, Any]:
    """Fetch a validated ``target`` through the pipeline, in the caller's cache partition.

    A fetch may hold its request thread for the gate wait and the whole deadline, so a caller
    has only its fetch share of them in flight per process; one more answers busy.
    """
    hint = "Wait for one of them to answer, or send many URLs as one batch (POST /v1/batch)."
    with fetch_share(caller, hint=hint) as partition:
        return pipeline.fetch(target, partition=partition, caller=caller.name)


@contextmanager
def fetch_share(caller: ApiKey, *, hint: str) -> Iterator[str]:
    """One of the caller's fetch shares in this process (fetches and maps count alike), held
    while the block runs; it gives the caller's cache partition. Without a share: busy."""
    with FETCHES.share(caller.pk) as granted:
        if not granted:
            raise FetchError(
                Outcome.BUSY,
                f"you already have {settings.SIFT_FETCH_PER_CALLER} fetches or maps in flight here",
                hint,
                retry_after=RetryAfter.FETCH,
            )
        yield cache.partition_for(caller.name, caller.caller_class)


def read_for(caller: ApiKey, upload: Upload, options: TargetOptions) -> dict[str, Any]:
    """Read an uploaded document for ``caller`` within its fetch share of this process (an
    upload keeps a parser as busy as a fetched document); nothing of it is stored."""
    with fetch_share(caller, hint="Wait for one of your fetches or uploads to answer, then send it again."):
        return read_upload(upload, options, caller=caller.name)


def map_for(caller: ApiKey, request: MapRequest) -> dict[str, Any]:
    """Map ``request.url``'s site in the caller's cache partition, within its fetch shares."""
    with fetch_share(caller, hint="Wait for one of them to answer, then map again.") as partition:
        return site_urls.map_site(request, partition=partition, caller=caller.name)
