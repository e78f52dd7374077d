"""A site's pages, listed from its sitemaps and the given page's links: what ``/v1/map`` and MCP's
``map`` answer (docs/mapping.md).

Sources, in order: the ``Sitemap:`` lines of the site's robots.txt, else ``/sitemap.xml``
(or the given URL itself when it names a sitemap); indexes followed up to ``MAX_DEPTH`` levels;
with ``links``, the links of the given page. Each URL found is made absolute and normalised,
kept once, and only when it is on the site (``subdomains`` widens that), matches ``include``,
not ``exclude``, and (with ``robots``) its site's robots.txt allows it. Without ``search`` the
URLs keep the order they were found in; with it, they are ranked. ``truncated_reasons`` says
every way in which more URLs existed than the answer holds. Raises only ``FetchError``.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

from django.conf import settings
from protego import Protego

from fetch import guard
from fetch.discovery import sitemaps
from fetch.discovery.map_options import MapRequest, compiled
from fetch.discovery.sitemaps import Budget, Entry, FileRead, Stop, read_links, read_sitemap
from fetch.errors import FetchError
from fetch.limits import MAX_URL_CHARS
from fetch.outcomes import Outcome
from fetch.politeness import robots
from fetch.wire import hostnames

# An index lists sitemaps one level down: files deeper than this are not read.
MAX_DEPTH = 3
# URLs a map holds while it reads, before ranking and the limit: past it, reading stops.
MAX_CANDIDATES = 100_000
# With robots, the robots.txt of at most this many other sites (subdomains) is read.
MAX_ROBOTS_SITES = 8
MAX_SEARCH_WORDS = 32
# Files not read (loops, nesting) are listed among the sources until there are this many.
MAX_SOURCES = 100
# A URL read as a sitemap itself: an XML or gzip file, or a text file named for a sitemap.
_SITEMAP_PATH = re.compile(r"\.(xml|gz)$|sitemap[^/]*\.txt$", re.IGNORECASE)
_WORD = re.compile(r"\w+")
EMPTY_HINT = (
    "No URL of this site was found: it names no sitemap in robots.txt and has no /sitemap.xml "
    "(or they list nothing that passes include, exclude, search and robots). Send links: true "
    "to list the links of the page itself, or fetch the page and follow its links."
)


@dataclass
class _Found:
    url: str
    lastmod: str | None
    fields: str
    score: int = 0


@dataclass
class _Map:
    """What one map has found so far, and why it is incomplete."""

    request: MapRequest
    partition: str
    caller: str
    budget: Budget
    delay: float
    site_rules: Protego | None
    found: dict[str, _Found] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)
    other_rules: dict[str, Protego | None] = field(default_factory=dict)
    failures: list[FetchError] = field(default_factory=list)

    def incomplete(self, reason: str) -> None:
        if reason not in self.reasons:
            self.reasons.append(reason)


def map_site(request: MapRequest, *, partition: str, caller: str) -> dict[str, Any]:
    """List the site of ``request.url`` for ``caller`` (its name), whose documents live in ``partition``."""
    started = time.monotonic()
    guard.check_url(request.url)  # a refused site is refused before anything is read
    budget = Budget(started + float(settings.SIFT_MAP_TIMEOUT), sitemaps.MAX_FILES, sitemaps.MAP_BYTES)
    rules = _site_rules(request, partition)
    # Crawl-delay binds robots: true requests only, as for a fetch.
    delay = robots.crawl_delay(rules) if rules and request.options.robots else 0.0
    state = _Map(request, partition, caller, budget, delay, rules)
    matcher = _Matcher(request)
    try:
        _read_sitemaps(state, matcher, _roots(request.url, rules))
        if request.options.links and not _names_sitemap(request.url):
            _read_links(state, matcher)
    except Stop as stop:
        state.incomplete(stop.reason)
    except _Full:
        state.incomplete("limit" if not request.options.search else "url_cap")
    return _answer(state, matcher, started)


def _read_links(state: _Map, matcher: _Matcher) -> None:
    url = state.request.url
    if state.request.options.robots and not (
        state.site_rules and state.site_rules.can_fetch(url, robots.ROBOT_NAME)
    ):
        error = "the site's robots.txt disallows this page for sift, so its links were not read"
        state.sources.append({"url": url, "kind": "page", "urls": 0, "error": error})
        return
    page = read_links(
        url, partition=state.partition, caller=state.caller, budget=state.budget, delay=state.delay
    )
    _take(state, matcher, page)


def _site_rules(request: MapRequest, partition: str) -> Protego | None:
    """The site's robots.txt: required with ``robots`` (unreadable is ``blocked``), else only
    where its ``Sitemap:`` lines come from (unreadable is none)."""
    if request.options.robots:
        return robots.rules(request.url, partition)
    try:
        return robots.rules(request.url, partition)
    except FetchError:
        return None


def _names_sitemap(url: str) -> bool:
    return bool(_SITEMAP_PATH.search(urlsplit(url).path))


def _roots(url: str, rules: Protego | None) -> list[tuple[str, bool]]:
    """The first files to read, each with whether it was named (a fallback that is missing is no loss)."""
    if _names_sitemap(url):
        return [(url, True)]
    named = [normalised for line in (rules.sitemaps if rules else []) if (normalised := normalise(line, url))]
    if named:
        return [(each, True) for each in dict.fromkeys(named)]
    parts = urlsplit(url)
    return [(urlunsplit((parts.scheme, parts.netloc, "/sitemap.xml", "", "")), False)]


def _read_sitemaps(state: _Map, matcher: _Matcher, roots: list[tuple[str, bool]]) -> None:
    """Depth first, in the order the files name each other, so URLs come in the order found."""
    read: set[str] = set()
    stack: list[tuple[str, int, tuple[str, ...], bool]] = [
        (url, 1, (), named) for url, named in reversed(roots)
    ]
    while stack:
        url, depth, chain, named = stack.pop()
        if url in read:
            if url in chain:
                _skip(state, url, "loop", "loops back to an index above it")
            continue
        read.add(url)
        if depth > MAX_DEPTH:
            _skip(state, url, "nesting", f"nested deeper than {MAX_DEPTH} levels")
            continue
        result = read_sitemap(
            url, partition=state.partition, caller=state.caller, budget=state.budget, delay=_delay(state, url)
        )
        if result.kind != "sitemapindex":
            if not named and result.outcome == Outcome.UPSTREAM_4XX:
                result.reason = None  # no /sitemap.xml: nothing was there to miss
            _take(state, matcher, result)
            continue
        _record(state, result, len(result.entries))
        children = [
            (child, depth + 1, (*chain, url), True)
            for entry in result.entries
            if (child := normalise(entry.url, url))
        ]
        stack.extend(reversed(children))


def _skip(state: _Map, url: str, reason: str, why: str) -> None:
    """A sitemap not read; listed among the sources while they are few (an index may list
    thousands of such files)."""
    state.incomplete(reason)
    if len(state.sources) < MAX_SOURCES:
        state.sources.append({"url": url, "kind": "sitemap", "urls": 0, "error": why})


def _delay(state: _Map, url: str) -> float:
    """The site's Crawl-delay spaces requests to the site's own host only."""
    return state.delay if robots.robots_url(url) == robots.robots_url(state.request.url) else 0.0


def _record(state: _Map, result: FileRead, count: int) -> None:
    source: dict[str, Any] = {"url": result.url, "kind": result.kind, "urls": count}
    if result.error:
        source["error"] = result.error
        if result.outcome is not None:
            state.failures.append(FetchError(result.outcome, result.error, result.outcome.hint))
    state.sources.append(source)
    if result.reason:
        state.incomplete(result.reason)


class _Full(Exception):
    """No more URLs can be kept: the limit (in the order found) or ``MAX_CANDIDATES``."""


def _take(state: _Map, matcher: _Matcher, result: FileRead) -> None:
    kept = 0
    try:
        for entry in result.entries:
            kept += _keep(state, matcher, entry, result.url)
    finally:
        _record(state, result, kept)


def _keep(state: _Map, matcher: _Matcher, entry: Entry, base: str) -> int:
    url = normalise(entry.url, base)
    if url is None or not matcher.on_site(url) or not matcher.path_matches(url):
        return 0
    known = state.found.get(url)
    if known is not None:
        known.lastmod = known.lastmod or entry.lastmod
        return 0
    score = matcher.score(url, entry.fields)
    if score == 0 or not _allowed(state, url):
        return 0
    limit = state.request.options.limit if not state.request.options.search else MAX_CANDIDATES
    if len(state.found) >= limit:
        raise _Full
    state.found[url] = _Found(url, _lastmod(entry.lastmod), entry.fields, score)
    return 1


def _allowed(state: _Map, url: str) -> bool:
    """With ``robots``: whether the URL's site's robots.txt lets sift fetch it."""
    if not state.request.options.robots:
        return True
    where = robots.robots_url(url)
    if where == robots.robots_url(state.request.url):
        rules = state.site_rules
    elif where in state.other_rules:
        rules = state.other_rules[where]
    elif len(state.other_rules) >= MAX_ROBOTS_SITES:
        state.incomplete("files")
        return False
    else:
        rules = state.other_rules[where] = _other_rules(state, url)
    return rules is not None and rules.can_fetch(url, robots.ROBOT_NAME)


def _other_rules(state: _Map, url: str) -> Protego | None:
    state.budget.take_file()
    try:
        return robots.rules(url, state.partition)
    except FetchError:
        return None  # an unreadable robots.txt allows nothing


class _Matcher:
    """The site, the path patterns and the search words of one map."""

    def __init__(self, request: MapRequest) -> None:
        self.host = hostnames.canonical_host(urlsplit(request.url).hostname or "").removeprefix("www.")
        self.subdomains = request.options.subdomains
        self.include = compiled(request.options.include)
        self.exclude = compiled(request.options.exclude)
        search = request.options.search or ""
        self.words = list(dict.fromkeys(word.lower() for word in _WORD.findall(search)))[:MAX_SEARCH_WORDS]

    def on_site(self, url: str) -> bool:
        host = (urlsplit(url).hostname or "").removeprefix("www.")
        return host == self.host or (self.subdomains and host.endswith("." + self.host))

    def path_matches(self, url: str) -> bool:
        path = urlsplit(url).path or "/"
        if self.include is not None and not self.include.search(path):
            return False
        return self.exclude is None or not self.exclude.search(path)

    def score(self, url: str, fields: str) -> int:
        """How many search words the URL's path and query, or its sitemap fields, hold (1 without search)."""
        if not self.words:
            return 1
        parts = urlsplit(url)
        haystack = f"{unquote(parts.path)} {unquote(parts.query)} {fields}".lower()
        return sum(1 for word in self.words if word in haystack)


def normalise(raw: str, base: str) -> str | None:
    """``raw`` (as a sitemap or a page wrote it, relative to ``base``) as one absolute http(s)
    URL spelling: lower-case scheme, canonical host, no default port, no fragment, ``/`` for an
    empty path; ``None`` for anything else."""
    raw = raw.strip()
    if not raw.isprintable() or " " in raw or len(raw) > 2 * MAX_URL_CHARS:
        return None
    try:
        parts = urlsplit(raw if urlsplit(raw).scheme else urljoin(base, raw))
        port = parts.port
        scheme = parts.scheme.lower()
        if scheme not in guard.DEFAULT_PORTS or not parts.hostname or parts.username or parts.password:
            return None
        host = hostnames.canonical_host(parts.hostname)
    except ValueError:
        return None
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != guard.DEFAULT_PORTS[scheme]:
        netloc += f":{port}"
    url = urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))
    return url if len(url) <= MAX_URL_CHARS and url.isprintable() and " " not in url else None


_LASTMOD = re.compile(r"^\d{4}(-\d{2}(-\d{2}([T ][0-9:.]+(Z|[+-]\d{2}:?\d{2})?)?)?)?$")


def _lastmod(value: str | None) -> str | None:
    """A W3C datetime as the sitemap wrote it; anything else is left out."""
    return value if value and _LASTMOD.match(value) else None


def _answer(state: _Map, matcher: _Matcher, started: float) -> dict[str, Any]:
    found = list(state.found.values())
    limit = state.request.options.limit
    if matcher.words:
        found.sort(key=lambda each: -each.score)  # stable: ties keep the order found
    if len(found) > limit:
        found = found[:limit]
        state.incomplete("limit")
    if not found and state.failures and all(f.outcome == Outcome.BUSY for f in state.failures):
        raise state.failures[0]
    answer: dict[str, Any] = {
        "url": state.request.url,
        "urls": [{"url": each.url, **({"lastmod": each.lastmod} if each.lastmod else {})} for each in found],
        "count": len(found),
        "truncated": bool(state.reasons),
        "truncated_reasons": state.reasons,
        "sources": state.sources,
        "elapsed_ms": round((time.monotonic() - started) * 1000),
    }
    if not found:
        answer["hint"] = EMPTY_HINT
    return answer
