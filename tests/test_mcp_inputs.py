"""``doors.mcp.inputs``: the MCP tools take what the OpenAPI document describes, and say the limits
the settings set now. In-process; tests/test_mcp.py drives the tools over real HTTP."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from batch.errors import Refused
from doors.mcp import server, tools
from fetch.options import option_schemas

pytestmark = pytest.mark.django_db

URL = "https://example.org/a"


def openapi(client: Any) -> dict[str, Any]:
    return client.get("/v1/openapi.json").json()


def untitled(schema: dict[str, Any]) -> dict[str, Any]:
    """A schema without the title django-ninja and pydantic give a field."""
    return {key: value for key, value in schema.items() if key != "title"}


def test_the_fetch_tool_takes_the_url_and_options_of_get_v1_fetch(client):
    parameters = openapi(client)["paths"]["/v1/fetch"]["get"]["parameters"]
    described = {p["name"]: untitled(p["schema"]) for p in parameters}
    schema = tools.TOOLS["fetch"].input_schema
    assert schema["properties"] == described
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


def test_an_over_long_question_or_unreadable_pages_are_refused_by_the_fetch_tools_schema():
    fetch = tools.TOOLS["fetch"]
    with pytest.raises(Refused) as long_question:
        tools.check_arguments(fetch, {"url": URL, "question": "why " * 600})
    assert long_question.value.code == "invalid_request"
    assert long_question.value.message.startswith("question: 'why why")
    assert long_question.value.message.endswith("... is too long")
    assert len(long_question.value.message) < 120
    with pytest.raises(Refused) as pages:
        tools.check_arguments(fetch, {"url": URL, "pages": "one"})
    assert pages.value.details == [{"field": "pages", "message": pages.value.message.removeprefix("pages: ")}]


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
