"""The Grafana dashboard (deploy/grafana/sift.json): importable, every query valid PromQL, and every
metric name it and the alerting rules use served by a deployment's /metrics once each door was
driven (in multi-process mode a series nothing touched is absent). Metric names are read from the
files, so a panel or a rule added later is checked as it is."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from batch.models import ApiKey

from .deployment import Deployment
from .receiver import receiver
from .test_alert_rules import alerts, promtool
from .traffic import drive_every_door
from .upstream import ARTICLE, page_upstream

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "deploy" / "grafana" / "sift.json"
# sift's own series; Prometheus's (``up``) are not sift's to serve.
METRIC_NAME = re.compile(r"\bsift_[a-z0-9_]+\b")


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def panels() -> list[dict[str, Any]]:
    return [panel for panel in dashboard()["panels"] if panel["type"] != "row"]


def queries() -> list[str]:
    return [target["expr"] for panel in panels() for target in panel["targets"]]


def metric_names() -> set[str]:
    exprs = queries() + [alert["expr"] for alert in alerts()]
    return {name for expr in exprs for name in METRIC_NAME.findall(expr)}


def test_the_dashboard_imports_with_a_datasource_variable_every_panel_uses():
    board = dashboard()
    variables = {variable["name"]: variable for variable in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in panels():
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"], panel["title"]
        assert all(target["datasource"]["uid"] == "${datasource}" for target in panel["targets"])
        place = panel["gridPos"]
        assert place["x"] + place["w"] <= 24, panel["title"]
    assert board["uid"]
    assert board["title"] == "sift"


def test_every_query_of_the_dashboard_is_valid_promql(tmp_path):
    # promtool checks PromQL as it checks rules: each query as a recording rule, Grafana's
    # variables given values first.
    rules = [
        {
            "record": f"sift_dashboard:query_{index}",
            "expr": expr.replace("$__rate_interval", "5m").replace("$instance", ".*"),
        }
        for index, expr in enumerate(queries())
    ]
    path = tmp_path / "queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    done = subprocess.run(
        [promtool(), "check", "rules", str(path)], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture
def deployment(django_db_blocker, tmp_path) -> Iterator[tuple[Deployment, int]]:
    with page_upstream(ARTICLE.encode(), "text/html; charset=utf-8") as page_port:
        with django_db_blocker.unblock():
            running = Deployment(tmp_path, {"SIFT_FETCH_ALLOW_CIDRS": "127.0.0.1/32"})
        try:
            yield running, page_port
        finally:
            running.stop_all()


@pytest.mark.django_db(transaction=True)
def test_every_metric_the_dashboard_and_the_rules_use_is_served_once_each_door_was_driven(deployment):
    running, page_port = deployment
    _, key = ApiKey.issue("operator")
    with receiver() as hook:
        running.env["SIFT_FETCH_ALLOW_PORTS"] = f"{page_port},{hook.server_address[1]}"
        running.start_cluster()
        running.start_webhooks()
        running.start_procfile_web()
        running.start_mcp()
        drive_every_door(running, key, f"http://127.0.0.1:{page_port}/tides", hook, ("rest-1", "mcp-1"))

    status, body, _ = running.request("/metrics")
    assert status == 200
    samples = [
        sample for family in text_string_to_metric_families(body.decode()) for sample in family.samples
    ]
    served = {sample.name for sample in samples}
    doors = {sample.labels["door"] for sample in samples if sample.name == "sift_requests_total"}
    assert doors == {"rest", "mcp"}
    wanted = metric_names()
    assert {"sift_requests_total", "sift_cluster_heartbeat_age_seconds", "sift_cache_bytes"} <= wanted
    assert sorted(wanted - served) == []
