"""The fetch pipeline's one error: every failure leaves ``batch/fetch`` as a ``FetchError``."""

from __future__ import annotations

# SPEC §5.8: the HTTP status ``/v1/fetch`` answers for each outcome.
HTTP_STATUS = {
    "invalid_request": 400,
    "blocked": 403,
    "unsupported": 415,
    "too_long": 422,
    "busy": 429,
    "upstream_4xx": 502,
    "upstream_5xx": 502,
    "timeout": 504,
    "filter_timeout": 422,
    "internal": 500,
}


class FetchError(Exception):
    """A fetch that did not produce content, with an outcome of SPEC §5.8 and a hint.

    ``upstream_status`` is set for ``upstream_4xx``/``upstream_5xx`` (and for ``busy`` when the
    upstream said 429/503); ``retry_after`` (seconds) for ``busy``.
    """

    def __init__(
        self,
        outcome: str,
        message: str,
        hint: str,
        *,
        upstream_status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        if outcome not in HTTP_STATUS:
            raise ValueError(f"unknown outcome {outcome!r}")
        super().__init__(message)
        self.outcome = outcome
        self.message = message
        self.hint = hint
        self.upstream_status = upstream_status
        self.retry_after = retry_after

    @property
    def http_status(self) -> int:
        return HTTP_STATUS[self.outcome]
