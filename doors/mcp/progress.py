"""``notifications/progress`` while ``batch_get`` waits, for a client that sent a ``progressToken``
(docs/mcp.md, "Progress").

The wait happens here, on the event loop, following the job through the process's job watch
(``doors.streams``, the one that feeds the event streams): each time a target ends, progress is
the targets ended and total the targets. The tool then reads the job without waiting again.
``tasks/result`` waits for its task's end the same way (``until_ended``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from mcp.server.context import ServerRequestContext

from batch.errors import Refused
from batch.models import ApiKey, BatchJob
from doors import streams
from doors.mcp import tools

Progress = tuple[bool, int, int]  # live, targets ended, targets


def job_progress(caller: ApiKey, job_id: str) -> Progress | None:
    row = BatchJob.objects.filter(pk=job_id, caller=caller).values_list(
        "status", "targets_done", "targets_total"
    )
    found = row.first()
    if found is None:
        return None
    status, done, total = found
    return BatchJob(status=status).is_live, done, total


def wants_progress(ctx: ServerRequestContext[Any, Any]) -> bool:
    meta: Any = ctx.meta or {}
    return meta.get("progress_token", meta.get("progressToken")) is not None


async def wait_reporting(
    ctx: ServerRequestContext[Any, Any], caller: ApiKey, tool: tools.Tool, arguments: dict[str, Any]
) -> dict[str, Any]:
    """Wait as ``batch_get``'s ``wait`` asks, reporting each target's end; the arguments the tool
    is then called with (``wait`` spent). Arguments the tool will refuse are left to it."""
    try:
        checked = tools.check_arguments(tool, arguments)
    except Refused:
        return arguments
    wait = checked.get("wait", 0)
    if not wait:
        return arguments
    job_id, deadline = checked["id"], asyncio.get_running_loop().time() + wait
    watch = streams.job_watch()
    moved = watch.follow(job_id)
    try:
        reported = None
        while True:
            moved.clear()
            state = await streams.in_query_thread(job_progress, caller, job_id)
            if state is None:
                break
            live, done, total = state
            if done != reported:
                await ctx.session.report_progress(done, total)
                reported = done
            remaining = deadline - asyncio.get_running_loop().time()
            if not live or remaining <= 0:
                break
            try:
                await asyncio.wait_for(moved.wait(), remaining)
            except TimeoutError:
                break
    finally:
        watch.unfollow(job_id, moved)
    return {**arguments, "wait": 0}


async def until_ended(caller: ApiKey, job_id: str) -> None:
    """Return once the caller's job has ended or is gone, waiting on the event loop through the
    process's job watch: a wait of any length holds no thread (``tasks/result``)."""
    watch = streams.job_watch()
    moved = watch.follow(job_id)
    try:
        while True:
            moved.clear()  # before reading: a move during the read wakes the wait at once
            state = await streams.in_query_thread(job_progress, caller, job_id)
            if state is None or not state[0]:
                return
            await moved.wait()
    finally:
        watch.unfollow(job_id, moved)
