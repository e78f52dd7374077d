"""The production ``FetchFunc`` of batch jobs: the fetch pipeline, in the worker's terms.

This is the one module that knows both sides (docs/architecture.md): a batch target is fetched
exactly as ``/v1/fetch`` would fetch it, and the pipeline's ``FetchError`` becomes the worker's
busy retry or the target's error, hint and outcome. A finished job's webhook goes out through
the same guarded client (``post_webhook``).

The pipeline itself is imported by the first fetch, not with this module: ``deliver_webhooks``
loads ``post_webhook`` from here and needs only the client, not the pipeline's libraries
(docs/webhooks.md, "Where delivery runs"). The cluster has it loaded before it forks its workers.
"""

from __future__ import annotations

from batch.engine.worker import Caller, Result, RetryLater, TargetFailed
from batch.webhooks.delivery import Answer
from fetch import cache, client
from fetch.errors import FetchError
from fetch.outcomes import Outcome
from fetch.politeness.host_turns import HostNotDue
from fetch.targets import Target


def fetch_target(caller: Caller, target: Target) -> Result:
    from fetch import pipeline  # noqa: PLC0415 (see the module's docstring)

    try:
        partition = cache.partition_for(caller.name, caller.caller_class)
        envelope = pipeline.fetch(
            target, partition=partition, caller=caller.name, wait_for_host=False, changes_scope=caller.scope
        )
    except HostNotDue as exc:
        raise RetryLater(exc.message, wait=exc.retry_after, host_turn=True) from None
    except FetchError as exc:
        if exc.outcome == Outcome.BUSY:
            raise RetryLater(exc.message, wait=exc.retry_after) from None
        raise TargetFailed(exc.outcome, exc.message, exc.hint) from None
    content = envelope.pop("content")
    # A screenshot (asked for) is stored beside the content, whole, and left out with it.
    picture = envelope.pop("screenshot", None)
    return {"content": content, "meta": envelope, **({"screenshot": picture} if picture else {})}


def post_webhook(url: str, body: bytes, headers: dict[str, str], timeout: float) -> Answer:
    """The webhooks' ``Sender``: the receiver's status, or the guard's or network's refusal."""
    try:
        return Answer(status=client.post(url, body, headers=headers, timeout=timeout))
    except FetchError as exc:
        return Answer(error=exc.message)
