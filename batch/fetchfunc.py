"""What the worker asks of a fetch function (``FetchFunc``): the caller and the target it is given,
the result it returns, and the two exceptions it may raise instead. See docs/workers.md."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from fetch.outcomes import Outcome
from fetch.targets import Target


class Caller(NamedTuple):
    name: str
    caller_class: str


Result = dict[str, Any]
FetchFunc = Callable[[Caller, Target], Result]


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
