"""A submit's ``callback_url``: refused at once unless the fetch guard would let a POST reach it.

The guard looks the host up, and a resolver may never answer, so the check holds no request
thread for long: it runs in a thread of its own, the request waits for it at most
``SIFT_WEBHOOK_RESOLVE_TIMEOUT`` (then 400 naming the field), and it takes one of the caller's
fetch shares first (``doors.direct.FETCHES``), which it keeps until the lookup ends, however
long after the answer that is. A slow resolver costs a caller its own shares, never ``/healthz``
or another caller a thread (docs/decisions.md, "Callback checks share a fetch's threads").

The guard runs again at every delivery attempt (``batch.pipeline_bridge.post_webhook``): a name that
resolves elsewhere later is refused then. See docs/webhooks.md.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future

from django.conf import settings

from batch.errors import Refusal, Refused
from batch.models import ApiKey
from doors.direct import FETCHES
from fetch import guard
from fetch.errors import FetchError
from fetch.outcomes import RetryAfter

FIELD = "callback_url"
HINT = "The callback URL must pass the same checks as a fetch."

# Lookups that outlived their request run on until the resolver gives up. Each caller has at most
# its fetch shares of them; this bounds them in all, per process, whatever the number of callers.
LOOKUPS_IN_ALL = 16
_LOOKUPS = threading.BoundedSemaphore(LOOKUPS_IN_ALL)


def validate_callback_url(caller: ApiKey, raw: str | None) -> str:
    """The URL to store (``""`` for none), or 400 ``invalid_request`` naming the field.

    429 ``caller_busy`` when the caller's fetch shares are all taken here, 503 ``jobs_busy`` when
    this process has ``LOOKUPS_IN_ALL`` lookups outstanding; both with ``Retry-After``.
    """
    if not raw:
        return ""
    try:
        _check_in_time(caller, raw)
    except FetchError as exc:
        raise _invalid(exc.message.removeprefix("refused to fetch: "), exc.hint) from None
    return raw


def _check_in_time(caller: ApiKey, url: str) -> None:
    if not FETCHES.take(caller.pk):
        raise _caller_busy()
    if not _LOOKUPS.acquire(blocking=False):
        FETCHES.give_back(caller.pk)
        raise _lookups_busy()
    checked: Future[guard.Destination] = Future()
    lookup = threading.Thread(target=_check, args=(url, caller.pk, checked), name="callback", daemon=True)
    try:
        lookup.start()
    except RuntimeError:  # no thread to be had: nothing will free the places taken for it
        _free(caller.pk)
        raise
    seconds = settings.SIFT_WEBHOOK_RESOLVE_TIMEOUT
    try:
        checked.result(timeout=seconds)
    except TimeoutError:
        raise _invalid(
            f"the host name did not resolve within {seconds:g}s",
            "Check the host name, or submit again once its DNS answers.",
        ) from None


def _check(url: str, caller_id: int, checked: Future[guard.Destination]) -> None:
    """The guard's check in a thread of its own; its share and its place are freed when it ends."""
    try:
        checked.set_result(guard.check_url(url))
    except BaseException as exc:  # handed to the request, which raises it if it still waits
        checked.set_exception(exc)
    finally:
        _free(caller_id)


def _free(caller_id: int) -> None:
    _LOOKUPS.release()
    FETCHES.give_back(caller_id)


def _invalid(reason: str, hint: str) -> Refused:
    return Refused(
        Refusal.INVALID_REQUEST,
        f"{FIELD}: {reason}",
        f"{HINT} {hint}",
        details=[{"field": FIELD, "message": reason}],
    )


def _caller_busy() -> Refused:
    return Refused(
        Refusal.CALLER_BUSY,
        f"you already have {settings.SIFT_FETCH_PER_CALLER} fetches or callback checks in flight here",
        "Submit again after Retry-After seconds; a callback whose host did not resolve in time keeps "
        "its place until the lookup ends.",
        retry_after=RetryAfter.FETCH,
    )


def _lookups_busy() -> Refused:
    return Refused(
        Refusal.JOBS_BUSY,
        "too many callback URLs are being looked up here",
        "Submit again after Retry-After seconds.",
        retry_after=RetryAfter.JOBS,
    )
