"""The staff console (docs/admin.md): job list and pages, target pages, cancel and delete, API keys."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import lxml.html
import pytest
import time_machine
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission, User
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from batch.models import ApiKey, BatchJob, BatchTarget, hash_key

from .factories import MakeCaller, done_target, failed_target, make_job

JOBS_URL = reverse("admin:batch_batchjob_changelist")
KEYS_URL = reverse("admin:batch_apikey_changelist")
NOON = datetime(2026, 1, 1, 12, 30, tzinfo=UTC)


def list_rows(response: Any) -> dict[str, dict[str, str]]:
    """The changelist's rows as {first column: {field: text}}, in page order."""
    doc = lxml.html.fromstring(response.content)
    rows = {}
    for tr in doc.xpath('//table[@id="result_list"]/tbody/tr'):
        cells = {
            cls.removeprefix("field-"): cell.text_content().strip()
            for cell in tr.xpath("./th|./td")
            for cls in cell.get("class", "").split()
            if cls.startswith("field-")
        }
        rows[tr.xpath("./th")[0].text_content().strip()] = cells
    return rows


def action(name: str, *objects: Any, confirm: bool = False) -> dict[str, Any]:
    """The POST of the changelist's action form, or of the action's confirmation page."""
    data: dict[str, Any] = {"action": name, "_selected_action": [obj.pk for obj in objects]}
    data.update({"post": "yes"} if confirm else {"index": "0"})
    return data


def messages_of(response: Any) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


StaffClient = Callable[..., Client]


@pytest.fixture
def staff_client(db: None) -> StaffClient:
    """``staff_client("view_batchjob", "cancel_batchjob")``: a logged-in staff user with those permissions."""

    def login(*codenames: str) -> Client:
        user = User.objects.create_user("staff", password="unused-password", is_staff=True)
        user.user_permissions.add(
            *Permission.objects.filter(content_type__app_label="batch", codename__in=codenames)
        )
        client = Client()
        client.force_login(user)
        return client

    return login


@pytest.fixture(autouse=True)
def _one_day_ttl(settings: Any) -> None:
    settings.SIFT_BATCH_TTL = 24 * 3600


# --- job list --------------------------------------------------------------------------------


def test_job_list_shows_id_caller_class_status_progress_created_and_expires(
    admin_client: Client, make_caller: MakeCaller
) -> None:
    caller, _ = make_caller("crawler", caller_class="restricted")
    job = make_job(caller, "running", targets=[done_target(), failed_target(), {}], created_at=NOON)

    response = admin_client.get(JOBS_URL)

    assert response.status_code == 200
    row = list_rows(response)[job.id]
    assert row["caller_name"] == "crawler"
    assert row["caller_class"] == "restricted"
    assert row["status"] == "running"
    assert row["progress"] == "2/3, 1 failed"
    assert row["created_at"] == "Jan. 1, 2026, 12:30 p.m."
    assert row["expires"] == "Jan. 2, 2026, 12:30 p.m."
    assert b'<progress max="3" value="2" style=' in response.content


def test_job_list_shows_the_newest_job_first(admin_client: Client, agent: tuple[ApiKey, Any]) -> None:
    caller, _ = agent
    old, newest, middle = (make_job(caller, created_at=NOON + timedelta(minutes=m)) for m in (0, 20, 10))

    response = admin_client.get(JOBS_URL)

    assert list(list_rows(response)) == [newest.id, middle.id, old.id]


def test_job_list_filters_by_status_caller_class_and_caller(
    admin_client: Client, make_caller: MakeCaller
) -> None:
    fleet, _ = make_caller("fleet-agent")
    restricted, _ = make_caller("restricted-agent", caller_class="restricted")
    queued = make_job(fleet, "queued")
    done = make_job(fleet, "done", targets=[done_target()])
    private = make_job(restricted, "running")

    assert list(list_rows(admin_client.get(JOBS_URL, {"status__exact": "queued"}))) == [queued.id]
    assert list(list_rows(admin_client.get(JOBS_URL, {"caller_class__exact": "restricted"}))) == [private.id]
    by_caller = list_rows(admin_client.get(JOBS_URL, {"caller__id__exact": fleet.pk}))
    assert set(by_caller) == {queued.id, done.id}


def test_job_list_searches_by_job_id_prefix_and_by_caller_name(
    admin_client: Client, make_caller: MakeCaller
) -> None:
    alice, _ = make_caller("alice")
    bob, _ = make_caller("bob")
    first = make_job(alice)
    second = make_job(bob, "done", targets=[done_target()])

    assert list(list_rows(admin_client.get(JOBS_URL, {"q": first.id[:10]}))) == [first.id]
    assert list(list_rows(admin_client.get(JOBS_URL, {"q": second.id}))) == [second.id]
    assert list(list_rows(admin_client.get(JOBS_URL, {"q": "bob"}))) == [second.id]


def test_job_list_runs_as_many_queries_for_100_jobs_as_for_10(
    admin_client: Client, make_caller: MakeCaller, django_assert_max_num_queries: Any
) -> None:
    callers = [make_caller(f"agent-{i}", caller_class=("fleet", "restricted")[i % 2])[0] for i in range(4)]

    def count_queries(n_jobs: int) -> int:
        while BatchJob.objects.count() < n_jobs:
            make_job(callers[BatchJob.objects.count() % 4], "running", targets=[done_target(), {}])
        with django_assert_max_num_queries(12) as captured:
            response = admin_client.get(JOBS_URL)
        assert len(list_rows(response)) == n_jobs
        return len(captured)

    assert count_queries(10) == count_queries(100)


# --- job page --------------------------------------------------------------------------------


def test_job_page_shows_every_field_read_only_with_its_targets_inline(
    admin_client: Client, agent: tuple[ApiKey, Any]
) -> None:
    caller, _ = agent
    job = make_job(caller, "running", targets=[done_target(), failed_target(), {}])

    response = admin_client.get(reverse("admin:batch_batchjob_change", args=[job.pk]))

    assert response.status_code == 200
    content = response.content.decode()
    assert 'name="_save"' not in content
    for field in ("status", "caller", "error", "targets_total", "content_key"):
        assert f'name="{field}"' not in content
    assert job.content_key in content
    assert "2/3, 1 failed" in content
    for target in job.targets.all():
        assert reverse("admin:batch_batchtarget_change", args=[target.pk]) in content
    assert "the address is not public" in content
    assert "Use a public URL." in content
    assert "2.0\xa0KB" in content


def test_job_page_runs_as_many_queries_for_32_targets_as_for_2(
    admin_client: Client, agent: tuple[ApiKey, Any], django_assert_max_num_queries: Any
) -> None:
    def count_queries(n_targets: int) -> int:
        job = make_job(agent[0], "running", targets=[done_target()] * n_targets)
        with django_assert_max_num_queries(8) as captured:
            response = admin_client.get(reverse("admin:batch_batchjob_change", args=[job.pk]))
        assert len(re.findall(rb"/admin/batch/batchtarget/\d+/change/", response.content)) == n_targets
        return len(captured)

    assert count_queries(2) == count_queries(32)


def test_job_page_cannot_be_changed_by_posting_to_it(admin_client: Client, agent: tuple[ApiKey, Any]) -> None:
    caller, _ = agent
    job = make_job(caller, "queued")

    response = admin_client.post(
        reverse("admin:batch_batchjob_change", args=[job.pk]), {"status": "done", "targets_done": "1"}
    )

    assert response.status_code == 403
    job.refresh_from_db()
    assert (job.status, job.targets_done) == ("queued", 0)


@pytest.mark.parametrize("model", ["batchjob", "batchtarget"])
def test_jobs_and_targets_cannot_be_added_by_hand(admin_client: Client, model: str) -> None:
    assert admin_client.get(reverse(f"admin:batch_{model}_add")).status_code == 403


def test_target_page_cannot_be_changed_or_deleted(admin_client: Client, agent: tuple[ApiKey, Any]) -> None:
    caller, _ = agent
    target = make_job(caller, "done", targets=[done_target()]).targets.get()

    changed = admin_client.post(
        reverse("admin:batch_batchtarget_change", args=[target.pk]), {"url": "https://x/"}
    )
    deleted = admin_client.post(reverse("admin:batch_batchtarget_delete", args=[target.pk]), {"post": "yes"})

    assert (changed.status_code, deleted.status_code) == (403, 403)
    target.refresh_from_db()
    assert target.url == "https://example.org/0"


def test_staff_who_may_view_jobs_may_view_their_targets(
    staff_client: StaffClient, agent: tuple[ApiKey, Any]
) -> None:
    client = staff_client("view_batchjob")
    caller, _ = agent
    job = make_job(caller, "done", targets=[done_target("only for viewers")])

    job_page = client.get(reverse("admin:batch_batchjob_change", args=[job.pk]))
    target_page = client.get(reverse("admin:batch_batchtarget_change", args=[job.targets.get().pk]))

    assert job_page.status_code == 200
    assert reverse("admin:batch_batchtarget_change", args=[job.targets.get().pk]) in job_page.content.decode()
    assert target_page.status_code == 200
    assert b"only for viewers" in target_page.content


def test_staff_without_view_permission_cannot_open_jobs(
    staff_client: StaffClient, agent: tuple[ApiKey, Any]
) -> None:
    client = staff_client("view_apikey")
    job = make_job(agent[0])

    assert client.get(JOBS_URL).status_code == 403
    assert client.get(reverse("admin:batch_batchjob_change", args=[job.pk])).status_code == 403


# --- target page -----------------------------------------------------------------------------


def test_target_page_shows_url_options_outcome_and_the_full_result_readably(
    admin_client: Client, agent: tuple[ApiKey, Any]
) -> None:
    caller, _ = agent
    content = "# Title\n\nFirst paragraph.\n\n" + "word " * 5000
    job = make_job(
        caller,
        "partial",
        targets=[
            done_target(
                content, {"title": "Title", "pages_total": 3}, options={"grep": "foo", "mode": "text"}
            ),
            failed_target(url="https://blocked.example/"),
        ],
    )
    done, failed = job.targets.order_by("idx")

    page = admin_client.get(reverse("admin:batch_batchtarget_change", args=[done.pk])).content.decode()
    failed_page = admin_client.get(
        reverse("admin:batch_batchtarget_change", args=[failed.pk])
    ).content.decode()

    assert "https://example.org/0" in page
    assert "{\n  &quot;grep&quot;: &quot;foo&quot;,\n  &quot;mode&quot;: &quot;text&quot;\n}" in page
    assert re.search(r"<pre[^>]*># Title\n\nFirst paragraph\.\n\n(word ){5000}</pre>", page)
    assert "{\n  &quot;pages_total&quot;: 3,\n  &quot;title&quot;: &quot;Title&quot;\n}" in page
    assert reverse("admin:batch_batchjob_change", args=[job.pk]) in page
    assert "https://blocked.example/" in failed_page
    for text in ("blocked", "the address is not public", "Use a public URL."):
        assert text in failed_page


def test_fetched_content_is_shown_as_text_never_as_html(
    admin_client: Client, agent: tuple[ApiKey, Any]
) -> None:
    caller, _ = agent
    hostile = done_target(
        "<script>alert(1)</script>",
        {"title": "<img src=x onerror=alert(2)>"},
        options={"question": "</pre><script>alert(3)</script>"},
    )
    job = make_job(
        caller, "partial", targets=[hostile, failed_target(error="<b>bold</b>", hint="<i>hint</i>")]
    )
    done = job.targets.get(idx=0)

    target_page = admin_client.get(reverse("admin:batch_batchtarget_change", args=[done.pk])).content
    job_page = admin_client.get(reverse("admin:batch_batchjob_change", args=[job.pk])).content

    assert b"<script>alert(1)</script>" not in target_page
    assert b"&lt;script&gt;alert(1)&lt;/script&gt;" in target_page
    assert b"<img src=x" not in target_page
    assert b"&lt;img src=x onerror=alert(2)&gt;" in target_page
    assert b"<script>alert(3)" not in target_page
    assert b"<b>bold</b>" not in job_page
    assert b"&lt;b&gt;bold&lt;/b&gt;" in job_page
    assert b"&lt;i&gt;hint&lt;/i&gt;" in job_page


def test_target_list_never_loads_results(admin_client: Client, agent: tuple[ApiKey, Any]) -> None:
    caller, _ = agent
    make_job(caller, "done", targets=[done_target("secret body text")])

    response = admin_client.get(reverse("admin:batch_batchtarget_changelist"))

    assert response.status_code == 200
    assert b"secret body text" not in response.content
    assert "result" in response.context["cl"].result_list.query.deferred_loading[0]


# --- cancel and delete -----------------------------------------------------------------------


def test_cancel_action_first_asks_for_confirmation_listing_live_and_finished_jobs(
    admin_client: Client, agent: tuple[ApiKey, Any]
) -> None:
    caller, _ = agent
    queued, running = make_job(caller, "queued"), make_job(caller, "running")
    done = make_job(caller, "done", targets=[done_target()])

    response = admin_client.post(JOBS_URL, action("cancel_selected", queued, running, done))

    assert response.status_code == 200
    assert "admin/batch/batchjob/cancel_selected_confirmation.html" in [t.name for t in response.templates]
    doc = lxml.html.fromstring(response.content)
    assert set(doc.xpath('//ul[@id="jobs-to-cancel"]//a/text()')) == {queued.id, running.id}
    assert doc.xpath('//ul[@id="jobs-already-finished"]//a/text()') == [done.id]
    assert set(doc.xpath('//input[@name="_selected_action"]/@value')) == {queued.id, running.id, done.id}
    assert doc.xpath('//input[@type="submit"]/@value') == ["Yes, cancel 2 jobs"]
    statuses = set(BatchJob.objects.values_list("status", flat=True))
    assert statuses == {"queued", "running", "done"}


def test_confirming_cancel_cancels_live_jobs_and_reports_how_many_and_which_had_finished(
    admin_client: Client, agent: tuple[ApiKey, Any]
) -> None:
    caller, api = agent
    queued = make_job(caller, "queued", targets=[{}, {}])
    running = make_job(caller, "running", targets=[done_target(), {"status": "running", "lease_until": NOON}])
    done = make_job(caller, "done", targets=[done_target()])

    response = admin_client.post(JOBS_URL, action("cancel_selected", queued, running, done, confirm=True))

    assert response.status_code == 302
    assert messages_of(response) == [f"2 cancelled, 1 already finished: {done.id} (done)"]
    for job in (queued, running):
        job.refresh_from_db()
        assert job.status == "cancelled"
        assert job.finished_at is not None
        assert api.get(f"/v1/batch/{job.id}").json()["status"] == "cancelled"
    assert set(queued.targets.values_list("status", flat=True)) == {"pending"}
    assert running.targets.get(idx=1).status == "running"
    done.refresh_from_db()
    assert done.status == "done"
    assert (
        LogEntry.objects.filter(object_id__in=[queued.id, running.id], change_message="Cancelled.").count()
        == 2
    )


def test_a_job_that_finishes_before_the_cancel_is_confirmed_is_reported_already_finished(
    admin_client: Client, agent: tuple[ApiKey, Any]
) -> None:
    caller, _ = agent
    job = make_job(caller, "running", targets=[{}])
    admin_client.post(JOBS_URL, action("cancel_selected", job))
    BatchJob.objects.filter(pk=job.pk).update(status="failed", finished_at=timezone.now())

    response = admin_client.post(JOBS_URL, action("cancel_selected", job, confirm=True))

    assert messages_of(response) == [f"0 cancelled, 1 already finished: {job.id} (failed)"]
    job.refresh_from_db()
    assert job.status == "failed"


def test_cancel_confirmation_offers_nothing_to_confirm_when_every_job_has_finished(
    admin_client: Client, agent: tuple[ApiKey, Any]
) -> None:
    done = make_job(agent[0], "done", targets=[done_target()])

    response = admin_client.post(JOBS_URL, action("cancel_selected", done))

    assert b"nothing to cancel" in response.content
    assert lxml.html.fromstring(response.content).xpath('//form//input[@type="submit"]') == []


def test_staff_without_the_cancel_permission_do_not_see_the_cancel_action(
    staff_client: StaffClient, agent: tuple[ApiKey, Any]
) -> None:
    client = staff_client("view_batchjob", "delete_batchjob")
    job = make_job(agent[0], "queued")

    page = client.get(JOBS_URL)
    forced = client.post(JOBS_URL, action("cancel_selected", job, confirm=True))

    assert b'value="delete_selected"' in page.content
    assert b'value="cancel_selected"' not in page.content
    assert messages_of(forced) == ["No action selected."]
    job.refresh_from_db()
    assert job.status == "queued"


def test_staff_with_the_cancel_permission_can_cancel(
    staff_client: StaffClient, agent: tuple[ApiKey, Any]
) -> None:
    client = staff_client("view_batchjob", "cancel_batchjob")
    job = make_job(agent[0], "queued")

    page = client.get(JOBS_URL)
    confirmation = client.post(JOBS_URL, action("cancel_selected", job))
    confirmed = client.post(JOBS_URL, action("cancel_selected", job, confirm=True))

    assert b'value="cancel_selected"' in page.content
    assert b'value="delete_selected"' not in page.content
    assert confirmation.status_code == 200
    assert messages_of(confirmed) == ["1 cancelled, 0 already finished"]
    job.refresh_from_db()
    assert job.status == "cancelled"


def test_delete_selected_jobs_deletes_them_with_their_targets(
    admin_client: Client, agent: tuple[ApiKey, Any]
) -> None:
    caller, _ = agent
    doomed = make_job(caller, "done", targets=[done_target(), done_target()])
    kept = make_job(caller, "queued")

    confirmation = admin_client.post(JOBS_URL, action("delete_selected", doomed))
    deleted = admin_client.post(JOBS_URL, action("delete_selected", doomed, confirm=True))

    assert confirmation.status_code == 200
    assert b"Are you sure" in confirmation.content
    assert deleted.status_code == 302
    assert messages_of(deleted) == ["Successfully deleted 1 batch job."]
    assert list(BatchJob.objects.values_list("pk", flat=True)) == [kept.pk]
    assert not BatchTarget.objects.filter(job_id=doomed.pk).exists()


def test_a_single_job_can_be_deleted_from_its_page(
    staff_client: StaffClient, agent: tuple[ApiKey, Any]
) -> None:
    client = staff_client("view_batchjob", "delete_batchjob")
    job = make_job(agent[0], "failed", targets=[failed_target()])
    url = reverse("admin:batch_batchjob_delete", args=[job.pk])

    assert b"Are you sure" in client.get(url).content
    assert client.post(url, {"post": "yes"}).status_code == 302
    assert not BatchJob.objects.exists()
    assert not BatchTarget.objects.exists()


# --- API keys --------------------------------------------------------------------------------


def create_key(client: Client, name: str, **fields: str) -> str:
    """Submit the create form; return the key shown on the page that answers it."""
    data = {"name": name, "workspace": "", "caller_class": "fleet", **fields}
    response = client.post(reverse("admin:batch_apikey_add"), data)
    assert response.status_code == 200, response.content
    assert "no-store" in response["Cache-Control"]
    return str(lxml.html.fromstring(response.content).xpath('//input[@id="api-key"]/@value')[0])


def test_key_list_shows_name_workspace_class_active_created_and_last_used(
    admin_client: Client, make_caller: MakeCaller
) -> None:
    make_caller("used", workspace="research", caller_class="restricted")
    make_caller("revoked")
    ApiKey.objects.filter(name="used").update(created_at=NOON, last_used_at=NOON + timedelta(days=1))
    ApiKey.objects.filter(name="revoked").update(active=False)

    rows = list_rows(admin_client.get(KEYS_URL))

    assert list(rows) == ["revoked", "used"]
    assert rows["used"]["workspace"] == "research"
    assert rows["used"]["caller_class"] == "restricted"
    assert rows["used"]["created_at"] == "Jan. 1, 2026, 12:30 p.m."
    assert rows["used"]["last_used_at"] == "Jan. 2, 2026, 12:30 p.m."
    page = admin_client.get(KEYS_URL).content.decode()
    assert re.search(r'field-active"><img src="[^"]*icon-yes', page)
    assert re.search(r'field-active"><img src="[^"]*icon-no', page)


def test_creating_a_key_shows_it_once_and_stores_only_its_hash(admin_client: Client) -> None:
    raw_key = create_key(admin_client, "new-agent", workspace="lab", caller_class="restricted")

    api_key = ApiKey.objects.get(name="new-agent")
    assert (api_key.workspace, api_key.caller_class, api_key.active) == ("lab", "restricted", True)
    assert api_key.key_sha256 == hash_key(raw_key)
    assert raw_key not in [str(v) for v in ApiKey.objects.values().get(pk=api_key.pk).values()]
    assert (
        raw_key.encode()
        not in admin_client.get(reverse("admin:batch_apikey_change", args=[api_key.pk])).content
    )
    assert raw_key.encode() not in admin_client.get(KEYS_URL).content
    assert LogEntry.objects.filter(object_id=str(api_key.pk), action_flag=1).exists()


def test_a_key_created_in_the_admin_works_against_the_api_until_it_is_revoked(admin_client: Client) -> None:
    raw_key = create_key(admin_client, "fresh")
    bearer = {"Authorization": f"Bearer {raw_key}"}

    before = Client().get("/v1/batch", headers=bearer)
    revoked = admin_client.post(KEYS_URL, action("revoke_selected", ApiKey.objects.get(name="fresh")))
    after = Client().get("/v1/batch", headers=bearer)

    assert before.status_code == 200
    assert messages_of(revoked) == ["1 revoked, 0 already revoked"]
    assert after.status_code == 403
    assert after.json()["code"] == "forbidden"


def test_revoke_counts_keys_that_were_already_revoked(admin_client: Client, make_caller: MakeCaller) -> None:
    keys = [make_caller(name)[0] for name in ("a", "b", "c")]
    ApiKey.objects.filter(name="c").update(active=False)

    response = admin_client.post(KEYS_URL, action("revoke_selected", *keys))

    assert messages_of(response) == ["2 revoked, 1 already revoked"]
    assert not ApiKey.objects.filter(active=True).exists()


def test_a_keys_hash_name_and_active_flag_cannot_be_edited(
    admin_client: Client, make_caller: MakeCaller
) -> None:
    api_key, _ = make_caller("steady")
    ApiKey.objects.filter(pk=api_key.pk).update(active=False)
    url = reverse("admin:batch_apikey_change", args=[api_key.pk])

    page = admin_client.get(url).content.decode()
    response = admin_client.post(
        url,
        {
            "name": "renamed",
            "key_sha256": "0" * 64,
            "active": "on",
            "workspace": "ops",
            "caller_class": "restricted",
        },
    )

    assert 'name="key_sha256"' not in page
    assert 'name="name"' not in page
    assert response.status_code == 302
    saved = ApiKey.objects.get(pk=api_key.pk)
    assert (saved.name, saved.key_sha256, saved.active) == ("steady", api_key.key_sha256, False)
    assert (saved.workspace, saved.caller_class) == ("ops", "restricted")


def test_keys_cannot_be_deleted_from_the_console(admin_client: Client, make_caller: MakeCaller) -> None:
    api_key, _ = make_caller("kept")

    page = admin_client.get(KEYS_URL)
    response = admin_client.post(reverse("admin:batch_apikey_delete", args=[api_key.pk]), {"post": "yes"})

    assert b'value="delete_selected"' not in page.content
    assert b'value="revoke_selected"' in page.content
    assert response.status_code == 403
    assert ApiKey.objects.filter(pk=api_key.pk).exists()


def test_staff_without_change_permission_on_keys_cannot_revoke(
    staff_client: StaffClient, make_caller: MakeCaller
) -> None:
    client = staff_client("view_apikey")
    api_key, _ = make_caller("kept-active")

    page = client.get(KEYS_URL)
    forced = client.post(KEYS_URL, action("revoke_selected", api_key))

    assert page.status_code == 200
    assert b'value="revoke_selected"' not in page.content
    assert forced.status_code == 200
    api_key.refresh_from_db()
    assert api_key.active


# --- login throttling (django-axes) ----------------------------------------------------------

LOGIN_URL = reverse("admin:login")


def _log_in(username: str, password: str, address: str) -> Any:
    """A login through the console's form from ``address``; answers the response."""
    client = Client(REMOTE_ADDR=address)
    return client.post(LOGIN_URL, {"username": username, "password": password, "next": JOBS_URL})


def _logged_in(response: Any) -> bool:
    return response.status_code == 302 and response["Location"] == JOBS_URL


def test_failed_logins_lock_that_name_out_from_that_address_only_until_the_lockout_ends(db, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # quick, for a test
    User.objects.create_user("boss", password="right-horse-battery", is_staff=True)
    User.objects.create_user("clerk", password="staple-correct-horse", is_staff=True)
    with time_machine.travel(NOON, tick=False):
        for _ in range(settings.SIFT_ADMIN_LOGIN_FAILURES - 1):
            refused = _log_in("boss", "wrong", "192.0.2.7")
            assert refused.status_code == 200  # the form again, with its error
        assert _log_in("boss", "wrong", "192.0.2.7").status_code == 429  # the last failure locks
        locked = _log_in("boss", "right-horse-battery", "192.0.2.7")
        assert locked.status_code == 429
        assert "locked" in locked.content.decode().lower()
        # Neither the name from elsewhere nor another name from that address is locked out.
        assert _logged_in(_log_in("boss", "right-horse-battery", "198.51.100.4"))
        assert _logged_in(_log_in("clerk", "staple-correct-horse", "192.0.2.7"))
    with time_machine.travel(NOON + timedelta(seconds=settings.SIFT_ADMIN_LOGIN_LOCKOUT + 1), tick=False):
        assert _logged_in(_log_in("boss", "right-horse-battery", "192.0.2.7"))
