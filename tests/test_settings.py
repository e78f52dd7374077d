"""Settings come from the environment through typed readers that refuse malformed values.

Every setting is in the README's configuration table.
"""

from __future__ import annotations

import http.client
import ipaddress
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from sift_site import env

from .deployment import ROOT, free_port, spawn_procfile, wait_for


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
        (lambda: env.env_duration("SIFT_X", "1s", positive=True), "0s"),
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


def test_a_zero_timeout_is_refused_at_start_up_with_what_is_expected():
    """A resolve timeout of nothing refused every callback; a fetch timeout of nothing, every fetch."""
    for name in ("SIFT_WEBHOOK_RESOLVE_TIMEOUT", "SIFT_FETCH_TIMEOUT", "SIFT_BATCH_TTL"):
        result = _print_setting(f"settings.{name}", **{name: "0s"})
        assert result.returncode != 0
        assert f"{name}='0s' is not valid: expected a duration longer than zero" in result.stderr


def test_allowed_networks_parse_as_networks(monkeypatch):
    monkeypatch.setenv("SIFT_X", "127.0.0.0/8, ::1")
    assert env.env_networks("SIFT_X") == (
        ipaddress.ip_network("127.0.0.0/8"),
        ipaddress.ip_network("::1/128"),
    )


def _manage(
    *args: str, cwd: Path | str | None = None, **environ: str | None
) -> subprocess.CompletedProcess[str]:
    """``manage.py *args`` in a fresh process; ``NAME=None`` unsets a variable."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SIFT_", "DATABASE_URL", "DJANGO_"))}
    clean.update({k: v for k, v in environ.items() if v is not None})
    for name in (k for k, v in environ.items() if v is None):
        clean.pop(name, None)
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args], cwd=cwd or ROOT, env=clean,
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _print_setting(expression: str, **environ: str | None) -> subprocess.CompletedProcess[str]:
    return _manage("shell", "-c", f"from django.conf import settings; print({expression})", **environ)


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
        SIFT_METRICS_TOKEN="a-scrape-token-for-prometheus",
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


# --- SECRET_KEY --------------------------------------------------------------------------------

STRONG_KEY = "k3y-from-a-file-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGH"
OLD_CONSTANT = "django-insecure-sift-development-key-set-SECRET_KEY-in-production"


@pytest.mark.parametrize("debug", ["false", "true"])
def test_start_up_refuses_without_a_key_in_the_environment_or_a_file(tmp_path, debug):
    result = _manage("check", SECRET_KEY=None, SECRET_KEY_FILE=str(tmp_path / "missing"), DEBUG=debug)
    assert result.returncode != 0
    assert "ImproperlyConfigured: no secret key: SECRET_KEY is not set" in result.stderr
    assert str(tmp_path / "missing") in result.stderr
    assert "make secret-key" in result.stderr


def test_the_key_file_is_used_when_no_key_is_in_the_environment(tmp_path):
    (tmp_path / "key").write_text(STRONG_KEY + "\n")
    result = _print_setting("settings.SECRET_KEY", SECRET_KEY=None, SECRET_KEY_FILE=str(tmp_path / "key"))
    assert result.stdout.strip().splitlines()[-1] == STRONG_KEY, result.stderr


def test_a_key_in_the_environment_wins_over_the_file(tmp_path):
    (tmp_path / "key").write_text(STRONG_KEY)
    from_env = "env-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJKLMNOPQRS"
    result = _print_setting("settings.SECRET_KEY", SECRET_KEY=from_env, SECRET_KEY_FILE=str(tmp_path / "key"))
    assert result.stdout.strip().splitlines()[-1] == from_env, result.stderr


def test_a_relative_key_file_is_found_from_the_checkout_not_the_working_directory(tmp_path):
    # gunicorn, qcluster and commands may start anywhere; all of them must read the same file.
    (tmp_path / "key").write_text(STRONG_KEY)
    relative = os.path.relpath(tmp_path / "key", ROOT)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = _manage(
        "shell", "-c", "from django.conf import settings; print(settings.SECRET_KEY)",
        cwd=elsewhere, SECRET_KEY=None, SECRET_KEY_FILE=relative,
    )  # fmt: skip
    assert result.stdout.strip().splitlines()[-1] == STRONG_KEY, result.stderr


SIGNER = "from django_q.signing import SignedPackage as P; "


def test_processes_started_from_different_directories_share_signed_task_payloads(tmp_path):
    # django-q2 signs what web puts in the queue and the cluster checks it with the same key.
    (tmp_path / "key").write_text(STRONG_KEY)
    env = {"SECRET_KEY": None, "SECRET_KEY_FILE": str(tmp_path / "key")}
    signed = _manage("shell", "-c", SIGNER + "print(P.dumps({'n': 7}))", **env)
    package = signed.stdout.strip().splitlines()[-1]
    loaded = _manage("shell", "-c", SIGNER + f"print(P.loads({package!r}))", cwd=tmp_path, **env)
    assert loaded.stdout.strip().splitlines()[-1] == "{'n': 7}", loaded.stderr
    (tmp_path / "key").write_text(STRONG_KEY[::-1])
    forged = _manage("shell", "-c", SIGNER + f"P.loads({package!r})", **env)
    assert "BadSignature" in forged.stderr


def test_the_test_servers_sign_with_the_key_of_the_test_process(tmp_path):
    # tests/deployment.py starts gunicorn and qcluster with its own environment from the checkout.
    from django.conf import settings

    from .deployment import ROOT as DEPLOYMENT_ROOT
    from .deployment import Deployment

    show_key = "from django.conf import settings; print(settings.SECRET_KEY)"
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", show_key],
        cwd=DEPLOYMENT_ROOT, env=Deployment(tmp_path, {}).env,
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.stdout.strip().splitlines()[-1] == settings.SECRET_KEY, result.stderr


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "weak secret key (0 characters"),
        (b"\n  \n", "weak secret key (0 characters"),
        (b"short-but-secret", "weak secret key (16 characters"),
        (b"ab" * 40, "weak secret key (80 characters"),
        (OLD_CONSTANT.encode(), "weak secret key"),
        (b"\xff\xfe" + STRONG_KEY.encode(), "cannot be read (UnicodeDecodeError)"),
    ],
)
def test_a_key_file_that_is_empty_short_or_not_text_is_refused(tmp_path, content, reason):
    (tmp_path / "key").write_bytes(content)
    result = _manage("check", SECRET_KEY=None, SECRET_KEY_FILE=str(tmp_path / "key"))
    assert result.returncode != 0
    assert reason in result.stderr
    assert "SECRET_KEY" in result.stderr
    if content.strip():
        assert content.decode(errors="ignore").strip()[:12] not in result.stderr  # the key is never echoed


def test_a_key_file_that_cannot_be_read_is_refused(tmp_path):
    # A directory where the file should be: reading it fails like a file without permission.
    (tmp_path / "key").mkdir()
    result = _manage("check", SECRET_KEY=None, SECRET_KEY_FILE=str(tmp_path / "key"))
    assert result.returncode != 0
    assert f"the secret key file {tmp_path / 'key'} cannot be read (IsADirectoryError)" in result.stderr


@pytest.mark.parametrize("key", ["too-short-a-key", OLD_CONSTANT, "a" * 60])
def test_a_weak_key_in_the_environment_is_refused_without_echoing_it(key):
    result = _manage("check", SECRET_KEY=key)
    assert result.returncode != 0
    assert "SECRET_KEY holds a weak secret key" in result.stderr
    assert key not in result.stderr


def test_make_secret_key_writes_a_private_random_key_once(tmp_path):
    target = tmp_path / "var" / "secret_key"
    make = ["make", "--no-print-directory", "-C", str(ROOT), "secret-key", f"SECRET_KEY_FILE={target}"]
    subprocess.run(make, check=True, capture_output=True, timeout=60)
    first = target.read_text()
    assert len(first.strip()) >= 50
    assert target.stat().st_mode & 0o777 == 0o600
    subprocess.run(make, check=True, capture_output=True, timeout=60)
    assert target.read_text() == first
    other = tmp_path / "other"
    subprocess.run([*make[:-1], f"SECRET_KEY_FILE={other}"], check=True, capture_output=True, timeout=60)
    assert other.read_text() != first
    result = _print_setting("len(settings.SECRET_KEY)", SECRET_KEY=None, SECRET_KEY_FILE=str(target))
    assert int(result.stdout.strip().splitlines()[-1]) == len(first.strip())


# --- metrics token and proxy -------------------------------------------------------------------


@pytest.mark.parametrize("token", ["short", "a token with spaces in it", "tøken-0123456789-abcdef"])
def test_a_malformed_metrics_token_stops_start_up_without_echoing_it(token):
    result = _manage("check", SIFT_METRICS_TOKEN=token)
    assert result.returncode != 0
    assert "SIFT_METRICS_TOKEN is not valid" in result.stderr
    assert token not in result.stderr


FORGED_HTTPS = (
    "settings.SECURE_PROXY_SSL_HEADER, __import__('django.test').test.RequestFactory()"
    ".get('/', headers={'X-Forwarded-Proto': 'https'}).is_secure()"
)


@pytest.mark.parametrize(("behind_proxy", "secure"), [(None, "False"), ("false", "False"), ("true", "True")])
def test_x_forwarded_proto_is_trusted_only_behind_a_declared_proxy(behind_proxy, secure):
    result = _print_setting(FORGED_HTTPS, SIFT_BEHIND_PROXY=behind_proxy)
    assert result.stdout.strip().splitlines()[-1].endswith(f" {secure}"), result.stderr


def _forged_https_status(port: int) -> int | None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", "/v1/openapi.json", headers={"X-Forwarded-Proto": "https"})
        return connection.getresponse().status
    except OSError:
        return None
    finally:
        connection.close()


@pytest.mark.parametrize(("behind_proxy", "status"), [("false", 301), ("true", 200)])
def test_the_procfile_web_server_believes_x_forwarded_proto_only_behind_a_declared_proxy(
    tmp_path, behind_proxy, status
):
    # gunicorn itself trusts the header from loopback peers unless told not to; then only Django
    # decides, and SECURE_SSL_REDIRECT shows whether the request passed for HTTPS.
    port = free_port()
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SIFT_", "DATABASE_URL", "DJANGO_"))}
    env = {
        **clean,
        "PORT": str(port),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "SECURE_SSL_REDIRECT": "true",
        "SIFT_BEHIND_PROXY": behind_proxy,
    }
    web = spawn_procfile("web", env, tmp_path / "web.log")
    try:
        answered = wait_for(lambda: _forged_https_status(port), timeout=60, what="the Procfile's gunicorn")
        assert answered == status, (tmp_path / "web.log").read_text()
    finally:
        os.killpg(web.pid, signal.SIGTERM)
        web.wait(30)
