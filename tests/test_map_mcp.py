"""MCP's ``map`` tool end to end: the official SDK's client over real HTTP against the Procfile's
``mcp`` process, mapping a site served on loopback (docs/mcp.md, docs/mapping.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from .deployment import Deployment
from .sites import Answer, site

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.mcp]

NS = "http://www.sitemaps.org/schemas/sitemap/0.9"


@pytest.fixture(scope="module")
def mcp_url(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[str]:
    with django_db_blocker.unblock():
        deployment = Deployment(
            tmp_path_factory.mktemp("mcp-map"),
            {"SIFT_FETCH_ALLOW_CIDRS": "127.0.0.1/32", "SIFT_CACHE_TTL": "15m"},
        )
    try:
        yield deployment.start_mcp()
    finally:
        deployment.stop_all()


def _call(url: str, key: str, arguments: dict[str, Any] | None = None) -> tuple[Any, Any]:
    async def main() -> tuple[Any, Any]:
        async with (
            httpx2.AsyncClient(
                headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(30, read=120)
            ) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            listed = await client.list_tools()
            result = await client.call_tool("map", arguments) if arguments is not None else None
            return listed, result

    return anyio.run(main)


def test_the_map_tool_lists_a_site_and_tells_the_model_how_to_go_on(mcp_url, agent):
    _, client = agent
    with site() as served:
        u = served.url
        rows = "".join(f"<url><loc>{u(path)}</loc></url>" for path in ("/docs/a", "/docs/b", "/blog/c"))
        served.routes["/robots.txt"] = Answer(200, f"Sitemap: {u('/map.xml')}\n".encode(), "text/plain")
        served.routes["/map.xml"] = Answer(
            200, f'<urlset xmlns="{NS}">{rows}</urlset>'.encode(), "application/xml"
        )
        listed, result = _call(mcp_url, client.raw_key, {"url": u("/"), "include": "^/docs/", "limit": 1})
    tool = {each.name: each for each in listed.tools}["map"]
    assert set(tool.input_schema["properties"]) == {
        "url",
        "links",
        "subdomains",
        "include",
        "exclude",
        "search",
        "limit",
        "robots",
    }
    assert tool.input_schema["properties"]["limit"]["maximum"] == 10_000
    assert "batch_submit" in tool.description
    assert "truncated" in tool.description
    assert not result.is_error, result
    body = result.structured_content
    assert json.loads(result.content[0].text) == body
    assert body["urls"] == [{"url": u("/docs/a")}]
    assert (body["truncated"], body["truncated_reasons"]) == (True, ["limit"])


def test_a_bad_option_or_a_blocked_site_is_an_error_result_with_a_code_and_hint(mcp_url, agent):
    _, client = agent
    _, bad = _call(mcp_url, client.raw_key, {"url": "https://example.org/", "exclude": "(?<=x)"})
    _, blocked = _call(mcp_url, client.raw_key, {"url": "http://127.0.0.2:9/"})
    assert bad.is_error
    assert bad.structured_content["code"] == "invalid_request"
    assert "exclude" in bad.structured_content["error"]
    assert blocked.is_error
    assert blocked.structured_content["code"] == "blocked"
    assert blocked.structured_content["hint"]
