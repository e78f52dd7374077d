"""Page facts on every door (docs/api.md, "Page facts"): ``/v1/fetch``, a batch target's result
(through the production fetch function) and MCP ``fetch``, against a page served on loopback."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from batch.engine.seam import Caller
from batch.pipeline_bridge import fetch_target
from doors.mcp import inputs
from doors.validation import validate_target

from .factories import LOOPBACK
from .test_mcp import call, mcp_server  # noqa: F401 (the fixture, for the MCP door)
from .upstream import page_upstream

PRODUCT_PAGE = """<!doctype html><html lang="en"><head><title>Blue widget | Acme shop</title>
<meta property="og:site_name" content="Acme shop"><meta property="og:type" content="product">
<script type="application/ld+json">{"@context": "https://schema.org", "@type": "Product",
 "name": "Blue widget", "description": "Hidden words that only the JSON-LD says.",
 "brand": {"@type": "Brand", "name": "Acme"}, "sku": "BW-42", "image": "/img/bw.png",
 "offers": {"@type": "Offer", "price": "19.90", "priceCurrency": "EUR",
            "availability": "https://schema.org/InStock"},
 "aggregateRating": {"@type": "AggregateRating", "ratingValue": 4.5, "reviewCount": 12}}</script>
<script type="application/ld+json">{"broken": </script>
</head><body><main><h1>Blue widget</h1>
<p>The blue widget is made of recycled steel and fits every standard socket in the house.</p>
<p>It comes with a two-year guarantee and ships within two working days from our warehouse.</p>
<table><tr><th>Size</th><th>Weight</th></tr><tr><td>Small</td><td>1 kg</td></tr>
<tr><td>Large</td><td>2 kg</td></tr></table></main></body></html>"""
PRODUCT = {
    "name": "Blue widget",
    "brand": "Acme",
    "sku": "BW-42",
    "price": 19.9,
    "currency": "EUR",
    "availability": "InStock",
    "rating": 4.5,
    "review_count": 12,
}


@pytest.fixture
def open_loopback(settings):
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK


@pytest.fixture(scope="module")
def product_port() -> Iterator[int]:
    with page_upstream(PRODUCT_PAGE.encode(), "text/html; charset=utf-8") as port:
        yield port


def check_answer(answer: dict, url: str) -> None:
    base = url.rsplit("/", 1)[0]
    assert answer["metadata"] == {
        "title": "Blue widget",
        "description": "Hidden words that only the JSON-LD says.",
        "language": "en",
        "site_name": "Acme shop",
        "image": f"{base}/img/bw.png",
        "type": "Product",
    }
    assert answer["product"] == PRODUCT
    assert (answer["structured_errors"], answer["structured_truncated"]) == (1, False)
    assert [item["syntax"] for item in answer["structured_data"]] == ["json-ld", "opengraph"]
    assert answer["tables"] == [
        {"caption": None, "headers": ["Size", "Weight"], "rows": [["Small", "1 kg"], ["Large", "2 kg"]],
         "start": answer["tables"][0]["start"]}
    ]  # fmt: skip


def test_rest_fetch_answers_metadata_always_and_the_rest_when_asked(agent, open_loopback, product_port):
    _, client = agent
    url = f"http://127.0.0.1:{product_port}/widget"
    plain = client.get("/v1/fetch", url=url)
    assert plain.status_code == 200, plain.content
    body = plain.json()
    assert body["metadata"]["title"] == "Blue widget"
    assert not {"structured_data", "product", "tables", "structured_errors"} & set(body)
    assert "Hidden words" not in body["content"]
    asked = client.get("/v1/fetch", url=url, structured="true", tables="true", mode="text").json()
    check_answer(asked, url)
    table = asked["tables"][0]
    assert asked["content"][table["start"] :].startswith("| Size | Weight |")
    raw = client.get("/v1/fetch", url=url, structured="true", mode="raw")
    assert (raw.status_code, raw.json()["details"][0]["field"]) == (400, "options.structured")


def test_a_batch_target_carries_them_in_its_result_meta(agent, open_loopback, product_port):
    caller, _ = agent
    url = f"http://127.0.0.1:{product_port}/batch-widget"
    target = validate_target({"url": url, "options": {"structured": True, "tables": True}})
    result = fetch_target(Caller(caller.name, caller.caller_class), target)
    check_answer(result["meta"], url)
    json.dumps(result)  # what the worker stores


@pytest.mark.mcp
@pytest.mark.django_db(transaction=True)
def test_mcp_fetch_takes_structured_and_tables_and_describes_them(mcp_server, agent, product_port):  # noqa: F811
    _, client = agent
    url = f"http://127.0.0.1:{product_port}/mcp-widget"
    result = call(mcp_server.url, client.raw_key, "fetch", {"url": url, "structured": True, "tables": True})
    assert not result.is_error, result
    check_answer(result.structured_content, url)
    assert json.loads(result.content[0].text)["product"] == PRODUCT


def test_the_mcp_fetch_tool_says_what_structured_and_tables_give(settings):
    arguments = inputs.fetch_arguments()["properties"]
    assert arguments["structured"]["type"] == arguments["tables"]["type"] == "boolean"
    assert "product" in arguments["structured"]["description"]
    assert "headers" in arguments["tables"]["description"]
    description = inputs.fetch_description()
    assert "structured: true" in description
    assert "tables: true" in description
