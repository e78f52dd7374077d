"""Rules between settings are system checks with an id, a message and a hint (docs/workers.md)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.checks import CheckMessage, run_checks
from django.core.exceptions import ImproperlyConfigured

from batch import pipeline_bridge
from batch.engine import seam
from fetch.sandbox.pool import SANDBOX_CHILDREN

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = django_settings.Q_CLUSTER


def sift_messages(*, deploy: bool = False) -> dict[str, CheckMessage]:
    found = run_checks(include_deployment_checks=deploy)
    # sift.I… are infos that say what is in use (the browser's network mode), not broken rules.
    return {m.id: m for m in found if m.id and m.id.startswith("sift.") and not m.id.startswith("sift.I")}


@pytest.fixture
def sound(settings):
    """Settings that break no rule: the defaults, and the tests' loopback-only fetching made whole."""
    settings.SIFT_FETCH_ALLOW_CIDRS = ("127.0.0.0/8",)
    settings.SIFT_METRICS_TOKEN = "a-scrape-token-for-prometheus"
    return settings


def test_the_default_settings_break_no_rule(sound):
    assert sift_messages(deploy=True) == {}


@pytest.mark.parametrize(
    ("changes", "check_id"),
    [
        ({"SIFT_BATCH_CLAIM_LEASE": 40.0}, "sift.E001"),
        ({"SIFT_FETCH_TIMEOUT": 300.0}, "sift.E001"),
        ({"SIFT_BATCH_DRAIN_SECONDS": 1000.0}, "sift.E002"),
        (
            {"Q_CLUSTER": {**django_settings.Q_CLUSTER, "retry": django_settings.Q_CLUSTER["timeout"]}},
            "sift.E003",
        ),
        ({"SIFT_TEST_FETCH_FUNC": "os.system"}, "sift.E004"),
        ({"SIFT_TEST_RESOLVE_FUNC": "socket.getaddrinfo"}, "sift.E004"),
        ({"SIFT_BATCH_WAITS_PER_CALLER": 5, "SIFT_BATCH_WAITS_TOTAL": 4}, "sift.W001"),
        ({"SIFT_MCP_PER_CALLER": 33, "SIFT_MCP_TOTAL": 32}, "sift.W001"),
        ({"SIFT_BATCH_STREAMS_PER_CALLER": 9, "SIFT_BATCH_STREAMS_TOTAL": 8}, "sift.W001"),
        ({"SIFT_FETCH_ONLY_ALLOWED": True, "SIFT_FETCH_ALLOW_CIDRS": ()}, "sift.W002"),
        ({"SIFT_FETCH_CONNECT_TIMEOUT": 60.0}, "sift.W003"),
        ({"SIFT_BATCH_RETRY_WAIT": 900.0}, "sift.W004"),
        ({"SIFT_WEBHOOK_PER_CALLER": 8}, "sift.W006"),
        ({"SIFT_WEBHOOK_SENDING": 4}, "sift.W006"),
        ({"SIFT_FETCH_PER_CALLER": SANDBOX_CHILDREN + 1}, "sift.W007"),
        ({"SIFT_UPLOADS_PER_CALLER": 5, "SIFT_UPLOADS_TOTAL": 4}, "sift.W001"),
        ({"SIFT_UPLOAD_MAX_BYTES": 200 << 20}, "sift.W013"),
        ({"SIFT_UPLOAD_MAX_BYTES": 64 << 10}, "sift.W013"),
    ],
)
def test_a_broken_rule_is_reported_with_its_id_and_a_hint(sound, changes, check_id):
    for name, value in changes.items():
        setattr(sound, name, value)
    messages = sift_messages()
    assert list(messages) == [check_id]
    assert messages[check_id].hint
    assert messages[check_id].is_serious() == check_id.startswith("sift.E")


def test_the_upload_limit_may_reach_an_eighth_of_the_childs_memory(sound):
    sound.SIFT_UPLOAD_MAX_BYTES = 128 << 20
    assert sift_messages() == {}
    sound.SIFT_UPLOAD_MAX_BYTES = (128 << 20) + 1
    assert "between 128KiB and 128MiB" in str(sift_messages()["sift.W013"].hint)


def test_a_lease_just_longer_than_one_rendered_fetch_is_enough(sound):
    sound.SIFT_FETCH_TIMEOUT, sound.SIFT_RENDER_TIMEOUT = 30.0, 20.0
    # gate wait 5 s + 30 s + 2 x (start 15 s + render 20 s + stop 11 s) + extraction grace 5 s = 132 s
    sound.SIFT_BATCH_CLAIM_LEASE = 132.5
    assert sift_messages() == {}
    sound.SIFT_BATCH_CLAIM_LEASE = 132.0
    assert list(sift_messages()) == ["sift.E001"]
    assert "above 132s" in str(sift_messages()["sift.E001"].hint)


def test_a_longer_render_timeout_needs_a_longer_lease(sound):
    sound.SIFT_BATCH_CLAIM_LEASE = 160.0  # the default's value with the default timeouts
    assert sift_messages() == {}
    sound.SIFT_RENDER_TIMEOUT = 60.0
    assert list(sift_messages()) == ["sift.E001"]


def test_a_test_fetch_function_is_not_held_to_the_pipelines_lease(sound):
    sound.SIFT_TEST_FETCH_FUNC = "tests.fetchers.scripted"
    sound.SIFT_BATCH_CLAIM_LEASE = 4.0
    assert sift_messages() == {}


def test_an_unset_metrics_token_is_a_deployment_warning_only(sound):
    sound.SIFT_METRICS_TOKEN = ""
    assert sift_messages() == {}
    assert list(sift_messages(deploy=True)) == ["sift.W005"]


def test_the_worker_runs_the_pipeline_unless_a_test_module_stands_in(settings):
    settings.SIFT_TEST_FETCH_FUNC = ""
    assert seam.fetch_func() is pipeline_bridge.fetch_target
    settings.SIFT_TEST_FETCH_FUNC = "bench.noop.noop"
    assert seam.fetch_func().__module__ == "bench.noop"


@pytest.mark.parametrize(
    "path", ["os.system", "subprocess.run", "batch.pipeline_bridge.fetch_target", "testsuite.x"]
)
def test_a_fetch_function_outside_tests_and_bench_is_never_imported(settings, path):
    settings.SIFT_TEST_FETCH_FUNC = path
    with pytest.raises(ImproperlyConfigured, match="SIFT_TEST_FETCH_FUNC"):
        seam.fetch_func()


def test_manage_py_check_stops_on_a_lease_shorter_than_a_fetch():
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("SIFT_", "DATABASE_URL", "DJANGO_"))}
    result = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "check"],
        cwd=ROOT, env={**environ, "SIFT_BATCH_CLAIM_LEASE": "20s"},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "(sift.E001) SIFT_BATCH_CLAIM_LEASE (20s) does not outlast one fetch" in result.stderr


def test_the_readme_lists_every_setting_that_settings_read():
    source = (ROOT / "sift_site" / "settings.py").read_text()
    read = set(re.findall(r'env_\w+\(\s*"([A-Z0-9_]+)"', source))
    read |= set(re.findall(r'env_secret_key\(\s*"[A-Z_]+",\s*"([A-Z0-9_]+)"', source))
    table = {
        name
        for line in (ROOT / "README.md").read_text().splitlines()
        if line.startswith("| `")
        for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", line.split("|")[1])
    }
    assert len(read) > 40
    assert read - table == set()
