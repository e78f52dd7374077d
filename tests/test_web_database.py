"""The web process and its database: connections come from a pool, and a database that refuses is
503 ``server_busy`` with ``Retry-After``, never a 500."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import OperationalError, connection

from doors.rest import batches

from .deployment import ROOT, Deployment
from .deployment import test_database_url as database_url
from .factories import MakeCaller

on_postgres = pytest.mark.skipif(connection.vendor != "postgresql", reason="the pool is PostgreSQL's")


def sessions_opened() -> int:
    """How many connections PostgreSQL has accepted on the test database since it was created."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
        return int(cursor.fetchone()[0])


@pytest.fixture
def web(django_db_blocker, tmp_path) -> Iterator[Deployment]:
    with django_db_blocker.unblock():
        deployment = Deployment(tmp_path, {})
    try:
        deployment.start_procfile_web()
        yield deployment
    finally:
        deployment.stop_all()


@on_postgres
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_web_process_reuses_its_connections_across_requests(web, make_caller: MakeCaller):
    """Each request runs in a thread of its own under ASGI: without the pool, each opened a
    connection of its own and left it open (a 16-client load then ran PostgreSQL out of them)."""
    _, caller = make_caller("pooled")
    key = caller.raw_key
    for _ in range(10):  # both workers have taken their connections
        assert web.request("/v1/batch", key)[0] == 200
    before = sessions_opened()
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda _: web.request("/v1/batch", key)[0], range(120)))
    statuses += [web.request("/healthz")[0] for _ in range(40)]
    assert set(statuses) == {200}
    # Eight requests at a time: at most eight connections, however many requests (a pool of 16 a worker).
    assert sessions_opened() - before <= 16


@pytest.mark.django_db
def test_a_database_that_refuses_is_server_busy_with_retry_after(agent, monkeypatch):
    def refuse(*args: object, **kwargs: object) -> None:
        raise OperationalError("sorry, too many clients already")

    monkeypatch.setattr(batches.jobs, "list_jobs", refuse)
    _, client = agent
    response = client.get("/v1/batch")
    assert response.status_code == 503
    body = response.json()
    assert body["code"] == "server_busy"
    assert response["Retry-After"] == str(body["retry_after"]) == "2"
    assert "too many clients" not in body["error"]


@on_postgres
@pytest.mark.postgres
@pytest.mark.django_db
def test_loading_the_web_application_opens_no_connection_for_the_forked_workers_to_share():
    """gunicorn loads sift_site.asgi once (``--preload``) and forks its workers from it: a pool or
    a connection opened by then would hand the same sockets to every worker."""
    probe = (
        "import sift_site.asgi\n"
        "from django.db import connections\n"
        "c = connections['default']\n"
        "print(len(type(c)._connection_pools), c.connection is None)\n"
    )
    env = {**os.environ, "DATABASE_URL": database_url(), "SIFT_DATABASE_POOL": "true"}
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.split() == ["0", "True"]
