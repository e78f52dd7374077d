"""Log lines (docs/operations.md, "Logs"): a quiet service writes nothing at the default level, and
``LOG_FORMAT=json`` makes every line of every process one JSON object naming the request, or the
job and target, it concerns."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import subprocess
import sys
import time
from collections.abc import Iterator, MutableMapping
from typing import Any

import pytest
from django.utils import timezone
from django_q.models import Schedule, Success
from prometheus_client import REGISTRY

from batch.models import ApiKey, ClusterHeartbeat
from doors.edge import RequestEdge
from fetch.render import renderer
from sift_site.access_log import ProbesAtDebug
from sift_site.log_lines import REQUEST_ID, JsonLines, concerning, request_id_from

from .deployment import ROOT, Deployment, wait_for
from .receiver import receiver
from .traffic import drive_every_door, post
from .upstream import ARTICLE, page_upstream

PROCESSES = ("cluster", "webhooks", "web", "mcp", "render")
NEW_ID = re.compile(r"[0-9a-f]{32}")


def record(
    message: str, *args: Any, level: int = logging.INFO, name: str = "batch.engine.worker"
) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, message, args, None)


# --- the JSON line ---------------------------------------------------------------------------


def test_a_json_line_is_one_object_with_time_level_logger_message_and_what_it_concerns():
    token = REQUEST_ID.set("req-7")
    try:
        with concerning(job="7f3a", target=2):
            line = JsonLines().format(record("job %s target %d done\nsecond line", "7f3a", 2))
    finally:
        REQUEST_ID.reset(token)
    assert "\n" not in line
    parsed = json.loads(line)
    assert parsed["level"] == "INFO"
    assert parsed["logger"] == "batch.engine.worker"
    assert parsed["message"] == "job 7f3a target 2 done\nsecond line"
    assert (parsed["request_id"], parsed["job"], parsed["target"]) == ("req-7", "7f3a", 2)
    assert parsed["time"].endswith("+00:00")


def test_a_json_line_carries_its_traceback_as_a_field_and_outside_a_request_no_request_id():
    try:
        raise ValueError("broken")
    except ValueError:
        failed = logging.LogRecord("x", logging.ERROR, __file__, 1, "it failed", None, sys.exc_info())
    parsed = json.loads(JsonLines().format(failed))
    assert "ValueError: broken" in parsed["exception"]
    assert "request_id" not in parsed
    assert "job" not in parsed


@pytest.mark.parametrize("given", ["abc-123", "0f6b1c2e-6b8a-4a8e-9a43-07d1d3a1f7c2", "trace:span/1+2=3@x"])
def test_a_well_formed_request_id_is_kept(given):
    assert request_id_from(given) == given


@pytest.mark.parametrize("given", [None, "", "has spaces", "x" * 129, "two\nlines", 'quote"d', "ünï"])
def test_any_other_request_id_is_replaced_by_a_new_one(given):
    made = request_id_from(given)
    assert NEW_ID.fullmatch(made)
    assert made != request_id_from(given)


def test_the_edge_sends_the_request_id_back_and_counts_the_door():
    seen: list[str | None] = []
    sent: list[MutableMapping[str, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(REQUEST_ID.get())
        await send({"type": "http.response.start", "status": 429, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    def serve(path: str, headers: list[tuple[bytes, bytes]]) -> None:
        scope = {"type": "http", "path": path, "headers": headers}
        asyncio.run(RequestEdge(app)(scope, lambda: None, send))

    before = REGISTRY.get_sample_value("sift_requests_total", {"door": "rest", "code": "429"}) or 0
    serve("/v1/fetch", [(b"x-request-id", b"agent-42")])
    serve("/mcp", [(b"x-request-id", b"bad id")])
    serve("/healthz", [])
    assert seen[0] == "agent-42"
    assert NEW_ID.fullmatch(seen[1] or "")
    answered = [
        dict(message["headers"])[b"x-request-id"].decode() for message in sent if "headers" in message
    ]
    assert answered == seen
    assert REGISTRY.get_sample_value("sift_requests_total", {"door": "rest", "code": "429"}) == before + 1
    assert REGISTRY.get_sample_value("sift_requests_total", {"door": "mcp", "code": "429"}) >= 1
    assert REQUEST_ID.get() is None


@pytest.mark.parametrize("path", ["/metrics", "/healthz", "/healthz?x=1"])
def test_scrapes_and_health_checks_are_debug_lines(path):
    probes = ProbesAtDebug()
    root = logging.getLogger()
    level = root.level
    try:
        root.setLevel(logging.INFO)
        line = record(
            '%s - "%s %s HTTP/%s" %d', "127.0.0.1:5", "GET", path, "1.1", 200, name="uvicorn.access"
        )
        assert not probes.filter(line)
        root.setLevel(logging.DEBUG)
        assert probes.filter(line)
        assert line.levelname == "DEBUG"
    finally:
        root.setLevel(level)
    other = record(
        '%s - "%s %s HTTP/%s" %d', "127.0.0.1:5", "GET", "/v1/batch", "1.1", 200, name="uvicorn.access"
    )
    assert probes.filter(other)
    assert other.levelname == "INFO"


def test_a_log_format_other_than_text_or_json_stops_start_up():
    done = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "LOG_FORMAT": "xml"},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode != 0
    assert "LOG_FORMAT='xml' is not valid: expected one of text, json" in done.stderr


def parsed(line: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except ValueError:
        return {"not_json": line}
    return value if isinstance(value, dict) else {"not_json": line}


# --- whole deployments -----------------------------------------------------------------------


@pytest.fixture
def deployment(django_db_blocker, tmp_path) -> Iterator[Deployment]:
    with django_db_blocker.unblock():
        running = Deployment(tmp_path, {})
    try:
        yield running
    finally:
        running.stop_all()


def start_everything(deployment: Deployment) -> None:
    deployment.start_cluster()
    deployment.start_webhooks()
    deployment.start_procfile_web()
    deployment.start_mcp()
    if renderer.available():
        deployment.start_render_line()
    else:  # without Chromium the line only waits, never listening
        deployment.start_procfile("render")
    wait_for(ClusterHeartbeat.objects.exists, 60, "the cluster's heartbeat")


def sizes(deployment: Deployment) -> dict[str, int]:
    return {name: len(deployment.log(name)) for name in PROCESSES}


def settled(deployment: Deployment, quiet_for: float = 3.0) -> dict[str, int]:
    """The logs' sizes once none has grown for ``quiet_for`` seconds (the start-up lines written)."""
    last, since = sizes(deployment), time.monotonic()
    while time.monotonic() - since < quiet_for:
        time.sleep(0.5)
        now = sizes(deployment)
        if now != last:
            last, since = now, time.monotonic()
    return last


@pytest.mark.django_db(transaction=True)
def test_a_service_with_no_work_writes_no_line_at_the_default_level(deployment):
    start_everything(deployment)
    before = settled(deployment)
    # Every schedule due now, run by the cluster as it would be every minute; scrapes and health
    # checks as a monitoring system sends them.
    mark = timezone.now()
    schedules = list(Schedule.objects.values_list("func", flat=True))
    assert len(schedules) >= 2
    Schedule.objects.update(next_run=mark)
    for _ in range(5):
        assert deployment.request("/metrics")[0] == 200
        assert deployment.request("/healthz")[0] == 200
    ran = lambda: all(Success.objects.filter(func=func, stopped__gte=mark).exists() for func in schedules)  # noqa: E731
    wait_for(ran, 120, "every schedule to run")
    time.sleep(2)  # anything they would log, written by now
    grown = {name: deployment.log(name)[size:] for name, size in before.items()}
    assert grown == dict.fromkeys(PROCESSES, "")


@pytest.mark.django_db(transaction=True)
def test_json_lines_come_from_every_process_and_name_the_request_or_the_job_and_target(deployment):
    with page_upstream(ARTICLE.encode(), "text/html; charset=utf-8") as page_port, receiver() as hook:
        deployment.env.update(
            LOG_FORMAT="json",
            LOG_LEVEL="debug",
            SIFT_FETCH_ALLOW_CIDRS="127.0.0.1/32",
            SIFT_FETCH_ALLOW_PORTS=f"{page_port},{hook.server_address[1]}",
        )
        start_everything(deployment)
        _, key = ApiKey.issue("operator")
        driven = drive_every_door(
            deployment, key, f"http://127.0.0.1:{page_port}/", hook, ("rest-1", "mcp-1")
        )
        _, replaced, _ = post(deployment.port, "/v1/batch", key, {"targets": []}, {"X-Request-ID": "not ok"})
    deployment.stop_all()

    assert (driven.rest_request_id, driven.mcp_request_id) == ("rest-1", "mcp-1")
    assert NEW_ID.fullmatch(replaced["X-Request-ID"])
    lines = {name: [parsed(line) for line in deployment.log(name).splitlines() if line] for name in PROCESSES}
    not_json = [
        f"{name}: {line['not_json']}" for name in PROCESSES for line in lines[name] if "not_json" in line
    ]
    assert not_json == [], "\n".join(not_json)
    for name, parsed_lines in lines.items():
        assert parsed_lines, f"no line from {name}"
        for line in parsed_lines:
            assert {"time", "level", "logger", "message", "pid"} <= line.keys(), (name, line)
    assert any(line.get("request_id") == "rest-1" for line in lines["web"])
    assert any(line.get("request_id") == replaced["X-Request-ID"] for line in lines["web"])
    assert any(line.get("request_id") == "mcp-1" for line in lines["mcp"])
    assert any((line.get("job"), line.get("target")) == (driven.job_id, 0) for line in lines["cluster"])
    assert any(line.get("webhook", "").startswith("msg_") for line in lines["webhooks"])
    assert any(line["logger"] == "fetch.sandbox.child" for line in lines["web"])
    if renderer.available():  # the render process's own lines, handed the format
        assert any(line["logger"] == "fetch.render.server" for line in lines["render"])
    else:  # the line only waits, and says so
        assert any("no Chromium" in line["message"] for line in lines["render"])
