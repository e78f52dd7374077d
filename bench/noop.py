"""A FetchFunc that fetches nothing, for ``bench/scheduling.py``: what is left is the bookkeeping.

Point ``SIFT_TEST_FETCH_FUNC`` at ``bench.noop.noop`` and every target ends at once with an empty
result, so a job's time is the cost of claiming, storing and settling its targets.
"""

from __future__ import annotations

from batch.engine.worker import Caller, Result
from fetch.targets import Target


def noop(caller: Caller, target: Target) -> Result:
    return {"content": "", "meta": {}}
