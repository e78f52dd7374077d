"""The access log of the Procfile's processes prints paths, never query strings: the URL an agent
fetched (``/v1/fetch?url=…``) is the caller's business (docs/operations.md, "Logs")."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .deployment import Deployment

SECRET = "the-url-an-agent-fetched"


@pytest.fixture
def deployment(django_db_blocker, tmp_path) -> Iterator[Deployment]:
    with django_db_blocker.unblock():
        running = Deployment(tmp_path, {})
    try:
        yield running
    finally:
        running.stop_all()


@pytest.mark.django_db(transaction=True)
def test_the_web_lines_access_log_prints_the_path_and_not_the_query_string(deployment):
    deployment.start_procfile_web()

    status, _, _ = deployment.request(f"/v1/fetch?url=https%3A%2F%2F{SECRET}.example%2F&max_age=0", "bad key")
    assert status == 401
    status, _, _ = deployment.request(f"/v1/batch?{SECRET}=1", "bad key")
    assert status == 401
    status, _, _ = deployment.request(f"/healthz?{SECRET}=1")
    assert status == 200

    log = deployment.log("web")  # a line is written before its response is sent
    assert '"GET /v1/fetch HTTP/1.1" 401' in log
    assert '"GET /v1/batch HTTP/1.1" 401' in log
    assert "/healthz" not in log  # health checks are DEBUG lines
    assert SECRET not in log


@pytest.mark.django_db(transaction=True)
def test_the_mcp_lines_access_log_prints_the_path_and_not_the_query_string(deployment):
    deployment.start_mcp()

    deployment.port = deployment.mcp_port
    status, _, _ = deployment.request(f"/mcp?{SECRET}=1")
    assert status == 401

    log = deployment.log("mcp")  # a line is written before its response is sent
    assert log.count('"GET /mcp HTTP/1.1" 401') == 2  # the start-up's and this test's
    assert SECRET not in log
