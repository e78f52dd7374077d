"""A document sent by its caller (``POST /v1/read``, MCP ``read``) read as a fetched one would be
(docs/api.md, "Uploads"): the same readers in the sandbox, the same narrowing and slices.

Nothing of it is stored: not in the cache, not anywhere after the answer. Its name in the
envelope is ``sha256:`` and the digest of its bytes (``url`` and ``final_url``), so a cursor,
bound to the caller, that name and the options, reads the next slice only of the same file sent
again; and the text's ``content_sha256`` is checked as for a fetch.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.utils import timezone

from fetch import metrics
from fetch.answer import slices
from fetch.errors import FetchError
from fetch.extract import extract
from fetch.outcomes import Outcome
from fetch.sandbox import finish_line
from fetch.targets import Target, TargetOptions


@dataclass(frozen=True)
class Upload:
    """The bytes sent, the ``Content-Type`` they were sent with, and the file's name if given."""

    body: bytes
    content_type: str
    name: str = ""

    @property
    def sha256_name(self) -> str:
        return "sha256:" + hashlib.sha256(self.body).hexdigest()


def read_upload(upload: Upload, options: TargetOptions, *, caller: str) -> dict[str, Any]:
    """The envelope of ``upload`` read as ``options`` ask, for ``caller`` (its name: cursors are
    bound to it). Raises ``FetchError`` as ``extract`` does, ``empty`` for a file without text,
    and ``invalid_request`` for a cursor of another file or options."""
    started = time.monotonic()
    outcome = "ok"
    try:
        return _read(upload, options, caller=caller, started=started)
    except FetchError as exc:
        outcome = exc.outcome
        raise
    finally:
        metrics.REQUESTS.labels(outcome, "upload").inc()
        metrics.SECONDS.labels("upload").observe(time.monotonic() - started)


def _read(upload: Upload, options: TargetOptions, *, caller: str, started: float) -> dict[str, Any]:
    if not upload.body:
        raise FetchError(Outcome.EMPTY, "the upload holds no bytes", "Send the file as the request's body.")
    target = Target(upload.sha256_name, options)
    start = slices.start_of(target, caller=caller)
    with finish_line.finish_by(started + float(settings.SIFT_FETCH_TIMEOUT)):
        document = extract(
            upload.body,
            declared_type=upload.content_type,
            charset=None,
            url=target.url,
            options=options,
            name=upload.name,
        )
    if document.wordless:
        raise FetchError(Outcome.EMPTY, "the document holds no text to read", Outcome.UNREADABLE.hint)
    now = timezone.now().isoformat().replace("+00:00", "Z")
    return {
        "url": target.url,
        "final_url": target.url,
        "status": 200,
        "content_type": document.media_type,
        "mode": options.mode,
        **slices.answer(document, target, start, caller=caller),
        "bytes": len(upload.body),
        "fetched_at": now,
        "elapsed_ms": round((time.monotonic() - started) * 1000),
        "cache": "miss",
        "age": 0,
        "cached": False,
        "stale": False,
        **({"name": upload.name} if upload.name else {}),
        **document.meta(),
    }
