"""The statistics the benchmarks print, defined once so that every table means the same by "p90".

Percentiles interpolate linearly between the two nearest ranks (numpy's default, and
``statistics.quantiles(method="inclusive")``): the 50th percentile is the median, the 0th the
smallest value and the 100th the largest. With few values (a 32-target job) this reads more
steadily than the nearest rank, which jumps from one value to the next.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def percentile(values: Iterable[float], p: float) -> float:
    """The ``p``-th percentile (0 to 100) of ``values``; nan when there are none."""
    if not 0 <= p <= 100:
        raise ValueError(f"a percentile is between 0 and 100, not {p}")
    ordered = sorted(values)
    if not ordered:
        return math.nan
    at = (len(ordered) - 1) * p / 100
    low = math.floor(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def median(values: Iterable[float]) -> float:
    return percentile(values, 50)
