"""One site mapped now for a caller: what ``/v1/map`` and the MCP ``map`` tool both call.

A map holds its request thread for up to ``SIFT_MAP_TIMEOUT``, so it takes one of the caller's
fetch shares (``SIFT_FETCH_PER_CALLER``), as ``/v1/fetch`` does: maps and fetches in flight per
caller are bounded together.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from batch.fetching import FETCHES
from batch.models import ApiKey
from fetch import cache, discovery
from fetch.errors import FetchError
from fetch.map_options import MapRequest
from fetch.outcomes import Outcome, RetryAfter


def map_for(caller: ApiKey, request: MapRequest) -> dict[str, Any]:
    """Map ``request.url``'s site in the caller's cache partition, within its fetch shares."""
    with FETCHES.share(caller.pk) as granted:
        if not granted:
            raise FetchError(
                Outcome.BUSY,
                f"you already have {settings.SIFT_FETCH_PER_CALLER} fetches or maps in flight here",
                "Wait for one of them to answer, then map again.",
                retry_after=RetryAfter.FETCH,
            )
        return discovery.map_site(request, partition=cache.partition_for(caller.name, caller.caller_class))
