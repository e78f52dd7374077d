"""A submit's ``callback_url`` check holds no request thread for long (doors/callbacks.py).

The guard looks the callback's host up; a resolver that never answers is played by
``tests.upstream``'s hanging resolver (names under ``hang.test``): in this process through
``guard.resolve``, in the Procfile's gunicorn and mcp processes through ``SIFT_TEST_RESOLVE_FUNC``.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import Message
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from batch.errors import Refused
from batch.models import BatchJob
from doors.callbacks import LOOKUPS_IN_ALL
from doors.direct import FETCHES
from doors.mcp import tools
from fetch import guard

from .deployment import Deployment, wait_for
from .factories import LOOPBACK, SCRIPTED_BASE, ApiClient
from .upstream import HANG_SECONDS, hangs, resolver_for

HANGING_HOOK = "http://hooks.hang.test/sift"
LOOPBACK_HOOK = "http://127.0.0.1:9/hook"
HANGING = {"targets": [SCRIPTED_BASE], "callback_url": HANGING_HOOK}
FINE = {"targets": [SCRIPTED_BASE], "callback_url": LOOPBACK_HOOK}

# The processes a test starts: callbacks under hang.test never resolve (the resolver gives up after
# HANG_SECONDS, 15 s), and a submit waits 5 s for a lookup.
SLOW_DNS = {
    "SIFT_TEST_RESOLVE_FUNC": "tests.upstream.hanging_resolve",
    "SIFT_WEBHOOK_RESOLVE_TIMEOUT": "5s",
    "SIFT_FETCH_ALLOW_CIDRS": "127.0.0.0/8",
}
NOT_IN_TIME = "the host name did not resolve within 5s"
# Generous margins: a submit answers within its 5 s deadline and this, well before the resolver's
# 15 s; a request that waits on no lookup answers within PROMPT, where before it waited for one.
MARGIN = 5
PROMPT = 4


@pytest.fixture
def stuck_resolver(monkeypatch: pytest.MonkeyPatch, settings: Any) -> Iterator[threading.Event]:
    """Names under ``hang.test`` resolve to nothing, after ``HANG_SECONDS`` or once the event is set;
    the test's lookups have all ended when it is over, so none holds a share into the next test."""
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    gives_up = threading.Event()

    def resolve(host: str, port: int) -> list[str]:
        if hangs(host):
            gives_up.wait(HANG_SECONDS)
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return resolver_for({})(host, port)

    monkeypatch.setattr(guard, "resolve", resolve)
    yield gives_up
    gives_up.set()
    for thread in threading.enumerate():
        if thread.name == "callback":
            thread.join(HANG_SECONDS)


def _timed_submit(client: ApiClient, body: dict[str, Any]) -> tuple[float, Any]:
    started = time.monotonic()
    response = client.post("/v1/batch", body)
    return time.monotonic() - started, response


# --- one process -----------------------------------------------------------------------------


def test_a_callback_whose_host_does_not_resolve_in_time_is_a_400_naming_the_field(
    agent, settings, stuck_resolver
):
    settings.SIFT_WEBHOOK_RESOLVE_TIMEOUT = 1.0
    _, client = agent
    seconds, response = _timed_submit(client, HANGING)
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid_request"
    assert body["error"] == "callback_url: the host name did not resolve within 1s"
    assert body["details"] == [
        {"field": "callback_url", "message": "the host name did not resolve within 1s"}
    ]
    assert body["hint"].startswith("The callback URL must pass the same checks as a fetch. Check the host")
    assert seconds < 1 + MARGIN
    assert not BatchJob.objects.exists()


def test_a_callback_that_resolves_nowhere_or_to_a_refused_address_is_still_its_400(
    agent, settings, monkeypatch
):
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    monkeypatch.setattr(guard, "resolve", resolver_for({"nowhere.test": [], "inside.test": ["10.0.0.7"]}))
    _, client = agent
    for host, reason in (
        ("nowhere.test", "the host name could not be resolved"),
        ("inside.test", "the address is private"),
    ):
        response = client.post("/v1/batch", {**HANGING, "callback_url": f"http://{host}/hook"})
        assert response.status_code == 400
        assert response.json()["error"] == f"callback_url: {reason}"
    assert client.post("/v1/batch", FINE).status_code == 202


def test_a_lookup_that_outlives_its_request_keeps_the_callers_share_until_the_resolver_gives_up(
    make_caller, settings, stuck_resolver
):
    settings.SIFT_WEBHOOK_RESOLVE_TIMEOUT = 0.5
    settings.SIFT_FETCH_PER_CALLER = 1
    _, hasty = make_caller("hasty")
    _, other = make_caller("other")
    assert hasty.post("/v1/batch", HANGING).status_code == 400
    busy = hasty.post("/v1/batch", FINE)  # its one share is still looking the first host up
    assert busy.status_code == 429
    assert busy.json()["code"] == "caller_busy"
    assert busy.headers["Retry-After"] == "2"
    assert hasty.get("/v1/fetch", url="http://127.0.0.2/", mode="raw").json()["code"] == "busy"
    assert other.post("/v1/batch", FINE).status_code == 202
    stuck_resolver.set()  # the resolver gives up: the share comes back
    wait_for(lambda: hasty.post("/v1/batch", FINE).status_code == 202, what="the share to come back")


def test_a_caller_with_every_fetch_share_taken_is_refused_busy_and_may_submit_without_a_callback(
    agent, settings, stuck_resolver
):
    caller, client = agent
    with FETCHES.share(caller.pk), FETCHES.share(caller.pk), FETCHES.share(caller.pk):
        refused = client.post("/v1/batch", FINE)
        with pytest.raises(Refused) as by_mcp:
            tools.batch_submit(caller, FINE)
        without = client.post("/v1/batch", {"targets": [SCRIPTED_BASE]})
    assert (refused.status_code, refused.json()["code"], refused.headers["Retry-After"]) == (
        429,
        "caller_busy",
        "2",
    )
    assert (by_mcp.value.code, by_mcp.value.retry_after) == ("caller_busy", 2)
    assert without.status_code == 202


def test_lookups_outstanding_in_a_process_are_bounded_whoever_started_them(
    make_caller, settings, stuck_resolver
):
    settings.SIFT_WEBHOOK_RESOLVE_TIMEOUT = 0.2
    per_caller = settings.SIFT_FETCH_PER_CALLER
    clients = [make_caller(f"caller{n}")[1] for n in range(LOOKUPS_IN_ALL // per_caller + 1)]
    statuses = [
        client.post("/v1/batch", HANGING).status_code for client in clients for _ in range(per_caller)
    ]
    assert statuses[:LOOKUPS_IN_ALL] == [400] * LOOKUPS_IN_ALL
    assert set(statuses[LOOKUPS_IN_ALL:]) == {503}
    refused = clients[-1].post("/v1/batch", FINE)
    assert (refused.json()["code"], refused.headers["Retry-After"]) == ("jobs_busy", "5")
    assert clients[0].post("/v1/batch", {"targets": [SCRIPTED_BASE]}).status_code == 202
    stuck_resolver.set()
    wait_for(lambda: clients[-1].post("/v1/batch", FINE).status_code == 202, what="the lookups to end")


# --- the Procfile's processes ------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any]
    headers: Message  # names looked up regardless of case
    seconds: float


def _request(deployment: Deployment, path: str, key: str | None = None, body: Any = None) -> Answer:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{deployment.port}{path}", data=data)
    request.add_header("Content-Type", "application/json")
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            status, raw, headers = response.status, response.read(), response.headers
    except urllib.error.HTTPError as error:
        status, raw, headers = error.code, error.read(), error.headers
    return Answer(status, json.loads(raw), headers, time.monotonic() - started)


@pytest.mark.django_db(transaction=True)
def test_twenty_submits_whose_callback_never_resolves_leave_healthz_and_another_caller_answering(
    tmp_path, make_caller
):
    hasty_key = make_caller("hasty")[1].raw_key
    other_key = make_caller("other")[1].raw_key
    deployment = Deployment(tmp_path, SLOW_DNS)
    deployment.start_procfile_web()
    answers: list[Answer] = []
    probes: list[Answer] = []
    submitting = [
        threading.Thread(target=lambda: answers.append(_request(deployment, "/v1/batch", hasty_key, HANGING)))
        for _ in range(20)
    ]
    try:
        for thread in submitting:
            thread.start()
        time.sleep(1)  # every submit has reached gunicorn
        for _ in range(4):
            probes.append(_request(deployment, "/healthz"))
            probes.append(_request(deployment, "/v1/batch", other_key, FINE))
            time.sleep(0.5)
        in_flight_while_probing = 20 - len(answers)
        for thread in submitting:
            thread.join()
    finally:
        deployment.stop_all()
    assert max(p.seconds for p in probes) < PROMPT, [round(p.seconds, 2) for p in probes]
    assert [p.status for p in probes] == [200, 202] + [200] * 6  # the other submits reuse the job
    assert in_flight_while_probing >= 1
    # At most 3 lookups per caller in each of the 2 processes; the other submits are refused at once.
    not_in_time = [a for a in answers if a.status == 400]
    busy = [a for a in answers if a.status == 429]
    assert len(not_in_time) + len(busy) == 20
    assert 1 <= len(not_in_time) <= 6
    assert {a.body["error"] for a in not_in_time} == {f"callback_url: {NOT_IN_TIME}"}
    assert {(a.body["code"], a.headers["Retry-After"]) for a in busy} == {("caller_busy", "2")}
    assert max(a.seconds for a in answers) < 5 + MARGIN, [round(a.seconds, 2) for a in answers]


@dataclass(frozen=True)
class ToolAnswer:
    body: dict[str, Any]
    error: bool
    seconds: float


async def _timed_call(client: Client, arguments: dict[str, Any]) -> ToolAnswer:
    started = time.monotonic()
    result = await client.call_tool("batch_submit", arguments)
    body = result.structured_content or {}
    return ToolAnswer(body, bool(result.is_error), time.monotonic() - started)


def _mcp_client(url: str, http: httpx2.AsyncClient) -> Client:
    return Client(streamable_http_client(url, http_client=http))


def _http(key: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(30, read=120)
    )


@pytest.mark.mcp
@pytest.mark.django_db(transaction=True)
def test_twenty_mcp_submits_whose_callback_never_resolves_leave_another_caller_answering(
    tmp_path, make_caller
):
    hasty_key = make_caller("hasty")[1].raw_key
    other_key = make_caller("other")[1].raw_key
    # The lookups' bound is what is tested, not the mcp process's own (tests/test_mcp_bounds.py).
    deployment = Deployment(tmp_path, {**SLOW_DNS, "SIFT_MCP_PER_CALLER": "32"})
    answers: list[ToolAnswer] = []
    probes: list[ToolAnswer] = []

    async def main(url: str) -> int:
        async with (
            _http(hasty_key) as hasty_http,
            _http(other_key) as other_http,
            _mcp_client(url, hasty_http) as hasty,
            _mcp_client(url, other_http) as other,
        ):

            async def submit_hanging() -> None:
                answers.append(await _timed_call(hasty, HANGING))

            async with anyio.create_task_group() as group:
                for _ in range(20):
                    group.start_soon(submit_hanging)
                await anyio.sleep(1)  # every call has reached the mcp process
                for _ in range(4):
                    probes.append(await _timed_call(other, FINE))
                    await anyio.sleep(0.5)
                in_flight_while_probing = 20 - len(answers)
        return in_flight_while_probing

    try:
        in_flight_while_probing = anyio.run(main, deployment.start_mcp())
    finally:
        deployment.stop_all()
    assert max(p.seconds for p in probes) < PROMPT, [round(p.seconds, 2) for p in probes]
    assert [p.error for p in probes] == [False] * 4, [p.body for p in probes]
    assert in_flight_while_probing >= 1
    # One mcp process: at most 3 of the caller's lookups at once; the other calls are refused at once.
    not_in_time = [a for a in answers if a.body["code"] == "invalid_request"]
    busy = [a for a in answers if a.body["code"] == "caller_busy"]
    assert all(a.error for a in answers)
    assert len(not_in_time) + len(busy) == 20
    assert 1 <= len(not_in_time) <= 3
    assert {a.body["error"] for a in not_in_time} == {f"callback_url: {NOT_IN_TIME}"}
    assert max(a.seconds for a in answers) < 5 + MARGIN, [round(a.seconds, 2) for a in answers]
