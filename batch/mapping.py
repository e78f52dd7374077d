"""One site mapped now for a caller: what ``/v1/map`` and the MCP ``map`` tool both call.

A map holds its request thread for up to ``SIFT_MAP_TIMEOUT``, so it takes one of the caller's
fetch shares (``SIFT_FETCH_PER_CALLER``), as ``/v1/fetch`` does: maps and fetches in flight per
caller are bounded together.
"""

from __future__ import annotations

from typing import Any

from batch.fetching import fetch_share
from batch.models import ApiKey
from fetch import discovery
from fetch.map_options import MapRequest


def map_for(caller: ApiKey, request: MapRequest) -> dict[str, Any]:
    """Map ``request.url``'s site in the caller's cache partition, within its fetch shares."""
    with fetch_share(caller, hint="Wait for one of them to answer, then map again.") as partition:
        return discovery.map_site(request, partition=partition)
