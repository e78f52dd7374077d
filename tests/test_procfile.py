"""Each line of the Procfile states its own process count, so that what a platform sets for one
line (``WEB_CONCURRENCY``, for the web line) changes no other (docs/operations.md, "Processes")."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from batch.engine.supervisor import live_processes

from .deployment import Deployment, procfile_command


def test_the_web_and_mcp_lines_name_their_worker_counts():
    assert " --workers 2 " in procfile_command("web")
    assert " --workers 1 " in procfile_command("mcp")


@pytest.fixture
def deployment(django_db_blocker, tmp_path) -> Iterator[Deployment]:
    with django_db_blocker.unblock():
        running = Deployment(tmp_path, {"WEB_CONCURRENCY": "4"})
    try:
        yield running
    finally:
        running.stop_all()


@pytest.mark.django_db(transaction=True)
def test_the_mcp_line_runs_one_process_whatever_web_concurrency_says(deployment):
    deployment.start_mcp()
    pid = deployment.processes["mcp"].pid
    children = [entry.pid for entry in live_processes() if entry.ppid == pid]
    assert children == []  # uvicorn with more workers serves from children under a supervisor
