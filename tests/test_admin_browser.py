"""The staff console in a real Chromium: log in, filter, open a job and a target, cancel two jobs."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission, User
from django.utils import timezone
from playwright.sync_api import expect, sync_playwright

from batch.models import ApiKey

from .factories import done_target, failed_target, make_job

# The browser sift renders with (the headless shell where installed): a screenshot needs no more.
CHROMIUM = Path(settings.SIFT_RENDER_CHROMIUM)
# Without the background-networking flags Chromium reaches for the network, which is closed here.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOT = Path(__file__).resolve().parent.parent / "bench" / "out" / "admin-job.png"
PASSWORD = "correct horse battery staple"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM}; apt-get install -y chromium-headless-shell"
    ),
]


@dataclass(frozen=True)
class Console:
    raw_key: str
    queued: str
    running: str
    finished: str


@pytest.fixture
def console(live_server: Any) -> Console:
    """An operator and three jobs of one caller, stored before the browser starts.

    Playwright's sync API runs an event loop in this thread, and Django refuses ORM calls made
    while one runs; so all database work is done here, and the test checks through the API.
    """
    user = User.objects.create_user("operator", password=PASSWORD, is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="batch", codename__in=["view_batchjob", "cancel_batchjob"]
        )
    )
    caller, raw_key = ApiKey.issue("crawler")
    now = timezone.now()
    queued = make_job(caller, "queued", targets=[{}, {}], created_at=now - timedelta(minutes=3))
    running = make_job(caller, "running", targets=[done_target(), {}], created_at=now - timedelta(minutes=2))
    hostile = done_target("<script>alert(1)</script>\n\nBody text.")
    finished = make_job(
        caller, "partial", targets=[hostile, failed_target()], created_at=now - timedelta(minutes=1)
    )
    return Console(raw_key, queued.id, running.id, finished.id)


@pytest.fixture
def page(console: Console) -> Iterator[Any]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        page.set_default_timeout(15_000)
        yield page
        browser.close()


def api_job(base_url: str, raw_key: str, job_id: str) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{base_url}/v1/batch/{job_id}", headers={"Authorization": f"Bearer {raw_key}"}
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=10) as response:
        assert response.status == 200
        return dict(json.load(response))


def row_of(page: Any, job_id: str) -> Any:
    return page.locator("#result_list tbody tr", has=page.get_by_role("link", name=job_id, exact=True))


def test_operator_filters_opens_a_job_and_a_target_then_cancels_two_live_jobs(
    live_server: Any, console: Console, page: Any
) -> None:
    queued, running, finished = console.queued, console.running, console.finished
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))

    page.goto(f"{live_server.url}/admin/")
    page.fill("#id_username", "operator")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.locator("#content-main tr.model-batchjob").get_by_role("link", name="Batch jobs").click()
    expect(page.locator("#result_list tbody tr")).to_have_count(3)

    page.locator("#changelist-filter").get_by_role("link", name="queued", exact=True).click()
    page.wait_for_url("**/admin/batch/batchjob/?status__exact=queued")
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    expect(row_of(page, queued).locator(".field-status")).to_have_text("queued")

    page.goto(f"{live_server.url}/admin/batch/batchjob/")
    page.get_by_role("link", name=finished, exact=True).click()
    inline_rows = page.locator(".tabular tbody tr.has_original")
    expect(inline_rows).to_have_count(2)
    expect(inline_rows.nth(1)).to_contain_text("the address is not public")
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOT), full_page=True)

    inline_rows.nth(0).get_by_role("link", name="0", exact=True).click()
    expect(page.locator(".field-content pre")).to_have_text("<script>alert(1)</script>\n\nBody text.")
    assert dialogs == []

    page.goto(f"{live_server.url}/admin/batch/batchjob/")
    row_of(page, queued).locator("input.action-select").check()
    row_of(page, running).locator("input.action-select").check()
    page.select_option("select[name=action]", "cancel_selected")
    page.get_by_role("button", name="Go").click()
    expect(page.locator("#jobs-to-cancel a")).to_have_text([running, queued])
    page.get_by_role("button", name="Yes, cancel 2 jobs").click()

    expect(page.locator(".messagelist")).to_have_text("2 cancelled, 0 already finished")
    for job in (queued, running):
        expect(row_of(page, job).locator(".field-status")).to_have_text("cancelled")
        assert api_job(live_server.url, console.raw_key, job)["status"] == "cancelled"
    expect(row_of(page, finished).locator(".field-status")).to_have_text("partial")
