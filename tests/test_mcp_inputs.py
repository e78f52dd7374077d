"""``doors.mcp.inputs``: the MCP tools take what the OpenAPI document describes, and say the limits
the settings set now. In-process; tests/test_mcp.py drives the tools over real HTTP."""

from __future__ import annotations

from typing import Any
from unittest.mock import ANY

import anyio
import pytest

from batch.errors import Refused
from doors.mcp import inputs, server, tools
from fetch.options import option_schemas

pytestmark = pytest.mark.django_db

URL = "https://example.org/a"
JOB_ID = "0" * 32


def openapi(client: Any) -> dict[str, Any]:
    return client.get("/v1/openapi.json").json()


def untitled(schema: dict[str, Any]) -> dict[str, Any]:
    """A schema without the title django-ninja and pydantic give a field."""
    return {key: value for key, value in schema.items() if key != "title"}


def test_the_fetch_tool_takes_the_url_and_options_of_get_v1_fetch_and_actions(client):
    parameters = openapi(client)["paths"]["/v1/fetch"]["get"]["parameters"]
    described = {p["name"]: untitled(p["schema"]) for p in parameters}
    schema = tools.TOOLS["fetch"].input_schema
    assert schema["properties"] == {**described, "actions": option_schemas()["actions"]}
    assert schema["required"] == ["url"]
    assert schema["additionalProperties"] is False


def test_the_fetch_tool_carries_the_limits_and_the_pages_pattern_of_the_options(client):
    properties = tools.TOOLS["fetch"].input_schema["properties"]
    for name, option in option_schemas().items():
        assert properties[name] == option
    assert properties["jq"]["maxLength"] == 4000
    assert properties["pages"]["pattern"] == r"^[0-9,\-\s]+$"


def test_batch_submit_takes_the_targets_of_post_v1_batch(client):
    submit = openapi(client)["components"]["schemas"]["SubmitIn"]["properties"]
    assert tools.TOOLS["batch_submit"].input_schema["properties"]["targets"] == untitled(submit["targets"])


def test_an_over_long_question_or_unreadable_pages_are_refused_naming_the_argument_in_the_rest_apis_words():
    fetch = tools.TOOLS["fetch"]
    with pytest.raises(Refused) as long_question:
        tools.check_arguments(fetch, {"url": URL, "question": "why " * 600})
    assert long_question.value.code == "invalid_request"
    assert long_question.value.message == "question: question is longer than 2000 characters"
    assert long_question.value.hint == "Shorten question to at most 2000 characters."
    with pytest.raises(Refused) as pages:
        tools.check_arguments(fetch, {"url": URL, "pages": "one"})
    assert pages.value.details == [{"field": "pages", "message": pages.value.message.removeprefix("pages: ")}]
    assert pages.value.message == "pages: cannot read page range 'one'"


def listed() -> dict[str, Any]:
    async def list_tools() -> Any:
        return await server.list_tools(None, None)

    return {tool.name: tool for tool in anyio.run(list_tools).tools}


def test_listed_descriptions_and_schemas_follow_the_targets_and_jobs_settings(settings):
    settings.SIFT_BATCH_TARGETS_PER_JOB, settings.SIFT_BATCH_JOBS_PER_CALLER = 32, 1
    before = listed()["batch_submit"]
    assert "Queue up to 32 URLs" in before.description
    assert "only one live job at a time" in before.description
    assert before.input_schema["properties"]["targets"]["maxItems"] == 32
    settings.SIFT_BATCH_TARGETS_PER_JOB, settings.SIFT_BATCH_JOBS_PER_CALLER = 5, 3
    after = listed()["batch_submit"]
    assert "Queue up to 5 URLs" in after.description
    assert "You may hold 3 live jobs at a time" in after.description
    assert "32" not in after.description
    assert after.input_schema["properties"]["targets"]["maxItems"] == 5
    assert "1 to 5." in after.input_schema["properties"]["targets"]["description"]


def test_the_fetch_tools_description_names_the_fetches_a_caller_may_have_in_flight(settings):
    settings.SIFT_FETCH_PER_CALLER = 7
    assert "At most 7 of your fetches run at once" in listed()["fetch"].description


def test_more_targets_than_the_setting_allows_are_refused_too_many_targets_not_by_the_schema(agent, settings):
    settings.SIFT_BATCH_TARGETS_PER_JOB = 2
    caller, _ = agent
    outcome = tools.call(tools.TOOLS["batch_submit"], caller, {"targets": [URL, URL + "b", URL + "c"]})
    assert outcome.code == "too_many_targets"
    assert "more than the 2 a job may hold" in outcome.body["error"]
    empty = tools.call(tools.TOOLS["batch_submit"], caller, {"targets": []})
    assert empty.code == "no_targets"


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("batch_get", {}, "id"),
        ("batch_get", {"id": "not-a-job"}, "id"),
        ("batch_get", {"id": JOB_ID, "wait": True}, "wait"),
        ("batch_get", {"id": JOB_ID, "wait": "5"}, "wait"),
        ("batch_get", {"id": JOB_ID, "wait": 61}, "wait"),
        ("batch_get", {"id": JOB_ID, "content": 1}, "content"),
        ("batch_cancel", {"id": JOB_ID, "reason": "done"}, "reason"),
        ("batch_list", {"limit": 0}, "limit"),
        ("batch_list", {"offset": 1.0}, "offset"),
        ("batch_submit", {"targets": URL}, "targets"),
        ("batch_submit", {"targets": [URL], "idempotency_key": 5}, "idempotency_key"),
        ("batch_submit", {"targets": [URL], "callback_url": ""}, "callback_url"),
    ],
)
def test_an_argument_beside_the_options_is_refused_by_its_tools_model_naming_it(tool, arguments, field):
    with pytest.raises(Refused) as refused:
        tools.check_arguments(tools.TOOLS[tool], arguments)
    assert refused.value.code == "invalid_request"
    assert refused.value.details[0]["field"] == field
    assert refused.value.message.startswith(f"{field}: ")
    assert refused.value.hint == tools.ARGUMENTS_HINT


@pytest.mark.parametrize(
    ("tool", "arguments", "field", "message"),
    [
        ("fetch", {"mode": "text"}, "url", "url must be a non-empty string"),
        ("fetch", {"url": URL, "offset": 5}, "offset", "offset needs version"),
        (
            "fetch",
            {"url": URL, "max_age": True},
            "max_age",
            "max_age must be a whole number from 0 to 2147483647",
        ),
        ("fetch", {"url": URL, "q\ud800": 1}, "q\\ud800", "unknown option 'q\\\\ud800'"),
        ("fetch", {"url": URL, "jq": ".["}, "jq", "jq does not compile"),
        ("map", {"url": URL, "limit": True}, "limit", "limit must be a whole number from 1 to 10000"),
        ("map", {"url": URL, "search": "a\x00"}, "search", "search holds a NUL character"),
        ("map", {"url": URL, "crawl": True}, "crawl", "unknown option 'crawl'"),
    ],
)
def test_a_target_or_map_option_is_refused_as_rest_refuses_it_named_as_the_argument(
    tool, arguments, field, message
):
    with pytest.raises(Refused) as refused:
        tools.check_arguments(tools.TOOLS[tool], arguments)
    assert refused.value.code == "invalid_request"
    assert refused.value.details[0]["field"] == field
    assert refused.value.message.startswith(f"{field}: {message}")


def test_checked_arguments_take_their_defaults_and_a_null_is_not_given():
    assert tools.check_arguments(tools.TOOLS["batch_get"], {"id": JOB_ID, "wait": None}) == {
        "id": JOB_ID,
        "wait": 0,
        "content": True,
    }
    assert tools.check_arguments(tools.TOOLS["batch_list"], {"limit": None, "offset": 5}) == {
        "limit": 20,
        "offset": 5,
    }
    target = tools.check_arguments(tools.TOOLS["fetch"], {"url": URL, "mode": None, "grep": "tide"})
    assert target.to_dict() == {"url": URL, "options": {"grep": "tide"}}


def test_the_job_tools_take_the_bounds_of_the_rest_apis_parameters(client):
    paths = openapi(client)["paths"]
    get = {p["name"]: p["schema"] for p in paths["/v1/batch/{job_id}"]["get"]["parameters"]}
    listed = {p["name"]: p["schema"] for p in paths["/v1/batch"]["get"]["parameters"]}
    bounds = ("type", "minimum", "maximum", "default")
    for tool, name, rest in [
        ("batch_get", "wait", get),
        ("batch_list", "limit", listed),
        ("batch_list", "offset", listed),
    ]:
        argument = tools.TOOLS[tool].input_schema["properties"][name]
        assert {k: argument[k] for k in bounds} == {k: rest[name][k] for k in bounds}
    assert tools.TOOLS["batch_get"].input_schema["properties"]["id"]["pattern"] == get["job_id"]["pattern"]
    assert tools.TOOLS["batch_get"].input_schema == {
        "type": "object",
        "properties": {
            "id": {
                "type": "string",
                "pattern": get["job_id"]["pattern"],
                "description": inputs.JOB_ID_DESCRIPTION,
            },
            "wait": {"type": "integer", "minimum": 0, "maximum": 60, "default": 0, "description": ANY},
            "content": {"type": "boolean", "default": True, "description": ANY},
        },
        "required": ["id"],
        "additionalProperties": False,
    }
