"""PostgreSQL restarting under a running batch: web and cluster reconnect by themselves.

Runs on a PostgreSQL server of its own (``tests/private_postgres.py``), never on the shared one,
whichever database the rest of the suite uses; skipped where PostgreSQL's server binaries are
missing.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from .deployment import ROOT, Deployment, wait_for
from .private_postgres import PrivatePostgres, postgres_bin, private_postgres

pytestmark = pytest.mark.cluster

TARGETS = 16
# Far longer than the test: a target in flight during the restart is retried by its own worker,
# not recovered by an expired lease (which would count it as a lost worker).
LEASE = "600s"


@pytest.fixture
def server() -> Iterator[PrivatePostgres]:
    bin_dir = postgres_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL's server binaries (initdb, pg_ctl) are not installed")
    with private_postgres(bin_dir) as server:
        server.create_database("sift")
        yield server


@pytest.fixture
def deployment(server, tmp_path) -> Iterator[Deployment]:
    env = {
        "DATABASE_URL": server.url("sift"),
        "SECRET_KEY": secrets.token_urlsafe(50),
        "SIFT_BATCH_WORKERS": "2",
        "SIFT_BATCH_CLAIM_LEASE": LEASE,
    }
    deployment = Deployment(tmp_path, env)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=deployment.env, check=True)
    yield deployment
    deployment.stop_all()


def _api_key(deployment: Deployment) -> str:
    command = [sys.executable, "manage.py", "create_api_key", "restarter"]
    done = subprocess.run(command, cwd=ROOT, env=deployment.env, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def _submit(deployment: Deployment, key: str, urls: list[str]) -> str:
    request = urllib.request.Request(
        f"http://127.0.0.1:{deployment.port}/v1/batch",
        data=json.dumps({"targets": urls}).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return str(json.load(response)["id"])


def _targets(server: PrivatePostgres) -> list[tuple[int, str, int]]:
    with psycopg.connect(server.url("sift")) as conn:
        rows = conn.execute("SELECT idx, status, lost_leases FROM batch_batchtarget ORDER BY idx").fetchall()
    return [(int(idx), str(status), int(lost)) for idx, status, lost in rows]


def _db_ok(deployment: Deployment) -> bool:
    try:
        status, body, _ = deployment.request("/healthz", timeout=2)
    except OSError:
        return False
    return status == 200 and json.loads(body)["db"] == "ok"


def test_a_database_restart_mid_batch_loses_nothing_and_stores_nothing_twice(server, deployment, tmp_path):
    key = _api_key(deployment)
    deployment.start_procfile_web()  # the web line as deployed: ASGI, its connection pool
    deployment.start_cluster()
    job_id = _submit(deployment, key, [f"https://upstream.test/{i}?sleep=0.3" for i in range(TARGETS)])
    wait_for(
        lambda: sum(status == "done" for _, status, _ in _targets(server)) >= 4, 60, "a few targets done"
    )

    began = time.monotonic()
    server.restart()
    wait_for(lambda: _db_ok(deployment), 30, "/healthz to say db: ok again")
    assert time.monotonic() - began < 10

    def settled() -> bool:
        status, body, _ = deployment.request(f"/v1/batch/{job_id}?content=false", key)
        return status == 200 and json.loads(body)["status"] not in ("queued", "running")

    wait_for(settled, 90, "the job to finish")
    _, body, _ = deployment.request(f"/v1/batch/{job_id}?content=false", key)
    job = json.loads(body)
    assert (job["status"], job["targets_done"]) == ("done", TARGETS)
    assert _targets(server) == [(idx, "done", 0) for idx in range(TARGETS)]
    log = Path(tmp_path / "cluster.log").read_text(errors="replace")
    stored = [len(re.findall(rf"target {idx} done outcome=", log)) for idx in range(TARGETS)]
    assert stored == [1] * TARGETS
    assert re.search("the database (went away|is unavailable)", log), "the cluster never noticed the restart"
