"""Webhooks when a job finishes (docs/webhooks.md): callback_url at submit, signing, delivery,
retries, the secret shown once and rotated, events of other types, the metrics. Real HTTP to a
receiver on loopback; ``deliver_webhooks``' loop runs in the test's thread, each attempt made there
too (``tests/test_webhooks_cluster.py`` runs the Procfile's line beside a real cluster)."""

from __future__ import annotations

import ipaddress
import json
import socket
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import lxml.html
import pytest
import time_machine
from django.conf import settings as django_settings
from django.contrib.admin.models import LogEntry
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from standardwebhooks import Webhook, WebhookVerificationError

from batch.engine import worker
from batch.management.commands.deliver_webhooks import Command as DeliverWebhooks
from batch.models import ApiKey, BatchJob, WebhookAttempt, WebhookDelivery
from batch.webhooks import delivery, events

from . import fetchers
from .factories import LOOPBACK, SCRIPTED_BASE, ApiClient, MakeCaller
from .receiver import receiver

KEYS_URL = reverse("admin:batch_apikey_changelist")
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def loopback_allowed(tmp_path, monkeypatch, settings):
    monkeypatch.setenv("SIFT_TEST_FETCH_DIR", str(tmp_path))
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    settings.SIFT_BATCH_JOBS_PER_CALLER = 10
    settings.SIFT_WEBHOOK_RETRY_WAIT = 0.2
    settings.SIFT_WEBHOOK_RETRY_FOR = 3600


def _submit(client: ApiClient, callback_url: str | None, *queries: str) -> dict[str, Any]:
    targets = [f"{SCRIPTED_BASE}{i}?{q}" for i, q in enumerate(queries or ("a=1",))]
    response = client.post("/v1/batch", {"targets": targets, "callback_url": callback_url})
    assert response.status_code == 202, response.content
    body: dict[str, Any] = response.json()
    return body


def _run_targets() -> None:
    worker.drain(fetchers.scripted, budget=30)


def _deliver_until(condition: Callable[[], bool], timeout: float = 30) -> None:
    """Run ``deliver_webhooks``' loop here, its attempts in this thread, until ``condition``."""
    command = DeliverWebhooks()
    senders = delivery.Senders(django_settings.SIFT_WEBHOOK_SENDING, delivery.load_sender(), inline=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pause = command.deliver_round(senders)
        if condition():
            return
        time.sleep(max(pause, 0.01))
    raise AssertionError(f"timed out after {timeout}s delivering webhooks")


def _deliver_due() -> int:
    return delivery.deliver_due(delivery.load_sender())


def _verified(api_key: ApiKey, post: Any) -> dict[str, Any]:
    api_key.refresh_from_db()
    data: dict[str, Any] = Webhook(api_key.webhook_secret).verify(post.body, post.headers)
    return data


# --- submit ----------------------------------------------------------------------------------


def test_a_submit_stores_its_callback_url_and_the_job_shows_it_waiting(agent):
    _, client = agent
    with receiver() as hook:
        job = _submit(client, hook.url)
    assert job["callback_url"] == hook.url
    assert job["webhook"] == {
        "url": hook.url,
        "state": "waiting",
        "attempts": [],
        "next_attempt_at": None,
        "delivered_at": None,
    }
    assert BatchJob.objects.get(pk=job["id"]).callback_url == hook.url


def test_a_job_without_callback_url_has_none_and_never_gets_a_delivery(agent):
    _, client = agent
    job = _submit(client, None)
    assert (job["callback_url"], job["webhook"]) == (None, None)
    _run_targets()
    assert BatchJob.objects.get(pk=job["id"]).status == "done"
    assert not WebhookDelivery.objects.exists()


@pytest.mark.parametrize(
    ("callback_url", "reason"),
    [
        ("http://127.0.0.2:8080/hook", "the address is loopback"),
        ("http://[::1]:8080/hook", "the address is loopback"),
        ("http://10.1.2.3/hook", "the address is private"),
        ("ftp://127.0.0.1/hook", "the scheme 'ftp' is not allowed"),
        ("http://user:pw@127.0.0.1:8080/hook", "the URL carries credentials"),
        ("http://169.254.169.254/latest", "the address is link-local"),
    ],
)
def test_a_callback_the_guard_refuses_is_a_400_naming_the_field_and_nothing_is_stored(
    agent, settings, callback_url, reason
):
    _, client = agent
    settings.SIFT_FETCH_ALLOW_CIDRS = (ipaddress.ip_network("127.0.0.1/32"),)
    response = client.post("/v1/batch", {"targets": [f"{SCRIPTED_BASE}0"], "callback_url": callback_url})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_request"
    assert body["error"].startswith("callback_url: ")
    assert reason in body["error"]
    assert body["hint"].startswith("The callback URL must pass the same checks as a fetch.")
    assert body["details"] == [
        {"field": "callback_url", "message": body["error"].removeprefix("callback_url: ")}
    ]
    assert not BatchJob.objects.exists()


def test_a_callback_url_that_is_not_a_string_or_too_long_is_a_400(agent):
    _, client = agent
    for bad in (42, ["http://127.0.0.1/"], "http://127.0.0.1/" + "a" * 2048):
        response = client.post("/v1/batch", {"targets": [f"{SCRIPTED_BASE}0"], "callback_url": bad})
        assert response.status_code == 400, bad
        assert response.json()["code"] == "invalid_request"
    assert not BatchJob.objects.exists()


def test_the_same_targets_with_another_callback_url_are_another_job(agent):
    _, client = agent
    with receiver() as first, receiver() as second:
        one = _submit(client, first.url)
        again = client.post("/v1/batch", {"targets": [f"{SCRIPTED_BASE}0?a=1"], "callback_url": first.url})
        other = _submit(client, second.url)
    assert (again.status_code, again.json()["id"], again.json()["reused"]) == (200, one["id"], True)
    assert other["id"] != one["id"]


# --- delivery --------------------------------------------------------------------------------


def test_a_finished_job_posts_its_summary_once_signed_with_the_callers_secret(agent):
    api_key, client = agent
    with receiver() as hook:
        job = _submit(client, hook.url, "a=1", "fail=timeout")
        _run_targets()
        _deliver_until(lambda: bool(hook.posts()))
        for _ in range(3):
            _deliver_due()
        posts = hook.posts()
    assert len(posts) == 1
    post = posts[0]
    assert post.path == "/hooks/sift"
    assert post.headers["Content-Type"] == "application/json"
    assert post.headers["webhook-id"] == f"msg_{job['id']}"
    event = _verified(api_key, post)
    assert (event["type"], set(event)) == ("batch.finished", {"type", "timestamp", "data"})
    data = event["data"]
    shown = client.get(f"/v1/batch/{job['id']}").json()
    for field in (
        "id", "caller", "caller_class", "status", "error", "targets_total", "targets_done",
        "targets_failed", "created_at", "finished_at", "n_bytes", "callback_url",
    ):  # fmt: skip
        assert data[field] == shown[field], field
    assert data["status"] == "partial"
    assert data["job_url"] == f"/v1/batch/{job['id']}"
    assert "targets" not in data
    assert "webhook" not in data
    assert shown["webhook"]["state"] == "delivered"
    assert [(a["status"], a["error"]) for a in shown["webhook"]["attempts"]] == [(200, None)]
    assert shown["webhook"]["delivered_at"] is not None
    assert shown["webhook"]["next_attempt_at"] is None


def test_a_signature_does_not_verify_with_another_secret_or_a_changed_body(agent, make_caller: MakeCaller):
    api_key, client = agent
    other, _ = make_caller("other")
    with receiver() as hook:
        _submit(client, hook.url)
        _run_targets()
        _deliver_until(lambda: bool(hook.posts()))
    post = hook.posts()[0]
    with pytest.raises(WebhookVerificationError):
        Webhook(other.webhook_secret).verify(post.body, post.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(api_key.webhook_secret).verify(post.body.replace(b"done", b"fail"), post.headers)


def test_a_receiver_answering_500_twice_then_200_gets_three_attempts_with_growing_gaps(agent):
    api_key, client = agent
    with receiver(script=(500, 500), then=200) as hook:
        job = _submit(client, hook.url)
        _run_targets()
        _deliver_until(lambda: len(hook.posts()) >= 3)
        time.sleep(0.5)
        _deliver_due()
        posts = hook.posts()
    assert len(posts) == 3
    assert len({p.headers["webhook-id"] for p in posts}) == 1
    assert len({p.body for p in posts}) == 1  # the same message on every attempt
    for post in posts:
        _verified(api_key, post)
    # Each wait is at least the backoff asked for: RETRY_WAIT, then twice it.
    assert posts[1].at - posts[0].at >= 0.2
    assert posts[2].at - posts[1].at >= 0.4
    shown = client.get(f"/v1/batch/{job['id']}").json()["webhook"]
    assert [a["status"] for a in shown["attempts"]] == [500, 500, 200]
    assert shown["state"] == "delivered"
    stored = list(WebhookAttempt.objects.filter(delivery__job_id=job["id"]).values_list("at", flat=True))
    assert (stored[1] - stored[0]).total_seconds() >= 0.2
    assert (stored[2] - stored[1]).total_seconds() >= 0.4


def test_backoff_doubles_from_retry_wait_and_the_last_try_falls_on_retry_for(settings):
    settings.SIFT_WEBHOOK_RETRY_WAIT = 5
    settings.SIFT_WEBHOOK_RETRY_FOR = 60
    now = T0 + timedelta(seconds=1)
    assert [delivery.next_attempt(T0, n, now) for n in (1, 2, 3, 4)] == [
        now + timedelta(seconds=5),
        now + timedelta(seconds=10),
        now + timedelta(seconds=20),
        now + timedelta(seconds=40),
    ]
    late = T0 + timedelta(seconds=50)
    assert delivery.next_attempt(T0, 5, late) == T0 + timedelta(seconds=60)
    assert delivery.next_attempt(T0, 6, T0 + timedelta(seconds=60)) is None
    assert delivery.next_attempt(T0, 60, now) == T0 + timedelta(seconds=60)  # no overflow


def test_a_receiver_that_never_answers_2xx_is_given_up_after_retry_for(agent, settings):
    settings.SIFT_WEBHOOK_RETRY_WAIT = 0.1
    settings.SIFT_WEBHOOK_RETRY_FOR = 2.0  # room for three attempts on a busy machine
    _, client = agent
    with receiver(then=503) as hook:
        job = _submit(client, hook.url)
        _run_targets()
        _deliver_until(
            lambda: WebhookDelivery.objects.filter(job_id=job["id"], gave_up_at__isnull=False).exists()
        )
        count = len(hook.posts())
    shown = client.get(f"/v1/batch/{job['id']}").json()["webhook"]
    assert shown["state"] == "failed"
    assert shown["next_attempt_at"] is None
    assert shown["delivered_at"] is None
    assert count == len(shown["attempts"]) >= 3
    assert {a["status"] for a in shown["attempts"]} == {503}


def test_a_receiver_that_is_down_is_recorded_with_the_network_error(agent, settings):
    settings.SIFT_WEBHOOK_RETRY_FOR = 0
    _, client = agent
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    job = _submit(client, f"http://127.0.0.1:{closed_port}/hook")
    _run_targets()
    _deliver_due()
    shown = client.get(f"/v1/batch/{job['id']}").json()["webhook"]
    assert shown["state"] == "failed"
    assert [(a["status"], a["error"]) for a in shown["attempts"]] == [
        (None, "the connection to the site was refused or failed")
    ]


def test_every_attempt_passes_the_guard_again(agent, settings):
    settings.SIFT_WEBHOOK_RETRY_FOR = 0
    _, client = agent
    with receiver() as hook:
        job = _submit(client, hook.url)
        _run_targets()
        settings.SIFT_FETCH_ALLOW_CIDRS = (ipaddress.ip_network("10.0.0.0/8"),)
        _deliver_due()
        assert hook.posts() == []
    attempts = client.get(f"/v1/batch/{job['id']}").json()["webhook"]["attempts"]
    assert [(a["status"], a["error"]) for a in attempts] == [
        (None, "refused to fetch: the address is loopback")
    ]


def test_a_redirect_is_not_followed_and_counts_as_a_failed_attempt(agent, settings):
    settings.SIFT_WEBHOOK_RETRY_FOR = 0
    _, client = agent
    with receiver(then=307) as hook:
        job = _submit(client, hook.url)
        _run_targets()
        _deliver_due()
        assert len(hook.posts()) == 1
    attempts = client.get(f"/v1/batch/{job['id']}").json()["webhook"]["attempts"]
    assert [a["status"] for a in attempts] == [307]


def test_cancelling_a_job_over_the_api_sends_its_webhook(agent):
    api_key, client = agent
    with receiver() as hook:
        job = _submit(client, hook.url, "a=1", "b=1")
        assert client.delete(f"/v1/batch/{job['id']}").status_code == 200
        _deliver_until(lambda: bool(hook.posts()))
    data = _verified(api_key, hook.posts()[0])["data"]
    assert (data["id"], data["status"], data["targets_done"]) == (job["id"], "cancelled", 0)
    assert data["finished_at"] is not None


def test_a_job_finishes_once_so_its_webhook_is_made_once(agent):
    _, client = agent
    with receiver() as hook:
        job = _submit(client, hook.url)
        _run_targets()
        assert not events.job_finished(job["id"])  # a second finish of the same job
    assert WebhookDelivery.objects.filter(job_id=job["id"]).count() == 1


def test_two_delivery_threads_never_claim_one_attempt(agent):
    _, client = agent
    with receiver() as hook:
        _submit(client, hook.url)
        _run_targets()
    first = delivery.claim_due()
    assert first is not None
    assert delivery.claim_due() is None
    # Its lease ran out (the thread died): another thread may try again.
    assert delivery.claim_due(first.claimed_until + timedelta(seconds=1)) is not None


# --- sharing the senders (tests/test_webhooks_cluster.py sends through them for real) --------


def _finished_jobs(client: ApiClient, count: int, host: str = "127.0.0.1") -> set[str]:
    """``count`` jobs finished by a cancel, their webhooks due now, posting to ``host``."""
    ids = set()
    for n in range(count):
        job = _submit(client, f"http://{host}:8080/hook", f"n={n}")
        assert client.delete(f"/v1/batch/{job['id']}").status_code == 200
        ids.add(job["id"])
    return ids


def _claims(count: int) -> list[str | None]:
    """The job ids of ``count`` claims in a row, none finished meanwhile; ``None`` for none."""
    return [_job_of(claimed) if (claimed := delivery.claim_due()) else None for _ in range(count)]


def _job_of(claimed: delivery.Claimed) -> str | None:
    return WebhookDelivery.objects.get(pk=claimed.delivery_id).job_id


def test_a_caller_with_its_share_in_flight_waits_and_the_one_with_fewest_in_flight_goes_first(
    make_caller: MakeCaller, settings
):
    settings.SIFT_WEBHOOK_PER_CALLER = 2
    _, stalling = make_caller("stalling")
    _, other = make_caller("other")
    stalled = _finished_jobs(stalling, 5)  # due first
    (later,) = _finished_jobs(other, 1)
    first, second, third, none = _claims(4)
    assert (first in stalled, second, third in stalled, none) == (True, later, True, None)


def test_a_receiving_host_with_its_share_in_flight_waits_whoever_the_caller(
    make_caller: MakeCaller, settings
):
    settings.SIFT_WEBHOOK_PER_CALLER = 5
    settings.SIFT_WEBHOOK_PER_HOST = 2
    _, one = make_caller("one")
    _, two = make_caller("two")
    _, elsewhere = make_caller("elsewhere")
    down = _finished_jobs(one, 3) | _finished_jobs(two, 3)
    (up,) = _finished_jobs(elsewhere, 1, host="127.0.0.2")
    first, second, third, none = _claims(4)
    assert (first in down, second, third in down, none) == (True, up, True, None)


def test_no_more_attempts_are_in_flight_than_sending_in_all(make_caller: MakeCaller, settings):
    settings.SIFT_WEBHOOK_SENDING = 3
    for n in range(4):
        _finished_jobs(make_caller(f"caller{n}")[1], 1, host=f"127.0.0.{n + 1}")
    assert [claimed is not None for claimed in _claims(4)] == [True, True, True, False]
    assert WebhookDelivery.objects.filter(sending_until__isnull=False).count() == 3


def test_a_finished_attempt_gives_its_share_back(agent, settings):
    settings.SIFT_WEBHOOK_PER_CALLER = 1
    settings.SIFT_WEBHOOK_RETRY_FOR = 0
    _, client = agent
    _finished_jobs(client, 2)
    claimed = delivery.claim_due()
    assert claimed is not None
    assert delivery.claim_due() is None
    delivery.record(claimed, delivery.Answer(status=503), timezone.now())
    assert delivery.claim_due() is not None


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("round_", range(3))
def test_claims_at_once_from_many_threads_take_exactly_the_callers_share(agent, settings, round_):
    settings.SIFT_WEBHOOK_PER_CALLER = 2
    _, client = agent
    _finished_jobs(client, 10)
    barrier = threading.Barrier(16)
    claimed: list[str] = []

    def claim() -> None:
        try:
            barrier.wait()
            if (got := delivery.claim_due()) is not None:
                claimed.append(got.event_id)
        finally:
            connection.close()

    threads = [threading.Thread(target=claim) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(claimed) == len(set(claimed)) == 2
    assert WebhookDelivery.objects.filter(sending_until__isnull=False).count() == 2


# --- the secret ------------------------------------------------------------------------------


def test_every_key_gets_its_own_whsec_secret(make_caller: MakeCaller):
    one, _ = make_caller("one")
    two, _ = make_caller("two")
    assert one.webhook_secret.startswith("whsec_")
    assert two.webhook_secret.startswith("whsec_")
    assert one.webhook_secret != two.webhook_secret
    assert len(Webhook(one.webhook_secret)._whsecret) == 32


def test_create_api_key_shows_the_secret_once_beside_the_key(db):
    out, err = StringIO(), StringIO()
    call_command("create_api_key", "hooked", stdout=out, stderr=err)
    api_key = ApiKey.objects.get(name="hooked")
    assert out.getvalue().strip().startswith("sk_")  # the key alone on stdout, as scripts expect
    assert err.getvalue().strip().endswith(api_key.webhook_secret)
    out = StringIO()
    call_command("create_api_key", "scripted", "--json", stdout=out)
    shown = json.loads(out.getvalue())
    assert shown["webhook_secret"] == ApiKey.objects.get(name="scripted").webhook_secret
    assert shown["key"].startswith("sk_")
    assert shown["name"] == "scripted"


def test_the_admin_shows_the_secret_on_the_creation_page_and_nowhere_after(admin_client: Client):
    response = admin_client.post(
        reverse("admin:batch_apikey_add"), {"name": "new-agent", "workspace": "", "caller_class": "fleet"}
    )
    assert response.status_code == 200
    secret = lxml.html.fromstring(response.content).xpath('//input[@id="webhook-secret"]/@value')[0]
    api_key = ApiKey.objects.get(name="new-agent")
    assert secret == api_key.webhook_secret
    for page in (KEYS_URL, reverse("admin:batch_apikey_change", args=[api_key.pk])):
        assert secret.encode() not in admin_client.get(page).content
    assert secret not in "".join(LogEntry.objects.values_list("change_message", flat=True))


def _rotate(admin_client: Client, *keys: ApiKey, confirm: bool = True) -> Any:
    data = {"action": "rotate_webhook_secrets", "_selected_action": [k.pk for k in keys]}
    if confirm:
        data["post"] = "yes"
    return admin_client.post(KEYS_URL, data)


def test_rotating_in_the_admin_asks_first_then_shows_the_new_secret_once(
    admin_client: Client, make_caller: MakeCaller
):
    api_key, _ = make_caller("rotated")
    old = api_key.webhook_secret
    asked = _rotate(admin_client, api_key, confirm=False)
    assert asked.status_code == 200
    assert b"Yes, rotate 1 secret" in asked.content
    api_key.refresh_from_db()
    assert api_key.webhook_secret == old

    done = _rotate(admin_client, api_key)
    assert done.status_code == 200
    assert "no-store" in done["Cache-Control"]
    shown = lxml.html.fromstring(done.content).xpath('//input[@data-key="rotated"]/@value')
    api_key.refresh_from_db()
    assert shown == [api_key.webhook_secret]
    assert api_key.webhook_secret != old
    assert LogEntry.objects.filter(
        object_id=str(api_key.pk), change_message="Rotated the webhook secret."
    ).exists()
    for page in (KEYS_URL, reverse("admin:batch_apikey_change", args=[api_key.pk])):
        assert api_key.webhook_secret.encode() not in admin_client.get(page).content


def test_rotation_changes_the_secret_that_signs_the_next_attempt(admin_client: Client, agent):
    api_key, client = agent
    old = api_key.webhook_secret
    with receiver(script=(500,), then=200) as hook:
        _submit(client, hook.url)
        _run_targets()
        _deliver_until(lambda: len(hook.posts()) == 1)
        _rotate(admin_client, api_key)
        _deliver_until(lambda: len(hook.posts()) == 2)
        first, second = hook.posts()
    api_key.refresh_from_db()
    Webhook(old).verify(first.body, first.headers)
    Webhook(api_key.webhook_secret).verify(second.body, second.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(old).verify(second.body, second.headers)


def test_setup_demo_prints_a_fresh_webhook_secret_each_time(db):
    shown = []
    for _ in range(2):
        out = StringIO()
        call_command("setup_demo", stdout=out)
        shown.append(out.getvalue().split("webhook secret: ")[1].split()[0])
    assert shown[0] != shown[1]
    assert ApiKey.objects.get(name="demo").webhook_secret == shown[1]


# --- the admin's job page --------------------------------------------------------------------


def test_the_job_page_shows_the_callback_its_delivery_and_each_attempt(admin_client: Client, agent):
    _, client = agent
    with receiver(script=(500,), then=204) as hook:
        job = _submit(client, hook.url)
        _run_targets()
        _deliver_until(lambda: len(hook.posts()) == 2)
    page = admin_client.get(reverse("admin:batch_batchjob_change", args=[job["id"]]))
    assert page.status_code == 200
    tree = lxml.html.fromstring(page.content)
    attempts = [
        [td.text_content().strip() for td in row] for row in tree.xpath('//tr[@class="webhook-attempt"]')
    ]
    assert [status for _, status, _ in attempts] == ["500", "204"]
    assert (
        tree.xpath('//td[contains(@class, "field-event_id")]')[0].text_content().strip() == f"msg_{job['id']}"
    )
    assert tree.xpath('//td[contains(@class, "field-state")]')[0].text_content().strip() == "delivered"
    assert hook.url in page.content.decode()
    assert "delivered at" in page.content.decode()
    assert "2 attempt(s)" in page.content.decode()


# --- a delivery belongs to an event (docs/decisions.md, "A webhook belongs to an event") -----


def test_an_undelivered_webhook_outlives_its_deleted_job_and_is_still_delivered(agent):
    api_key, client = agent
    with receiver() as hook:
        job = _submit(client, hook.url)
        _run_targets()
        BatchJob.objects.filter(pk=job["id"]).delete()
        assert WebhookDelivery.objects.get(event_id=f"msg_{job['id']}").job_id is None
        _deliver_until(lambda: bool(hook.posts()))
    data = _verified(api_key, hook.posts()[0])["data"]
    assert (data["id"], data["status"]) == (job["id"], "done")
    assert delivery.delete_ended_without_job() == 2  # the delivery and its attempt
    assert not WebhookDelivery.objects.exists()
    assert not WebhookAttempt.objects.exists()


def test_a_delivered_webhook_is_kept_as_long_as_its_job(agent):
    _, client = agent
    with receiver() as hook:
        job = _submit(client, hook.url)
        _run_targets()
        _deliver_until(lambda: bool(hook.posts()))
    assert delivery.delete_ended_without_job() == 0
    assert WebhookDelivery.objects.filter(job_id=job["id"], delivered_at__isnull=False).exists()
    BatchJob.objects.filter(pk=job["id"]).delete()
    delivery.delete_ended_without_job()
    assert not WebhookDelivery.objects.exists()
    assert not WebhookAttempt.objects.exists()


def test_an_event_of_another_type_is_delivered_signed_without_any_job(agent):
    api_key, _ = agent
    data = {"monitor": "m1", "url": "https://example.org/", "changed_at": "2026-11-01T12:00:00Z"}
    with receiver() as hook:
        assert events.schedule_event(api_key, hook.url, "monitor.changed", data, event_id="msg_change1")
        assert not events.schedule_event(api_key, hook.url, "monitor.changed", data, event_id="msg_change1")
        _deliver_until(lambda: bool(hook.posts()))
    (post,) = hook.posts()
    assert post.headers["webhook-id"] == "msg_change1"
    event = _verified(api_key, post)
    assert (event["type"], event["data"]) == ("monitor.changed", data)
    row = WebhookDelivery.objects.get(event_id="msg_change1")
    assert (row.job_id, row.state, row.attempt_count) == (None, "delivered", 1)


def test_an_event_without_an_id_of_its_own_gets_a_fresh_one(agent):
    api_key, _ = agent
    for _ in range(2):
        assert events.schedule_event(api_key, "http://127.0.0.1:8080/hook", "monitor.changed", {})
    ids = list(WebhookDelivery.objects.values_list("event_id", flat=True))
    assert len(set(ids)) == 2
    assert all(event_id.startswith("msg_") for event_id in ids)


# --- metrics (docs/metrics.md) ---------------------------------------------------------------


def _samples(client: Client) -> dict[str, float]:
    text = client.get("/metrics").content.decode()
    return {
        name: float(value)
        for name, value in (
            line.rsplit(" ", 1) for line in text.splitlines() if line.startswith("sift_webhook")
        )
    }


FINISHED = '{event_type="batch.finished"}'


def test_metrics_count_deliveries_failures_retries_and_deliveries_given_up(agent, client: Client, settings):
    settings.SIFT_METRICS_TOKEN = ""
    _, api = agent
    before = _samples(client)
    with receiver(script=(500,), then=200) as flaky, receiver(then=503) as down:
        _submit(api, flaky.url, "a=1")
        _run_targets()
        _deliver_until(lambda: len(flaky.posts()) == 2)
        settings.SIFT_WEBHOOK_RETRY_FOR = 0
        _submit(api, down.url, "b=1")
        _run_targets()
        _deliver_due()
    after = _samples(client)
    counted = {
        name: after.get(f"sift_webhook_{name}_total{FINISHED}", 0)
        - before.get(f"sift_webhook_{name}_total{FINISHED}", 0)
        for name in ("deliveries", "failures", "retries", "given_up")
    }
    assert counted == {"deliveries": 1, "failures": 2, "retries": 1, "given_up": 1}


def test_metrics_show_the_backlog_due_in_flight_and_undelivered(
    make_caller: MakeCaller, client: Client, settings
):
    settings.SIFT_METRICS_TOKEN = ""
    _, one = make_caller("one")
    assert _samples(client)["sift_webhook_oldest_due_seconds"] == 0  # nothing due
    _finished_jobs(one, 3)
    assert delivery.claim_due() is not None
    # Half a minute on: the claim's lease still runs, the other two have waited that long.
    with time_machine.travel(timezone.now() + timedelta(seconds=30), tick=False):
        samples = _samples(client)
    assert samples["sift_webhook_due"] == 2
    assert samples["sift_webhook_sending"] == 1
    assert samples["sift_webhook_undelivered"] == 3
    assert samples["sift_webhook_oldest_due_seconds"] >= 30
