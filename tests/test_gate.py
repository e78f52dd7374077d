"""The fetch gate spans processes and frees the slots of dead ones (docs/fetch-pipeline.md)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from fetch import gate
from fetch.errors import FetchError
from fetch.models import FetchSlot

from .deployment import ROOT, Deployment, wait_for
from .upstream import slow_upstream

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_third_fetch_waits_about_five_seconds_then_gets_429_busy(tmp_path, make_caller):
    key = make_caller("first")[1].raw_key
    other_key = make_caller("second")[1].raw_key  # within its share: the gate is what is full
    env = {"SIFT_FETCH_SLOTS": "2", "SIFT_FETCH_ALLOW_CIDRS": "127.0.0.0/8", "SIFT_FETCH_TIMEOUT": "30s"}
    deployment = Deployment(tmp_path, env)
    deployment.start_web(workers=3)
    try:
        with slow_upstream(delay=9) as base:
            answers: dict[str, tuple[int, bytes, dict[str, str]]] = {}
            slow = [
                threading.Thread(
                    target=lambda n=n: answers.update(
                        {n: deployment.request(f"/v1/fetch?url={base}/{n}", key)}
                    )
                )
                for n in ("a", "b")
            ]
            for thread in slow:
                thread.start()
            wait_for(lambda: FetchSlot.objects.exclude(holder="").count() == 2, what="two slots taken")
            holders = set(FetchSlot.objects.values_list("holder", flat=True))
            started = time.monotonic()
            status, body, headers = deployment.request(f"/v1/fetch?url={base}/c", other_key)
            waited = time.monotonic() - started
            for thread in slow:
                thread.join()
    finally:
        deployment.stop_all()
    assert (status, json.loads(body)["code"]) == (429, "busy")
    assert int(headers["Retry-After"]) > 0
    assert 4.5 <= waited < 9
    assert len(holders) == 2
    assert [answers[n][0] for n in ("a", "b")] == [200, 200]


def test_a_slot_held_by_a_killed_process_is_free_again_within_its_lease(settings, tmp_path):
    settings.SIFT_FETCH_SLOTS = 1
    settings.SIFT_FETCH_TIMEOUT = 2
    holder = subprocess.Popen(
        [sys.executable, "-c", (
            "import django, time; django.setup(); from fetch import gate\n"
            "with gate.fetch_slot(\"holder\"):\n    print('held', flush=True); time.sleep(120)"
        )],
        cwd=ROOT, env={**Deployment(tmp_path, {}).env, "SIFT_FETCH_SLOTS": "1", "SIFT_FETCH_TIMEOUT": "2s",
                       "DJANGO_SETTINGS_MODULE": "sift_site.settings"},
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        lease_until = FetchSlot.objects.get(number=0).lease_until
        holder.kill()
        holder.wait()
        with pytest.raises(FetchError) as busy, gate.fetch_slot("another"):
            pass
        assert busy.value.outcome == "busy"
        assert timezone.now() < lease_until + timedelta(seconds=1)
        wait_for(
            _slot_can_be_taken, timeout=gate.slot_lease().total_seconds() + 2, what="the dead slot to free"
        )
    finally:
        holder.kill()


def _slot_can_be_taken() -> bool:
    try:
        with gate.fetch_slot("another"):
            return True
    except FetchError:
        return False
