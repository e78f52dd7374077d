"""Settings come from the environment through typed readers that refuse malformed values (SPEC §7)."""

from __future__ import annotations

import ipaddress
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from sift_site import env

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("raw", "seconds"), [("90s", 90), ("10m", 600), ("24h", 86400), ("2", 2), ("1.5s", 1.5)]
)
def test_durations_accept_seconds_minutes_and_hours(monkeypatch, raw, seconds):
    monkeypatch.setenv("SIFT_X", raw)
    assert env.env_duration("SIFT_X", "1s") == seconds


@pytest.mark.parametrize(
    ("raw", "size"), [("20MiB", 20 * 1024**2), ("64 MB", 64_000_000), ("1048576", 1048576)]
)
def test_sizes_accept_units(monkeypatch, raw, size):
    monkeypatch.setenv("SIFT_X", raw)
    assert env.env_bytes("SIFT_X", "1") == size


@pytest.mark.parametrize(
    ("raw", "value"), [("false", False), ("0", False), ("no", False), ("TRUE", True), ("on", True)]
)
def test_booleans_read_false_as_false(monkeypatch, raw, value):
    monkeypatch.setenv("SIFT_X", raw)
    assert env.env_bool("SIFT_X", not value) is value


@pytest.mark.parametrize(
    ("reader", "raw"),
    [
        (lambda: env.env_duration("SIFT_X", "1s"), "10 minutes"),
        (lambda: env.env_bytes("SIFT_X", "1"), "lots"),
        (lambda: env.env_bool("SIFT_X", True), "maybe"),
        (lambda: env.env_int("SIFT_X", 1, minimum=1), "0"),
        (lambda: env.env_int("SIFT_X", 1), "1.5"),
        (lambda: env.env_ports("SIFT_X", "80"), "80,http"),
        (lambda: env.env_networks("SIFT_X"), "127.0.0.0/33"),
    ],
)
def test_malformed_values_name_the_variable(monkeypatch, reader, raw):
    monkeypatch.setenv("SIFT_X", raw)
    with pytest.raises(ImproperlyConfigured, match="SIFT_X"):
        reader()


def test_allowed_networks_parse_as_networks(monkeypatch):
    monkeypatch.setenv("SIFT_X", "127.0.0.0/8, ::1")
    assert env.env_networks("SIFT_X") == (
        ipaddress.ip_network("127.0.0.0/8"),
        ipaddress.ip_network("::1/128"),
    )


def _manage(*args: str, **environ: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SIFT_", "DATABASE_URL", "DJANGO_"))}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env={**clean, **environ},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_a_malformed_setting_stops_start_up_naming_the_variable():
    result = _manage("check", SIFT_BATCH_TTL="a day")
    assert result.returncode != 0
    assert "SIFT_BATCH_TTL='a day' is not valid" in result.stderr


def test_workers_above_two_are_clamped_to_two():
    result = _manage(
        "shell",
        "-c",
        "from django.conf import settings; print(settings.SIFT_BATCH_WORKERS)",
        SIFT_BATCH_WORKERS="5",
    )
    assert result.stdout.strip().splitlines()[-1] == "2"


def test_check_deploy_passes_with_production_settings():
    result = _manage(
        "check", "--deploy", "--fail-level", "WARNING",
        SECRET_KEY="x" * 20 + "a-long-random-production-secret-key-0123456789",
        ALLOWED_HOSTS="sift.example.org", SECURE_SSL_REDIRECT="true", SECURE_HSTS_SECONDS="31536000",
        SECURE_HSTS_INCLUDE_SUBDOMAINS="true", SECURE_HSTS_PRELOAD="true",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


def test_check_deploy_without_tls_settings_reports_only_the_documented_warnings():
    result = _manage(
        "check",
        "--deploy",
        SECRET_KEY="production-Secret-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFG",
        ALLOWED_HOSTS="sift.internal",
    )
    reported = set(re.findall(r"\(security\.(W\d+)\)", result.stderr))
    # docs/operations.md: TLS is terminated in front of sift; these follow from leaving HSTS/redirect off.
    assert reported <= {"W004", "W008"}


@pytest.mark.parametrize(("status", "logged"), [(429, False), (503, False), (500, True), (404, True)])
def test_back_pressure_answers_are_not_logged_as_errors(status, logged):
    import logging

    console = next(h for h in logging.getLogger().handlers if h.name == "console")
    record = logging.LogRecord("django.request", logging.ERROR, __file__, 1, "Unavailable", None, None)
    record.status_code = status
    assert bool(console.filter(record)) is logged
