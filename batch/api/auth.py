"""Who is calling: ``Authorization: Bearer <key>``, an unknown key 401, a revoked key 403 (docs/api.md).

The REST API and the MCP server both authenticate through ``caller_for_key``.
"""

from __future__ import annotations

from django.conf import settings
from django.db import connection
from django.http import HttpRequest
from django.utils import timezone
from ninja.security import HttpBearer

from batch.errors import Refusal, Refused
from batch.models import ApiKey, hash_key
from batch.statements import as_read_by_the_orm, prepared_cursor


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
    api_key = _api_key_with_hash(hash_key(raw_key))
    if api_key is None:
        return None
    if not api_key.active:
        raise Refused(Refusal.FORBIDDEN, "this API key has been revoked", "Ask an operator for a new key.")
    _note_use(api_key)
    return api_key


# Every column of ApiKey, in the model's order, as ``Model.from_db`` takes them.
_FIELDS = ApiKey._meta.concrete_fields


def _api_key_with_hash(key_sha256: str) -> ApiKey | None:
    """The caller whose key hashes to ``key_sha256``, read by one plain ``SELECT``.

    Every API request runs this lookup; building and compiling it through the ORM cost three
    times the statement itself. Values are read back as the ORM would (``as_read_by_the_orm``).
    """
    q = connection.ops.quote_name
    columns = ", ".join(q(str(f.column)) for f in _FIELDS)
    sql = f"SELECT {columns} FROM {q(ApiKey._meta.db_table)} WHERE {q('key_sha256')} = %s"  # noqa: S608 - names come from the model
    with prepared_cursor() as cursor:
        cursor.execute(sql, [key_sha256])
        row = cursor.fetchone()
    if row is None:
        return None
    values = [as_read_by_the_orm(field, value) for field, value in zip(_FIELDS, row, strict=True)]
    return ApiKey.from_db(connection.alias, [f.attname for f in _FIELDS], values)


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
