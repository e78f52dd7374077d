"""/metrics asks for SIFT_METRICS_TOKEN as a bearer token when one is set, and is open otherwise."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from .deployment import Deployment

TOKEN = "scrape-0123456789-abcdefghijklmnop"


@pytest.fixture
def guarded(settings):
    settings.SIFT_METRICS_TOKEN = TOKEN


def _scrape(client, authorization: str | None):
    headers = {"Authorization": authorization} if authorization is not None else {}
    return client.get("/metrics", headers=headers)


def _assert_refused(response) -> None:
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    body = response.json()
    assert body["code"] == "unauthorized"
    assert "SIFT_METRICS_TOKEN" in body["hint"]
    assert TOKEN not in response.content.decode()
    assert "sift_batch_queue_depth" not in response.content.decode()


def test_metrics_are_open_when_no_token_is_set(db, client, settings):
    settings.SIFT_METRICS_TOKEN = ""
    response = _scrape(client, None)
    assert response.status_code == 200
    assert "sift_batch_queue_depth" in response.content.decode()


def test_the_right_token_reads_the_metrics(db, client, guarded):
    response = _scrape(client, f"Bearer {TOKEN}")
    assert response.status_code == 200
    assert "sift_batch_queue_depth" in response.content.decode()


def test_the_bearer_scheme_is_case_insensitive(db, client, guarded):
    assert _scrape(client, f"bearer {TOKEN}").status_code == 200


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        f"Bearer {TOKEN}x",
        f"Bearer {TOKEN[:-1]}",
        f"Basic {TOKEN}",
        TOKEN,
        f"Bearer {TOKEN.upper()}",
    ],
)
def test_a_missing_or_wrong_token_is_refused_with_401(db, client, guarded, authorization):
    _assert_refused(_scrape(client, authorization))


def test_an_api_key_is_not_a_metrics_token(client, guarded, agent):
    _, api = agent
    _assert_refused(api.client.get("/metrics", headers=api.headers))


@hypothesis_settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(authorization=st.text(max_size=80) | st.text(max_size=80).map(lambda tail: f"Bearer {tail}"))
def test_any_other_authorization_header_is_a_401_and_never_a_500(db, client, guarded, authorization):
    assume(TOKEN not in authorization)
    _assert_refused(_scrape(client, authorization))


@pytest.mark.django_db(transaction=True)
def test_gunicorn_reads_the_token_from_the_environment(tmp_path):
    deployment = Deployment(tmp_path, {"SIFT_METRICS_TOKEN": TOKEN})
    try:
        deployment.start_web(workers=1)
        status, body, headers = deployment.request("/metrics")
        assert (status, headers["WWW-Authenticate"]) == (401, 'Bearer realm="metrics"')
        assert b"sift_batch_queue_depth" not in body
        status, body, _ = deployment.request("/metrics", key=TOKEN)
        assert status == 200
        assert b"sift_batch_queue_depth" in body
    finally:
        deployment.stop_all()
