"""/v1/map end to end through the API, against sites served on loopback (docs/mapping.md).

Sources (robots.txt, /sitemap.xml, indexes, gzip, links), the URL filters, and hostile sitemaps:
each answered 200 within the map's deadline, saying truncated and why.
"""

from __future__ import annotations

import gzip
import itertools
import time

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from protego import Protego

from doors.direct import FETCHES
from fetch import guard
from fetch.discovery import site_urls, sitemaps
from fetch.discovery.sitemaps import MAX_FILE_BYTES
from fetch.politeness import robots

from .factories import LOOPBACK
from .sites import PAGE, Answer, site
from .upstream import resolver_for

NS = "http://www.sitemaps.org/schemas/sitemap/0.9"


def urlset(*entries: str | tuple[str, str]) -> bytes:
    rows = []
    for entry in entries:
        loc, lastmod = entry if isinstance(entry, tuple) else (entry, "")
        extra = f"<lastmod>{lastmod}</lastmod>" if lastmod else ""
        rows.append(f"<url><loc>{loc}</loc>{extra}</url>")
    return f'<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="{NS}">{"".join(rows)}</urlset>'.encode()


def index(*locs: str) -> bytes:
    rows = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
    return f'<?xml version="1.0"?><sitemapindex xmlns="{NS}">{rows}</sitemapindex>'.encode()


def xml(body: bytes) -> Answer:
    return Answer(200, body, "application/xml")


def gz(body: bytes) -> Answer:
    return Answer(200, gzip.compress(body, compresslevel=1), "application/gzip")


def text(body: str, status: int = 200) -> Answer:
    return Answer(status, body.encode(), "text/plain")


@pytest.fixture
def open_loopback(settings):
    settings.SIFT_FETCH_ALLOW_CIDRS = LOOPBACK
    settings.SIFT_CACHE_TTL = 900


def _map(client, url: str, **options):
    started = time.monotonic()
    response = client.post("/v1/map", {"url": url, "options": options})
    assert response.status_code == 200, response.content
    return response.json(), time.monotonic() - started


def _urls(body) -> list[str]:
    return [each["url"] for each in body["urls"]]


def test_robots_txt_naming_two_sitemaps_one_an_index_of_gzipped_ones_lists_each_url_once(
    agent, open_loopback
):
    _, client = agent
    with site() as served:
        u = served.url
        served.routes.update(
            {
                "/robots.txt": text(
                    f"User-agent: *\nAllow: /\nSitemap: {u('/pages.xml')}\nSitemap: {u('/index.xml')}\n"
                ),
                "/pages.xml": xml(urlset((u("/a"), "2026-01-02"), u("/b#top"), "http://elsewhere.test/x")),
                "/index.xml": xml(index(u("/one.xml.gz"), u("/two.xml.gz"))),
                "/one.xml.gz": gz(urlset((u("/c"), "2026-03-04T05:06:07+00:00"), u("/a"))),
                "/two.xml.gz": gz(urlset(u("/d"), u("/e?page=2"))),
            }
        )
        body = client.get("/v1/map", url=u("/")).json()
    assert body["urls"] == [
        {"url": u("/a"), "lastmod": "2026-01-02"},
        {"url": u("/b")},
        {"url": u("/c"), "lastmod": "2026-03-04T05:06:07+00:00"},
        {"url": u("/d")},
        {"url": u("/e?page=2")},
    ]
    assert (body["count"], body["truncated"], body["truncated_reasons"]) == (5, False, [])
    assert [(s["url"], s["kind"], s["urls"]) for s in body["sources"]] == [
        (u("/pages.xml"), "urlset", 2),
        (u("/index.xml"), "sitemapindex", 2),
        (u("/one.xml.gz"), "urlset", 1),
        (u("/two.xml.gz"), "urlset", 2),
    ]
    assert served.count("/sitemap.xml") == 0


def test_a_site_without_robots_txt_is_mapped_from_its_sitemap_xml_and_a_sitemap_url_is_read_directly(
    agent, open_loopback
):
    _, client = agent
    with site() as served:
        u = served.url
        served.routes["/sitemap.xml"] = xml(urlset(u("/x"), u("/y")))
        served.routes["/feeds/list.txt.gz"] = gz(f"{u('/t1')}\nnot a url\n{u('/t2')}\n".encode())
        body, _ = _map(client, u("/some/page"))
        direct, _ = _map(client, u("/feeds/list.txt.gz"))
    assert _urls(body) == [u("/x"), u("/y")]
    assert body["sources"] == [{"url": u("/sitemap.xml"), "kind": "urlset", "urls": 2}]
    assert _urls(direct) == [u("/t1"), u("/t2")]
    assert direct["sources"][0]["kind"] == "text"


def test_links_true_adds_the_links_of_the_page_itself_and_nothing_found_says_what_to_do(agent, open_loopback):
    _, client = agent
    page = b"""<html><body><a href="/docs/one">1</a> <a href="two#part">2</a> <a href="#top">top</a>
    <a href="http://elsewhere.test/">away</a> <a href="mailto:x@y.z">mail</a> <a href="/docs/one">again</a>
    </body></html>"""
    with site() as served:
        u = served.url
        served.routes["/docs/"] = Answer(200, page, "text/html")
        served.routes["/docs/one"] = Answer(200, PAGE, "text/html")
        empty, _ = _map(client, u("/docs/"))
        body, _ = _map(client, u("/docs/"), links=True)
        assert served.count("/docs/one") == 0  # the page's links are listed, not followed
    assert empty["urls"] == []
    assert not empty["truncated"]
    assert "links: true" in empty["hint"]
    assert empty["sources"][0]["error"] == "the site answered 404"
    assert _urls(body) == [u("/docs/one"), u("/docs/two")]
    assert body["sources"][-1] == {"url": u("/docs/"), "kind": "page", "urls": 2}
    assert "hint" not in body


def test_host_subdomains_include_exclude_search_and_limit_narrow_the_map(agent, open_loopback, monkeypatch):
    _, client = agent
    monkeypatch.setattr(guard, "resolve", resolver_for({"site.test": ["127.0.0.1"]}))
    with site() as served:
        base = f"http://site.test:{served.port}"
        paths = ["/docs/install", "/docs/install-guide", "/docs/old/install", "/blog/guide", "/docs/api"]
        entries = [base + path for path in paths]
        entries += [
            f"http://www.site.test:{served.port}/docs/www",
            f"http://docs.site.test:{served.port}/docs/sub",
        ]
        served.routes["/sitemap.xml"] = xml(urlset(*entries))
        everything, _ = _map(client, base + "/")
        wide, _ = _map(client, base + "/", subdomains=True)
        docs, _ = _map(client, base + "/", include="^/docs/", exclude="/old/")
        ranked, _ = _map(client, base + "/", search="Install guide")
        first, _ = _map(client, base + "/", limit=2)
        best, _ = _map(client, base + "/", search="install guide", limit=1)
    assert _urls(everything) == entries[:6]  # www. is the same site; docs.site.test is a subdomain
    assert _urls(wide) == entries
    assert [u.split(str(served.port))[1] for u in _urls(docs)] == [
        "/docs/install",
        "/docs/install-guide",
        "/docs/api",
        "/docs/www",
    ]
    assert _urls(ranked)[:1] == [base + "/docs/install-guide"]  # both words, then one, in the order found
    assert _urls(ranked)[1:] == [base + "/docs/install", base + "/docs/old/install", base + "/blog/guide"]
    assert not ranked["truncated"]
    assert (_urls(first), first["truncated"], first["truncated_reasons"]) == (entries[:2], True, ["limit"])
    assert (_urls(best), best["truncated_reasons"]) == ([base + "/docs/install-guide"], ["limit"])


_ENTITIES = ['<!ENTITY lol0 "lol">'] + [f'<!ENTITY lol{n} "{f"&lol{n - 1};" * 10}">' for n in range(1, 10)]
BILLION_LAUGHS = (
    f'<?xml version="1.0"?><!DOCTYPE lolz [{"".join(_ENTITIES)}]>'
    f'<urlset xmlns="{NS}"><url><loc>http://127.0.0.1/&lol9;</loc></url></urlset>'
).encode()


def test_hostile_sitemaps_are_answered_in_time_never_500_and_say_truncated(agent, open_loopback, settings):
    _, client = agent
    bomb = gzip.compress(b"\0" * (MAX_FILE_BYTES + 10 * 2**20), compresslevel=9)
    row = b"<url><loc>http://127.0.0.1/p</loc></url>"
    sixty_mb = b'<urlset xmlns="%s">' % NS.encode() + row * (60 * 2**20 // len(row)) + b"</urlset>"
    with site() as served:
        u = served.url
        served.routes.update(
            {
                "/laughs.xml": xml(BILLION_LAUGHS),
                "/xxe.xml": xml(
                    f'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY e SYSTEM "file:///etc/passwd">]>'
                    f'<urlset xmlns="{NS}"><url><loc>{u("/")}&e;</loc></url></urlset>'.encode()
                ),
                "/external.xml": xml(
                    f'<?xml version="1.0"?><!DOCTYPE urlset SYSTEM "{u("/evil.dtd")}">'
                    f'<urlset xmlns="{NS}"><url><loc>{u("/x")}</loc></url></urlset>'.encode()
                ),
                "/bomb.xml.gz": Answer(200, bomb, "application/x-gzip"),
                "/loop.xml": xml(index(u("/loop.xml"), u("/back.xml"))),
                "/back.xml": xml(index(u("/loop.xml"), u("/leaf.xml"))),
                "/leaf.xml": xml(urlset(u("/leaf"))),
                "/big.xml": xml(sixty_mb),
                "/big.xml.gz": gz(sixty_mb),
                "/deep1.xml": xml(index(u("/deep2.xml"))),
                "/deep2.xml": xml(index(u("/deep3.xml"))),
                "/deep3.xml": xml(index(u("/deep4.xml"))),
                "/deep4.xml": xml(urlset(u("/too-deep"))),
            }
        )
        answers = {
            path: _map(client, u(path))
            for path in (
                "/laughs.xml",
                "/xxe.xml",
                "/external.xml",
                "/bomb.xml.gz",
                "/loop.xml",
                "/big.xml",
                "/big.xml.gz",
                "/deep1.xml",
            )
        }
        assert served.count("/deep4.xml") == 0
        assert served.count("/evil.dtd") == 0
    for path, (body, seconds) in answers.items():
        assert seconds < settings.SIFT_MAP_TIMEOUT, path
        assert body["truncated"], path
    for path in ("/laughs.xml", "/xxe.xml", "/external.xml"):
        body = answers[path][0]
        assert (body["urls"], body["truncated_reasons"]) == ([], ["unreadable"]), path
        assert "DTD" in body["sources"][0]["error"], path
    for path in ("/bomb.xml.gz", "/big.xml", "/big.xml.gz"):
        body = answers[path][0]
        assert (body["urls"], body["truncated_reasons"]) == ([], ["file_cap"]), path
        assert "uncompressed" in body["sources"][0]["error"]
    loop = answers["/loop.xml"][0]
    assert (_urls(loop), loop["truncated_reasons"]) == ([u("/leaf")], ["loop"])
    deep = answers["/deep1.xml"][0]
    assert (deep["urls"], deep["truncated_reasons"]) == ([], ["nesting"])


def test_a_map_ends_by_its_deadline_with_what_it_found(agent, open_loopback, settings):
    _, client = agent
    settings.SIFT_MAP_TIMEOUT = 2
    with site() as served:
        u = served.url
        served.routes["/robots.txt"] = text(f"Sitemap: {u('/fast.xml')}\nSitemap: {u('/slow.xml')}\n")
        served.routes["/fast.xml"] = xml(urlset(u("/quick")))
        served.routes["/slow.xml"] = Answer(200, urlset(u("/late")), "application/xml", delay=30)
        body, seconds = _map(client, u("/"))
    assert seconds < 2 + 10  # the slow sitemap would take 30 s
    assert (_urls(body), body["truncated_reasons"]) == ([u("/quick")], ["deadline"])


def test_crawl_delay_spaces_robots_requests_to_the_host_and_robots_leaves_disallowed_urls_out(
    agent, open_loopback
):
    _, client = agent
    with site() as served:
        u = served.url
        served.routes.update(
            {
                "/robots.txt": text(
                    "User-agent: *\nCrawl-delay: 1\nDisallow: /private/\n"
                    f"Sitemap: {u('/a.xml')}\nSitemap: {u('/b.xml')}\n"
                ),
                "/a.xml": xml(urlset(u("/open"), u("/private/x"))),
                "/b.xml": xml(urlset(u("/page"))),
                "/page": Answer(),
                "/open": Answer(),
            }
        )
        body, _ = _map(client, u("/"), robots=True)
        for path in ("/page", "/open"):
            response = client.post("/v1/fetch", {"url": u(path), "options": {"robots": True}})
            assert response.status_code == 200, response.content
        times = served.pages()
        private, _ = _map(client, u("/private/x"), robots=True, links=True)
        assert served.count("/private/x") == 0
    assert _urls(body) == [u("/open"), u("/page")]
    assert _urls(private) == [u("/open"), u("/page")]  # the sitemaps, from the cache
    assert "disallows this page" in private["sources"][-1]["error"]
    assert len(times) == 4
    assert all(later - earlier >= 1.0 for earlier, later in itertools.pairwise(times)), times


def test_crawl_delay_is_clamped_to_a_minute():
    assert robots.crawl_delay(Protego.parse("User-agent: *\nCrawl-delay: 3600\n")) == 60.0
    assert robots.crawl_delay(Protego.parse("User-agent: sift\nCrawl-delay: 2.5\n")) == 2.5
    assert robots.crawl_delay(Protego.parse("User-agent: *\nDisallow:\n")) == 0.0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": "ftp://example.org/"}, "url"),
        ({"url": "https://example.org/", "options": {"include": "(unclosed"}}, "options.include"),
        ({"url": "https://example.org/", "options": {"limit": 10001}}, "options.limit"),
        ({"url": "https://example.org/", "options": {"limit": True}}, "options.limit"),
        ({"url": "https://example.org/", "options": {"search": " "}}, "options.search"),
        ({"url": "https://example.org/", "options": {"crawl": True}}, "options.crawl"),
    ],
)
def test_bad_requests_are_refused_naming_the_field(agent, body, field):
    _, client = agent
    response = client.post("/v1/map", body)
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid_request"
    assert response.json()["details"][0]["field"] == field


@pytest.mark.parametrize(
    ("options", "error", "hint"),
    [
        ({"limit": True}, "options.limit: limit must be a whole number from 1 to 10000", "JSON integer"),
        ({"include": "a\x00"}, "options.include: include holds a NUL character", "Remove the NUL"),
        ({"search": "x" * 501}, "options.search: search is longer than 500 characters", "Shorten search"),
        ("links", "options: options must be an object", 'Send options as {"links": true}.'),
    ],
)
def test_a_maps_options_are_refused_in_the_words_a_targets_are(agent, options, error, hint):
    _, client = agent
    response = client.post("/v1/map", {"url": "https://example.org/", "options": options})
    assert (response.status_code, response.json()["code"]) == (400, "invalid_request")
    assert response.json()["error"] == error
    assert hint in response.json()["hint"]


def test_get_refuses_an_unknown_parameter_and_a_blocked_address_is_403(agent, settings):
    _, client = agent
    unknown = client.get("/v1/map", url="https://example.org/", depth="2")
    assert (unknown.status_code, unknown.json()["code"]) == (400, "invalid_request")
    blocked = client.get("/v1/map", url="http://127.0.0.1:9/")
    assert (blocked.status_code, blocked.json()["code"]) == (403, "blocked")
    assert client.client.get("/v1/map", {"url": "https://example.org/"}).status_code == 401


def test_maps_in_flight_per_caller_are_bounded_with_fetches(agent, open_loopback, settings):
    caller, client = agent
    settings.SIFT_FETCH_PER_CALLER = 1
    assert FETCHES.take(caller.pk)
    try:
        response = client.get("/v1/map", url="http://127.0.0.1:9/")
    finally:
        FETCHES.give_back(caller.pk)
    assert (response.status_code, response.json()["code"]) == (429, "busy")
    assert response["Retry-After"]


def test_a_gzip_bomb_sent_as_a_content_encoding_is_cut_at_the_cap(agent, open_loopback, httpserver):
    _, client = agent
    bomb = gzip.compress(b"\0" * (MAX_FILE_BYTES + 2**20), compresslevel=9)
    httpserver.expect_request("/sitemap.xml").respond_with_data(
        bomb, content_type="application/xml", headers={"Content-Encoding": "gzip"}
    )
    body, seconds = _map(client, httpserver.url_for("/sitemap.xml"))
    assert (body["urls"], body["truncated_reasons"]) == ([], ["file_cap"])
    assert seconds < 60


def test_the_file_entry_byte_and_candidate_caps_each_stop_the_map_saying_why(
    agent, open_loopback, monkeypatch
):
    _, client = agent
    with site() as served:
        u = served.url
        many = [u(f"/s{n}.xml") for n in range(8)]
        served.routes["/index.xml"] = xml(index(*many))
        for n in range(8):
            served.routes[f"/s{n}.xml"] = xml(urlset(*(u(f"/p{n}-{k}") for k in range(3))))
        monkeypatch.setattr(sitemaps, "MAX_FILES", 4)  # the index and three of its sitemaps
        files, _ = _map(client, u("/index.xml"))
        monkeypatch.setattr(sitemaps, "MAX_FILES", 50)
        monkeypatch.setattr(sitemaps, "MAP_BYTES", len(served.routes["/index.xml"].body) + 10)
        spent, _ = _map(client, u("/index.xml"))
        monkeypatch.setattr(sitemaps, "MAP_BYTES", 2**20)
        monkeypatch.setattr(sitemaps, "MAX_ENTRIES_PER_FILE", 2)
        entries, _ = _map(client, u("/s0.xml"))
        monkeypatch.setattr(sitemaps, "MAX_ENTRIES_PER_FILE", 50)
        monkeypatch.setattr(site_urls, "MAX_CANDIDATES", 5)
        candidates, _ = _map(client, u("/index.xml"), search="p")
    assert (len(files["urls"]), files["truncated_reasons"]) == (9, ["files"])
    assert (spent["urls"], spent["truncated_reasons"]) == ([], ["bytes"])
    assert (_urls(entries), entries["truncated_reasons"]) == ([u("/p0-0"), u("/p0-1")], ["file_cap"])
    assert (len(candidates["urls"]), candidates["truncated_reasons"]) == (5, ["url_cap"])


def test_an_unreadable_robots_txt_falls_back_to_sitemap_xml_unless_robots_is_asked(agent, open_loopback):
    _, client = agent
    with site() as served:
        u = served.url
        served.routes["/robots.txt"] = text("down", status=500)
        served.routes["/sitemap.xml"] = xml(urlset(u("/x")))
        body, _ = _map(client, u("/"))
        refused = client.get("/v1/map", url=u("/"), robots="true")
    assert _urls(body) == [u("/x")]
    assert (refused.status_code, refused.json()["code"]) == (403, "blocked")


@hypothesis_settings(max_examples=300, deadline=None)
@given(raw=st.one_of(st.text(max_size=80), st.from_regex(r"\A(https?:)?//[^/]{0,20}(/\S{0,20})?\Z")))
def test_any_string_a_sitemap_holds_normalises_to_an_http_url_or_nothing(raw):
    url = site_urls.normalise(raw, "http://example.org/dir/")
    assert url is None or (url.startswith(("http://", "https://")) and len(url) <= 2048 and "#" not in url)


def test_a_failing_named_sitemap_is_a_source_with_an_error_and_a_site_asking_to_slow_down_is_busy(
    agent, open_loopback
):
    _, client = agent
    with site() as served:
        u = served.url
        served.routes["/robots.txt"] = text(f"Sitemap: {u('/broken.xml')}\nSitemap: {u('/fine.xml')}\n")
        served.routes["/broken.xml"] = text("oops", status=500)
        served.routes["/fine.xml"] = xml(urlset(u("/ok")))
        served.routes["/slow-down.xml"] = text("later", status=503)
        body, _ = _map(client, u("/"))
        busy = client.get("/v1/map", url=u("/slow-down.xml"))
    assert (_urls(body), body["truncated_reasons"]) == ([u("/ok")], ["unreadable"])
    assert body["sources"][0] == {
        "url": u("/broken.xml"),
        "kind": "sitemap",
        "urls": 0,
        "error": "the site answered 500",
    }
    assert (busy.status_code, busy.json()["code"]) == (429, "busy")
    assert busy["Retry-After"]
