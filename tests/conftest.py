"""Fixtures shared by the whole suite: callers with keys, and an authenticated API client."""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.apps import apps
from django.conf import settings
from django.test import override_settings

from batch.models import ApiKey, SubmitLock

from .factories import ApiClient, MakeCaller

ROWS_MIGRATION = importlib.import_module("batch.migrations.0002_rows_and_schedules")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Under CI=true the browser tests must run: a missing Chromium fails the suite, not skips it."""
    chromium = settings.SIFT_RENDER_CHROMIUM
    if os.environ.get("CI") == "true" and not os.access(chromium, os.X_OK):
        pytest.exit(f"CI=true but {chromium} is missing: apt-get install -y chromium-headless-shell", 1)


@pytest.fixture(autouse=True, scope="session")
def fetch_only_allowed(django_test_environment: None) -> Iterator[None]:
    """Nothing a test fetches may leave this machine: the guard refuses every address outside
    ``SIFT_FETCH_ALLOW_CIDRS`` (loopback in the tests that serve pages), public ones included."""
    with override_settings(SIFT_FETCH_ONLY_ALLOWED=True):
        yield


@pytest.fixture(autouse=True, scope="session")
def render_process_of_this_session(django_test_environment: None) -> Iterator[None]:
    """A render process of this test process's own (the machine's one is shared by every
    process): two pytest workers, or a running ``make run``, never kill or count each other's.
    Deployments hand the same socket to their processes (tests/deployment.py)."""
    from fetch.render import server_process

    folder = Path(tempfile.mkdtemp(prefix="sift-render-"))
    with override_settings(SIFT_RENDER_SOCKET=str(folder / "render.sock")):
        yield
        server_process.stop_server()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def browser_start_with_room(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A browser test's render in this process may wait longer for the browser to start than a
    deployment's: the suite's other worker can hold both cores while Chromium launches (a first
    render once took past the 15 s of ``START_SECONDS`` under CI's load). The render's own
    deadline is unchanged, and tests of the start's bound set their own."""
    if request.node.get_closest_marker("browser") is None:
        return
    from fetch.render import renderer

    monkeypatch.setattr(renderer, "START_SECONDS", 45.0)


@pytest.fixture(autouse=True)
def rows_made_by_migrations(request: pytest.FixtureRequest) -> None:
    """The rows a data migration makes (the submit lock, the worker slots, the schedules), in
    every test that uses the database: pytest-django empties every table after a
    ``transaction=True`` test, and the next test would find them gone."""
    if "_django_db_helper" not in request.fixturenames and not request.node.get_closest_marker("django_db"):
        return
    request.getfixturevalue("_django_db_helper")
    if not SubmitLock.objects.exists():
        ROWS_MIGRATION.create_rows(apps, None)


@pytest.fixture
def make_caller(db: None) -> MakeCaller:
    """``make_caller("name", caller_class="restricted")`` → (ApiKey, ApiClient for that key)."""

    def make(
        name: str = "agent", *, caller_class: str = "fleet", workspace: str = ""
    ) -> tuple[ApiKey, ApiClient]:
        api_key, raw_key = ApiKey.issue(name, workspace=workspace, caller_class=caller_class)
        return api_key, ApiClient(raw_key)

    return make


@pytest.fixture
def agent(make_caller: MakeCaller) -> tuple[ApiKey, ApiClient]:
    return make_caller("agent")


def uses_database(item: pytest.Item) -> bool:
    """Whether a test reaches a database: through pytest-django's fixtures or its marker. One
    that does not cannot tell SQLite from PostgreSQL (pytest-django refuses it the connection)."""
    return "_django_db_helper" in getattr(item, "fixturenames", ()) or bool(
        item.get_closest_marker("django_db")
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``SIFT_TESTS_DATABASE_ONLY=true`` runs only what a database can change, and the browser
    tests: CI runs the rest of the suite once, on SQLite, and this on PostgreSQL."""
    if os.environ.get("SIFT_TESTS_DATABASE_ONLY") != "true":
        return
    kept = [item for item in items if uses_database(item) or item.get_closest_marker("browser")]
    config.hook.pytest_deselected(items=[item for item in items if item not in kept])
    items[:] = kept
