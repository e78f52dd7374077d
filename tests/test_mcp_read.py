"""The MCP tool ``read``: a document sent in base64, read as ``POST /v1/read`` reads it. In-process;
tests/test_mcp.py sends one larger than a request body over real HTTP."""

from __future__ import annotations

import base64
import hashlib

import pytest

from doors.mcp import inputs, tools
from fetch.targets import SITE_OPTIONS
from tests.fixtures import office_writer as ow

pytestmark = pytest.mark.django_db

READ = tools.TOOLS["read"]


def encoded(document: bytes) -> str:
    return base64.b64encode(document).decode()


def test_read_answers_a_slide_deck_with_its_meta_and_content_apart(agent):
    caller, _ = agent
    deck = ow.pptx([("Plan", ["Hire", "Build"], "Keep it short"), ("Dates", ["May"], "")], title="Roadmap")
    outcome = tools.call(READ, caller, {"content": encoded(deck), "pages": "1"})
    assert outcome.ok, outcome
    body = outcome.body
    assert (body["title"], body["pages_total"], body["pages"]) == ("Roadmap", 2, [1])
    assert body["content"] == "## Slide 1: Plan\n\n- Hire\n\n- Build\n\n### Notes\n\nKeep it short"
    assert body["url"] == "sha256:" + hashlib.sha256(deck).hexdigest()
    result = tools.as_result(READ, outcome)
    assert [getattr(block, "text", None) for block in result.content][1] == body["content"]


def test_read_takes_the_media_type_and_name_it_is_given(agent):
    caller, _ = agent
    outcome = tools.call(
        READ, caller, {"content": encoded(b"a\tb\n1\t2\n"), "media_type": "text/tab-separated-values"}
    )
    assert outcome.body["content"] == "| a | b |\n| --- | --- |\n| 1 | 2 |"
    named = tools.call(
        READ, caller, {"content": encoded(b"a,b\n1,2\n"), "name": "t.csv", "media_type": "text/plain"}
    )
    assert named.body["name"] == "t.csv"
    assert named.body["content"].startswith("| a | b |")


@pytest.mark.parametrize("option", SITE_OPTIONS)
def test_read_refuses_the_options_that_need_a_site(agent, option):
    caller, _ = agent
    outcome = tools.call(READ, caller, {"content": encoded(b"hello"), option: True})
    assert outcome.code == "invalid_request"
    assert outcome.body["hint"] == f"Leave {option} out: the document read is the one sent."


def test_read_refuses_content_that_is_not_base64_or_too_large(agent, settings):
    caller, _ = agent
    assert tools.call(READ, caller, {"content": "not base64!"}).code == "invalid_request"
    assert tools.call(READ, caller, {"content": 12}).code == "invalid_request"
    settings.SIFT_UPLOAD_MAX_BYTES = 10
    assert tools.call(READ, caller, {"content": encoded(b"x" * 100)}).code == "too_large"


def test_read_answers_a_hostile_document_with_its_outcome(agent):
    caller, _ = agent
    locked = ow.with_encrypted_member(ow.docx(ow.w_paragraph("secret")), "word/document.xml")
    outcome = tools.call(READ, caller, {"content": encoded(locked)})
    assert outcome.code == "encrypted"
    assert tools.as_result(READ, outcome).is_error


def test_the_read_tool_lists_the_options_but_those_that_need_a_site(settings):
    properties = inputs.read_arguments()["properties"]
    assert {"content", "media_type", "name", "pages", "grep", "cursor"} <= set(properties)
    assert not set(SITE_OPTIONS) & set(properties)
    settings.SIFT_UPLOAD_MAX_BYTES = 12345
    assert "12345 bytes" in inputs.read_description()
