"""``/v1/openapi.json``: request schemas made from ``fetch.options``, limits from the settings of now."""

from __future__ import annotations

from typing import Any

import pytest

from doors.option_schemas import nullable, url_schema
from doors.rest.schemas import BODY_ONLY
from fetch.options import option_schemas

pytestmark = pytest.mark.django_db


def document(client: Any) -> dict[str, Any]:
    response = client.get("/v1/openapi.json")
    assert response.status_code == 200
    return response.json()


def body_schema(served: dict[str, Any], path: str) -> dict[str, Any]:
    ref = served["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    return served["components"]["schemas"][ref.rsplit("/", 1)[-1]]


def untitled(schema: dict[str, Any]) -> dict[str, Any]:
    """A query parameter's schema without the title django-ninja gives it."""
    return {key: value for key, value in schema.items() if key != "title"}


def test_each_option_is_described_once_for_a_batch_target_a_posted_fetch_and_a_fetch_query(client):
    served = document(client)
    options = {name: nullable(schema) for name, schema in option_schemas().items()}
    batch_target = body_schema(served, "/v1/batch")["properties"]["targets"]["items"]["anyOf"][1]
    assert batch_target["properties"]["options"]["anyOf"][0]["properties"] == options
    assert batch_target["properties"]["url"] == url_schema()
    posted = body_schema(served, "/v1/fetch")["properties"]
    assert posted["options"]["anyOf"][0]["properties"] == options
    parameters = {p["name"]: untitled(p["schema"]) for p in served["paths"]["/v1/fetch"]["get"]["parameters"]}
    in_a_query = {name: schema for name, schema in option_schemas().items() if name not in BODY_ONLY}
    assert parameters == {"url": url_schema(), **in_a_query}
    assert {"actions"} == BODY_ONLY  # a list, taken in a JSON body only


def test_text_options_carry_their_limits_and_pages_its_pattern_in_the_document(client):
    parameters = {p["name"]: p["schema"] for p in document(client)["paths"]["/v1/fetch"]["get"]["parameters"]}
    assert [parameters[name]["maxLength"] for name in ("question", "pages", "grep", "jq")] == [
        2000,
        200,
        1000,
        4000,
    ]
    assert parameters["pages"]["pattern"] == r"^[0-9,\-\s]+$"


def test_max_age_is_an_integer_of_seconds_and_every_fetch_answer_says_cache_and_age(client):
    served = document(client)
    parameters = {p["name"]: p["schema"] for p in served["paths"]["/v1/fetch"]["get"]["parameters"]}
    assert (parameters["max_age"]["type"], parameters["max_age"]["minimum"]) == ("integer", 0)
    envelope = served["components"]["schemas"]["FetchEnvelope"]
    assert envelope["properties"]["cache"]["enum"] == ["miss", "hit", "revalidated", "stale"]
    assert envelope["properties"]["age"]["type"] == "integer"
    assert {"cache", "age", "cached", "stale"} <= set(envelope["required"])


def test_render_auto_images_and_hidden_are_options_and_the_answer_says_what_hidden_text_went(client):
    served = document(client)
    parameters = {p["name"]: p["schema"] for p in served["paths"]["/v1/fetch"]["get"]["parameters"]}
    assert {"type": "string", "enum": ["auto"]} in parameters["render"]["anyOf"]
    assert parameters["images"]["type"] == "boolean"
    assert parameters["hidden"]["enum"] == ["drop", "keep"]
    envelope = served["components"]["schemas"]["FetchEnvelope"]["properties"]
    assert {"hidden_chars", "hidden_kept", "rendered"} <= set(envelope)
    assert "422" in served["paths"]["/v1/fetch"]["get"]["responses"]


def test_the_targets_a_job_may_hold_follow_the_setting_each_time_the_document_is_asked(client, settings):
    settings.SIFT_BATCH_TARGETS_PER_JOB = 5
    served = document(client)
    targets = body_schema(served, "/v1/batch")["properties"]["targets"]
    assert (targets["minItems"], targets["maxItems"]) == (1, 5)
    assert "1 to 5." in targets["description"]
    assert "at most 5" in served["paths"]["/v1/batch"]["post"]["responses"]["400"]["description"]
    settings.SIFT_BATCH_TARGETS_PER_JOB = 40
    assert body_schema(document(client), "/v1/batch")["properties"]["targets"]["maxItems"] == 40


@pytest.mark.parametrize(("jobs", "words"), [(1, "hold 1 live job,"), (3, "hold 3 live jobs,")])
def test_the_busy_answer_of_a_submit_names_the_live_jobs_a_caller_may_hold(client, settings, jobs, words):
    settings.SIFT_BATCH_JOBS_PER_CALLER = jobs
    busy = document(client)["paths"]["/v1/batch"]["post"]["responses"]["429"]["description"]
    assert busy.startswith("caller_busy")
    assert words in busy
