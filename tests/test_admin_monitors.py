"""The staff console's monitors (docs/admin.md): listed with their last run and change, paused and
resumed by the actions, which go through the monitors service."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import lxml.html
import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from batch.models import ApiKey, Monitor, MonitorChange

MONITORS_URL = reverse("admin:batch_monitor_changelist")


def staff(*codenames: str) -> Client:
    user = User.objects.create_user("staff", password="unused-password", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="batch", codename__in=codenames)
    )
    client = Client()
    client.force_login(user)
    return client


def monitor(caller: ApiKey, url: str, **fields: Any) -> Monitor:
    now = timezone.now()
    return Monitor.objects.create(
        caller=caller, url=url, every=300, created_at=now, due_at=now + timedelta(minutes=5), **fields
    )


def rows(response: Any) -> dict[str, dict[str, str]]:
    doc = lxml.html.fromstring(response.content)
    found = {}
    for tr in doc.xpath('//table[@id="result_list"]/tbody/tr'):
        cells = {
            cls.removeprefix("field-"): cell.text_content().strip()
            for cell in tr.xpath("./th|./td")
            for cls in cell.get("class", "").split()
            if cls.startswith("field-")
        }
        found[cells["id"]] = cells
    return found


@pytest.mark.django_db
def test_monitors_are_listed_with_their_last_run_and_change(make_caller):
    caller, _ = make_caller("watcher")
    now = timezone.now()
    failing = monitor(
        caller, "https://example.org/a", runs=4, last_run_at=now, last_outcome="timeout", failures_in_a_row=4
    )
    changed = monitor(
        caller, "https://example.org/b", runs=2, last_run_at=now, last_outcome="ok", last_change_at=now
    )
    MonitorChange.objects.create(monitor=changed, at=now, diff="+a new line", added=1)
    listed = rows(staff("view_monitor").get(MONITORS_URL))
    assert listed[failing.id]["last_outcome"] == "timeout"
    assert listed[failing.id]["failures_in_a_row"] == "4"
    assert listed[failing.id]["state"] == "running"
    assert listed[changed.id]["last_change_at"] != "-"
    assert listed[failing.id]["last_change_at"] == "-"


@pytest.mark.django_db
def test_pause_and_resume_go_through_the_service_and_say_how_many(make_caller):
    caller, _ = make_caller("watcher")
    first, second = monitor(caller, "https://example.org/a"), monitor(caller, "https://example.org/b")
    client = staff("view_monitor", "change_monitor")
    select = {"_selected_action": [first.pk, second.pk], "index": "0"}
    paused = client.post(MONITORS_URL, {"action": "pause_selected", **select}, follow=True)
    assert [str(m) for m in get_messages(paused.wsgi_request)] == ["Paused 2 monitor(s)."]
    first.refresh_from_db()
    assert (first.due_at, first.paused_reason) == (None, "paused by staff in the admin")
    assert rows(client.get(MONITORS_URL))[first.id]["state"] == "paused: paused by staff in the admin"
    resumed = client.post(MONITORS_URL, {"action": "resume_selected", **select}, follow=True)
    assert "Resumed 2 monitor(s); each runs at once." in [str(m) for m in get_messages(resumed.wsgi_request)]
    first.refresh_from_db()
    assert first.due_at is not None
    assert first.paused_reason == ""


@pytest.mark.django_db
def test_without_the_change_permission_there_is_no_pause(make_caller):
    caller, _ = make_caller("watcher")
    target = monitor(caller, "https://example.org/a")
    client = staff("view_monitor")
    client.post(MONITORS_URL, {"action": "pause_selected", "_selected_action": [target.pk], "index": "0"})
    target.refresh_from_db()
    assert target.due_at is not None
