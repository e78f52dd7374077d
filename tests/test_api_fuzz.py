"""schemathesis against /v1/openapi.json: every operation, every check, and the stateful phase.

The app runs in-process through WSGI with a valid key. The guard refuses every address outside
loopback (``SIFT_FETCH_ONLY_ALLOWED`` with only 127.0.0.0/8 and ::1 allowed) and names are never
looked up, so no generated URL can make a request leave this machine. The number of examples is
bounded so that both phases run in well under two minutes.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest
import schemathesis
from django.core import signals
from django.core.serializers.json import DjangoJSONEncoder
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from schemathesis.config import SchemathesisConfig

from batch import waits
from batch.models import ApiKey, BatchJob, hash_key
from doors.rest import api
from fetch import guard

from .factories import LOOPBACK
from .upstream import numeric_resolve

EXAMPLES_PER_OPERATION = 30
STATEFUL_EXAMPLES = 20
DOCUMENTED_5XX = {
    502: ("upstream_4xx", "upstream_5xx"),
    503: ("jobs_busy", "batch_disabled"),
    504: ("timeout",),
}
CALLS: Counter[str] = Counter()
ANSWERS: Counter[tuple[str, str, int]] = Counter()
_JOB_PATH = re.compile(r"^/v1/batch/[0-9a-f]{32}")
# A key made for this test only, so the schema's config can send it on every request.
FUZZ_KEY = "sk_fuzzing-only-" + "x" * 27


class CountingApp:
    """The Django WSGI app, counting requests and keeping the test's database connection open."""

    def __init__(self) -> None:
        self.app = get_wsgi_application()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        CALLS["requests"] += 1
        path = environ.get("PATH_INFO", "")
        kind = "job" if _JOB_PATH.match(path) else path

        def note(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            ANSWERS[environ["REQUEST_METHOD"], kind, int(status.split(maxsplit=1)[0])] += 1
            return start_response(status, headers, exc_info)

        return self.app(environ, note)


@pytest.fixture
def fuzz_caller(transactional_db: None, settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    settings.SIFT_FETCH_ONLY_ALLOWED = True
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    settings.SIFT_FETCH_TIMEOUT = 3
    settings.SIFT_FETCH_CONNECT_TIMEOUT = 1
    settings.SIFT_BATCH_JOBS_PER_CALLER = 10_000
    settings.SIFT_BATCH_JOBS_TOTAL = 10_000
    monkeypatch.setattr(guard, "resolve", numeric_resolve)  # a generated name never reaches DNS
    # No cluster runs here, so a job never finishes and every ?wait= would run to its end.
    real_until_finished = waits.until_finished
    monkeypatch.setattr(
        waits,
        "until_finished",
        lambda caller, job, seconds: real_until_finished(caller, job, min(seconds, 0.1)),
    )
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        ApiKey.objects.create(name="fuzzer", key_sha256=hash_key(FUZZ_KEY))
        yield
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


def fuzz_config() -> SchemathesisConfig:
    return SchemathesisConfig.from_dict(
        {
            # Through the security schemes, not a raw header: an operation with header parameters
            # (POST /v1/batch's Idempotency-Key) would carry a raw one as if generated.
            "auth": {"openapi": {"BatchAuth": {"bearer": FUZZ_KEY}, "KeyAuth": {"bearer": FUZZ_KEY}}},
            "generation": {"mode": "all", "max-examples": EXAMPLES_PER_OPERATION},
            "checks": {
                # 502, 503 and 504 are documented envelopes (an upstream failed, capacity, a timeout);
                # 500 is never acceptable.
                "not_a_server_error": {"expected-statuses": ["2xx", "3xx", "4xx", "502", "503", "504"]},
                # Validation knows more than JSON Schema can say: a grep or jq that does not compile,
                # pages that run backwards, a port out of range. And a fetch of a valid URL can
                # fail upstream (here: always, since nothing outside loopback may be fetched).
                "positive_data_acceptance": {
                    "expected-statuses": [
                        "2xx", "400", "401", "403", "404", "409", "413",
                        "415", "422", "429", "502", "503", "504",
                    ]
                },
                # A body over the request size limit is refused 413 ``too_large`` before it is
                # validated, whatever else is wrong with it.
                "negative_data_rejection": {
                    "expected-statuses": [
                        "400", "401", "403", "404", "405", "406", "409", "413",
                        "415", "422", "428", "429", "5xx",
                    ]
                },
                # DELETE cancels a job; the cancelled job stays readable until its TTL, on purpose.
                "use_after_free": {"enabled": False},
            },
        }
    )  # fmt: skip


def load_schema() -> Any:
    """The schema /v1/openapi.json serves, bound to the app in-process."""
    served = json.loads(json.dumps(api.get_openapi_schema(), cls=DjangoJSONEncoder))
    loaded = schemathesis.openapi.from_dict(served, config=fuzz_config())
    loaded.app = CountingApp()
    return loaded


def assert_no_undocumented_server_error(response: Any) -> None:
    status = response.status_code
    if status < 500:
        return
    assert status in DOCUMENTED_5XX, f"{status}: {response.text[:300]}"
    body = response.json()
    assert body["code"] in DOCUMENTED_5XX[status]
    assert body["hint"]


schema = load_schema()


def test_the_schema_fuzzed_is_the_one_served(client: Any) -> None:
    served = client.get("/v1/openapi.json").json()
    assert served == json.loads(json.dumps(api.get_openapi_schema(), cls=DjangoJSONEncoder))


@schema.parametrize()
@hypothesis_settings(
    max_examples=EXAMPLES_PER_OPERATION, deadline=None, suppress_health_check=list(HealthCheck)
)
@pytest.mark.usefixtures("fuzz_caller")
def test_every_operation_answers_as_its_schema_says(case: Any) -> None:
    response = case.call_and_validate()
    assert_no_undocumented_server_error(response)


@pytest.mark.usefixtures("fuzz_caller")
def test_submitted_jobs_can_be_followed_read_and_cancelled_through_the_links() -> None:
    # The batch endpoints and their links; the monitors' operations, which link to nothing, would
    # only thin out the steps that follow a submit (they are fuzzed one by one above).
    links = schema.exclude(tag="monitors").as_state_machine()
    assert links.bundles, "the schema has no links from a submit to its job"

    class Machine(links):  # type: ignore[misc, valid-type]
        def setup(self) -> None:
            # Every scenario starts with no jobs, so the same steps always get the same answers
            # (a twin from an earlier scenario would turn a 202 into a 200 reused).
            BatchJob.objects.all().delete()

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            assert_no_undocumented_server_error(response)
            super().validate_response(response, case, **kwargs)

    before = CALLS["requests"]
    ANSWERS.clear()
    Machine.run(
        settings=hypothesis_settings(
            max_examples=STATEFUL_EXAMPLES,
            stateful_step_count=6,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
    )
    print(f"stateful phase: {CALLS['requests'] - before} requests")
    assert ANSWERS["POST", "/v1/batch", 202] > 0
    assert ANSWERS["GET", "job", 200] > 0, "no link from a submit was followed to its job"
    assert ANSWERS["DELETE", "job", 200] > 0, "no submitted job was cancelled through its link"


@pytest.fixture(scope="module", autouse=True)
def report_the_number_of_requests() -> Iterator[None]:
    yield
    print(f"\nschemathesis sent {CALLS['requests']} requests in all")
