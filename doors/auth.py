"""Who is calling: ``Authorization: Bearer <key>``, an unknown key 401, a revoked key 403 (docs/api.md).

The REST API and the MCP server both authenticate through ``caller_for_key``. Staff log in to the
console with a password, throttled by django-axes through ``StaffLoginThrottle`` (docs/admin.md).
"""

from __future__ import annotations

from typing import Any

from axes.backends import AxesStandaloneBackend
from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone
from ninja.security import HttpBearer

from batch.errors import Refusal, Refused
from batch.models import ApiKey, hash_key


class KeyAuth(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> ApiKey | None:
        return caller_for_key(token)


class BatchAuth(KeyAuth):
    """``KeyAuth`` for the batch endpoints, which answer ``batch_disabled`` first when batch is off."""

    def __call__(self, request: HttpRequest) -> ApiKey | None:
        ensure_batch_enabled()
        return super().__call__(request)


def caller_for_key(raw_key: str) -> ApiKey | None:
    """The caller a bearer key names, for every door (REST and MCP): ``None`` when unknown."""
    if not raw_key or not raw_key.isascii():
        return None  # keys are ASCII: anything else (a WSGI header is Latin-1) is no key
    try:  # get(), not first(): one row at most (a unique column), so no ORDER BY to build
        api_key = ApiKey.objects.get(key_sha256=hash_key(raw_key))
    except ApiKey.DoesNotExist:
        return None
    if not api_key.active:
        raise Refused(Refusal.FORBIDDEN, "this API key has been revoked", "Ask an operator for a new key.")
    _note_use(api_key)
    return api_key


def _note_use(api_key: ApiKey) -> None:
    # At most one write a minute per key, so authentication does not turn every read into a write.
    now = timezone.now()
    if api_key.last_used_at is None or (now - api_key.last_used_at).total_seconds() > 60:
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)


def ensure_batch_enabled() -> None:
    if not settings.SIFT_BATCH_ENABLED:
        raise Refused(
            Refusal.BATCH_DISABLED, "batch processing is disabled here", "Use /v1/fetch for single URLs."
        )


def caller_of(request: HttpRequest) -> ApiKey:
    """The caller an authenticated request carries."""
    caller: ApiKey = request.auth  # type: ignore[attr-defined]
    return caller


class StaffLoginThrottle(AxesStandaloneBackend):
    """The first authentication backend: django-axes refuses a login for a user name from an
    address that failed ``SIFT_ADMIN_LOGIN_FAILURES`` times, until ``SIFT_ADMIN_LOGIN_LOCKOUT``
    has passed. A login without a request (a shell, a command, a test client's ``login``) has no
    address and comes from no network: it is left to the next backend unthrottled."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> None:
        if request is None:
            return None
        return super().authenticate(request, username, password, **kwargs)
