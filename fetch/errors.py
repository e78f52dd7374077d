"""The fetch pipeline's one error: every failure leaves ``fetch`` as a ``FetchError``."""

from __future__ import annotations

from fetch.outcomes import Outcome


class FetchError(Exception):
    """A fetch that did not produce content, with its outcome and a hint (docs/api.md).

    ``upstream_status`` is set for ``upstream_4xx``/``upstream_5xx`` (and for ``busy`` when the
    upstream said 429/503); ``retry_after`` (seconds) for ``busy``; ``action`` (the failing step's
    0-based index) for ``action_failed``.
    """

    def __init__(
        self,
        outcome: Outcome,
        message: str,
        hint: str,
        *,
        upstream_status: int | None = None,
        retry_after: float | None = None,
        action: int | None = None,
    ) -> None:
        super().__init__(message)
        self.outcome = Outcome.of(outcome)  # an unknown outcome is a bug: ValueError
        self.message = message
        self.hint = hint
        self.upstream_status = upstream_status
        self.retry_after = retry_after
        self.action = action

    @property
    def http_status(self) -> int:
        return self.outcome.http_status
