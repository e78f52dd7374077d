"""What the worker asks of a fetch function (``FetchFunc``): the caller and the target it is given,
the result it returns, and the two exceptions it may raise instead; and which one runs
(``fetch_func``). See docs/workers.md."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, cast

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from fetch.outcomes import Outcome
from fetch.targets import Target


class Caller(NamedTuple):
    """Who a target is fetched for; ``scope`` is whose last readings ``changes: true`` compares
    with: the caller's own (empty), or a monitor's (``monitor:<id>``)."""

    name: str
    caller_class: str
    scope: str = ""


Result = dict[str, Any]
FetchFunc = Callable[[Caller, Target], Result]

# The production fetch is imported by name, so that the worker never imports the pipeline; an
# environment variable must not make a worker import any module but a test's or a benchmark's.
PIPELINE_FETCH = "batch.pipeline_bridge.fetch_target"
TEST_FETCH_MODULES = ("tests.", "bench.")
TEST_FETCH_FUNC_RULE = "only a function of a module under tests/ or bench/ may replace the fetch"


def fetch_func() -> FetchFunc:
    """The pipeline's bridge, or the tests' and benchmarks' stand-in (``SIFT_TEST_FETCH_FUNC``)."""
    override = settings.SIFT_TEST_FETCH_FUNC
    if override and not allowed_test_fetch(override):
        raise ImproperlyConfigured(f"SIFT_TEST_FETCH_FUNC={override!r}: {TEST_FETCH_FUNC_RULE}")
    return cast(FetchFunc, import_string(override or PIPELINE_FETCH))


def allowed_test_fetch(path: str) -> bool:
    return path.startswith(TEST_FETCH_MODULES)


class TargetFailed(Exception):
    """Why a target failed: an outcome of the table, an error and a hint. A FetchFunc raises it."""

    def __init__(self, outcome: Outcome, error: str, hint: str) -> None:
        super().__init__(error)
        self.outcome, self.error, self.hint = outcome, error, hint


class RetryLater(Exception):
    """Busy: try again after ``wait`` seconds; ``host_turn``: the host is not due yet (docs/politeness.md)."""

    def __init__(self, message: str = "busy", *, wait: float | None = None, host_turn: bool = False) -> None:
        super().__init__(message)
        self.wait, self.host_turn = wait, host_turn
