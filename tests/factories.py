"""Builders the tests share: callers' clients, submitted jobs, job rows, submit races, loopback.

Test modules import from here (and from ``deployment``, ``upstream``, ``fetchers``), never from
one another, so a test file can be read, moved or deleted on its own.
"""

from __future__ import annotations

import ipaddress
import secrets
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from django.db import connection
from django.test import Client
from django.utils import timezone

from batch import jobs
from batch.errors import Refused
from batch.models import FINISHED_STATUSES, ApiKey, BatchJob, BatchTarget
from doors.validation import validate_targets

# The only networks a test lets the fetch guard reach: this machine.
LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))

# Host of the targets the scripted FetchFunc (``tests/fetchers.py``) answers without a network.
SCRIPTED_BASE = "https://upstream.test/"


class ApiClient:
    """A Django test client that sends one caller's bearer key and JSON bodies."""

    def __init__(self, raw_key: str | None) -> None:
        self.raw_key = raw_key
        self.client = Client()
        self.headers = {"Authorization": f"Bearer {raw_key}"} if raw_key else {}

    def get(self, path: str, **params: Any) -> Any:
        return self.client.get(path, params, headers=self.headers)

    def post(self, path: str, body: Any) -> Any:
        return self.client.post(path, body, content_type="application/json", headers=self.headers)

    def delete(self, path: str) -> Any:
        return self.client.delete(path, headers=self.headers)


MakeCaller = Callable[..., tuple[ApiKey, ApiClient]]


def submit(client: ApiClient, targets: Sequence[object] = ("https://example.org/",)) -> dict[str, Any]:
    """POST ``targets`` to ``/v1/batch`` as ``client``'s caller; answer the accepted job's body."""
    response = client.post("/v1/batch", {"targets": list(targets)})
    assert response.status_code == 202, response.content
    body: dict[str, Any] = response.json()
    return body


def scripted_job(caller: ApiKey, *queries: str) -> BatchJob:
    """A job submitted through the jobs service, one target per query for the scripted FetchFunc."""
    return jobs.submit(
        caller, validate_targets([f"{SCRIPTED_BASE}{i}?{q}" for i, q in enumerate(queries)])
    ).job


def make_job(
    caller: ApiKey,
    status: str = "queued",
    *,
    targets: Sequence[dict[str, Any]] = ({},),
    created_at: datetime | None = None,
    **fields: Any,
) -> BatchJob:
    """A job row as a submit would have left it, with ``targets`` given as BatchTarget fields.

    ``fields`` set BatchJob fields the counts and times derived here do not fit (``n_bytes``, a
    ``last_read_at``, counters of a job whose targets are not stored)."""
    when = created_at or timezone.now()
    finished = [t for t in targets if t.get("status") in ("done", "failed")]
    job = BatchJob.objects.create(
        **{
            "caller": caller,
            "caller_class": caller.caller_class,
            "status": status,
            "targets_total": len(targets),
            "targets_done": len(finished),
            "targets_failed": sum(1 for t in finished if t["status"] == "failed"),
            "created_at": when,
            "last_read_at": when,
            "finished_at": when if status in FINISHED_STATUSES else None,
            "content_key": secrets.token_hex(32),
            **fields,
        }
    )
    # Finished targets are numbered in index order, as if they had ended in that order.
    ended = [i for i, target in enumerate(targets) if target.get("status") in ("done", "failed")]
    seqs = {i: n for n, i in enumerate(ended, start=1)}
    BatchTarget.objects.bulk_create(
        BatchTarget(job=job, idx=i, **{"url": f"https://example.org/{i}", "seq": seqs.get(i), **target})
        for i, target in enumerate(targets)
    )
    return job


def done_target(
    content: str = "# Hello", meta: dict[str, Any] | None = None, **fields: Any
) -> dict[str, Any]:
    meta = {"title": "Hello", "status": 200} if meta is None else meta
    return {"status": "done", "result": {"content": content, "meta": meta}, "n_bytes": 2048, **fields}


def failed_target(**fields: Any) -> dict[str, Any]:
    return {
        "status": "failed",
        "outcome": "blocked",
        "error": "the address is not public",
        "hint": "Use a public URL.",
        "attempts": 1,
        **fields,
    }


# How many submits a race sends at once.
N_THREADS = 64


def race(submits: Sequence[Callable[..., jobs.Submitted]]) -> list[str]:
    """Run every submit in its own thread, all released at once; return job ids or error codes.

    Each answer is ``new:<id>``, ``reused:<id>``, a refusal code, or ``error:<repr>``."""
    barrier = threading.Barrier(len(submits))
    answers: list[str] = [""] * len(submits)

    def run(i: int) -> None:
        try:
            barrier.wait()
            submitted = submits[i]()
            answers[i] = ("reused:" if submitted.reused else "new:") + submitted.job.id
        except Refused as exc:
            answers[i] = exc.code
        except Exception as exc:
            answers[i] = f"error:{exc!r}"
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(submits))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers
