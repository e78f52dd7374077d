"""One target in, one envelope out (docs/fetch-pipeline.md): cache, gate, guarded download, extraction.

``fetch`` is what ``/v1/fetch`` calls and what the job side's bridge (``batch.pipeline_bridge``)
calls for each target, so a batch is exactly many interactive fetches run by the workers. It
raises only ``FetchError``.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import re
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from fetch import cache, client, gate, metrics
from fetch.answer import slices
from fetch.cache import CacheState
from fetch.changes import readings
from fetch.errors import FetchError
from fetch.extract import Extracted, extract, refuse_empty
from fetch.limits import EXTRACT_GRACE_SECONDS
from fetch.models import CachedDocument
from fetch.outcomes import Outcome
from fetch.politeness import host_turns, robots
from fetch.render import renderer, server_process
from fetch.sandbox import finish_line
from fetch.targets import Target
from fetch.wire import headers

# The top-level request's turn at its host (``host_turns.turn``), yielding the download's timeout.
HostTurn = Callable[[], AbstractContextManager[float | None]]
# Failures after which `recover: true` serves the last copy.
RECOVERABLE = frozenset({Outcome.TIMEOUT, Outcome.UPSTREAM_5XX})
# What was done to a rendered copy's consent banner, kept at the end of the copy's HTML.
CONSENT_MARK = re.compile(rb"<!--sift-consent:(rejected|accepted|removed|none)-->$")


@dataclass(frozen=True)
class Source:
    """The document to extract from, and where it came from."""

    download: client.Download
    fetched_at: datetime
    cache: CacheState = "miss"
    rendered: bool = False
    render_cut: dict[str, Any] | None = None  # what the subrequest bounds refused (a render now)
    consent_handled: str | None = None
    screenshot: renderer.Screenshot | None = None


def fetch(
    target: Target, *, partition: str, caller: str, wait_for_host: bool = True, changes_scope: str = ""
) -> dict[str, Any]:
    """Fetch ``target`` for ``caller`` (its name: cursors and last readings are bound to it), whose
    documents live in ``partition`` (see ``cache.partition_for``).

    Without ``wait_for_host`` (a batch target), a host whose turn has not come raises ``HostNotDue``.
    With ``changes``, the reading is compared with the caller's last one in ``changes_scope``
    (a monitor's own, or the caller's when empty).
    """
    started = time.monotonic()
    outcome = "ok"
    try:
        start = slices.start_of(target, caller=caller)  # a bad cursor is refused before any request
        delay = robots.check(target.url, partition) if target.options.robots else 0.0
        since = started if target.options.robots else None  # robots.txt came out of the deadline
        turn = functools.partial(host_turns.turn, target.url, since=since, wait=wait_for_host, least=delay)
        source = _obtain(target, partition, caller, turn)
        document = _extract(target, source, started)
        if target.options.render == "auto" and document.script_built and not source.rendered:
            rendered = _render_served(target, _rendered_partition(target, partition), caller, source)
            if rendered is not None:
                source, document = rendered, _extract(target, rendered, started)
        refuse_empty(document, rendered=source.rendered)
        envelope = _envelope(target, source, document, started, start=start, caller=caller)
        if target.options.changes:
            change = readings.track(caller, target, document.content, scope=changes_scope)
            envelope["change"] = change.as_dict()
        return envelope
    except FetchError as exc:
        outcome = exc.outcome
        raise
    finally:
        metrics.REQUESTS.labels(outcome, "url").inc()
        metrics.SECONDS.labels("url").observe(time.monotonic() - started)


def _obtain(target: Target, partition: str, caller: str, turn: HostTurn) -> Source:
    if target.options.render is True:
        return _obtain_rendered(target, _rendered_partition(target, partition), caller, turn)
    copy = cache.lookup(partition, target.url)
    if copy is not None and cache.is_fresh(copy, target.options.freshness):
        return _from_cache(copy, "hit")
    try:
        with turn() as timeout, gate.fetch_slot(caller):
            conditions = cache.conditional_headers(copy) if copy else None
            download = client.download(target.url, headers=conditions, timeout=timeout)
        return _from_upstream(target, partition, download, copy if conditions else None)
    except FetchError as exc:
        if copy is not None and target.options.recover and _recoverable(exc):
            return _from_cache(copy, "stale")
        raise


def _obtain_rendered(target: Target, partition: str, caller: str, turn: HostTurn) -> Source:
    """The page as the browser left it, from the rendered partition or rendered now."""
    renderer.require_browser()
    copy = _rendered_copy(target, partition)
    if copy is not None and cache.is_fresh(copy, target.options.freshness):
        return _rendered(_from_cache(copy, "hit"))
    server_process.start_soon()  # the browser starts while the page downloads
    try:
        # One fetch slot for the download and the render's subrequests; the render slot only once
        # the page is here and the browser's work begins, so a page slow to answer holds none.
        with turn() as timeout, gate.fetch_slot(caller, renderer.render_lease_seconds()):
            download = client.download(target.url, timeout=timeout)
            _raise_for_status(download)
            if download.content_type not in renderer.HTML_TYPES:
                return Source(download, timezone.now())  # nothing to run: read as fetched
            with renderer.render_slot(caller):
                rendering = _render_retrying_once(download, target)
    except FetchError as exc:
        if copy is not None and target.options.recover and _recoverable(exc):
            return _rendered(_from_cache(copy, "stale"))
        raise
    return _store_rendered(target, partition, download, rendering)


def _render_served(target: Target, partition: str, caller: str, served: Source) -> Source | None:
    """``render: "auto"`` on a page that looks built by scripts: the page as served, rendered
    (holding a render slot only now), or its rendered copy; None where no browser is installed."""
    if not renderer.available():
        return None
    copy = _rendered_copy(target, partition)
    if copy is not None and cache.is_fresh(copy, target.options.freshness):
        return _rendered(_from_cache(copy, "hit"))
    # The page itself was downloaded in its host's turn; a render's subrequests take none. The
    # fetch slot first, as for render: true, so that no render slot waits on a fetch slot.
    with gate.fetch_slot(caller, renderer.render_lease_seconds()), renderer.render_slot(caller):
        rendering = _render_retrying_once(served.download, target)
    return _store_rendered(target, partition, served.download, rendering)


def _rendered_partition(target: Target, partition: str) -> str:
    """Rendered copies are kept apart by how the consent banner was answered: a page rendered
    with consent accepted never serves a render that rejects it (docs/rendering.md)."""
    consent = target.options.consent
    kind = "rendered" if consent == "reject" else f"rendered-{consent}"
    return cache.kind_partition(kind, partition)


def _rendered_copy(target: Target, partition: str) -> CachedDocument | None:
    """The rendered copy to answer from; none for a render with actions (never kept: what the
    steps did is not the page) or a screenshot (a picture needs the browser: it renders anew,
    and keeps its text as any render does)."""
    if target.options.actions or target.options.screenshot is not None:
        return None
    return cache.lookup(partition, target.url)


def _store_rendered(
    target: Target, partition: str, download: client.Download, rendering: renderer.Rendering
) -> Source:
    """The rendered page as a document; kept in the rendered partition unless steps shaped it or
    the render was cut (a copy cannot say so, and the next fetch renders it again)."""
    page = client.Download(
        url=download.url,
        final_url=download.final_url,
        status=download.status,
        headers={},
        content_type="text/html",
        charset="utf-8",
        body=rendering.html.encode("utf-8", "surrogatepass"),
        elapsed_ms=download.elapsed_ms,
    )
    if not target.options.actions and rendering.cut is None:
        mark = f"<!--sift-consent:{rendering.consent or 'none'}-->".encode()
        cache.store(partition, target.url, dataclasses.replace(page, body=page.body + mark))
    return Source(
        page,
        timezone.now(),
        rendered=True,
        consent_handled=rendering.consent,
        screenshot=rendering.screenshot,
        render_cut=rendering.cut,
    )


def _render_retrying_once(download: client.Download, target: Target) -> renderer.Rendering:
    """A browser that crashed is started afresh and the page tried once more, then ``internal``."""
    try:
        return renderer.render(download, target.options)
    except renderer.RenderCrashed:
        pass
    try:
        return renderer.render(download, target.options)
    except renderer.RenderCrashed as exc:
        raise FetchError(
            Outcome.INTERNAL,
            f"the browser failed twice rendering this page: {exc}",
            "Fetch the page without render, or retry later.",
        ) from None


def _rendered(source: Source) -> Source:
    """A rendered copy from the cache, with what was done to its consent banner when it was made."""
    download = source.download
    mark = CONSENT_MARK.search(download.body[-40:])
    consent = mark.group(1).decode() if mark and mark.group(1) != b"none" else None
    if mark:
        download = dataclasses.replace(
            download, body=download.body[: len(download.body) - len(mark.group(0))]
        )
    return Source(download, source.fetched_at, source.cache, rendered=True, consent_handled=consent)


def _recoverable(exc: FetchError) -> bool:
    # A 503 is "busy" (batch jobs retry it), but it is also a 5xx failure of the upstream.
    return exc.outcome in RECOVERABLE or exc.upstream_status == 503


def _from_cache(copy: CachedDocument, state: CacheState) -> Source:
    metrics.CACHE_HITS.inc()
    return Source(cache.as_download(copy), copy.fetched_at, state)


def _from_upstream(
    target: Target, partition: str, download: client.Download, asked: CachedDocument | None
) -> Source:
    """``asked`` is the copy whose validators the request sent, None when it was not conditional:
    only then may a 304 refresh it (``_raise_for_status`` refuses any other 304)."""
    if download.status == 304 and asked is not None:
        cache.refresh(asked, download)
        return _from_cache(asked, "revalidated")
    _raise_for_status(download)
    cache.store(partition, target.url, download)
    return Source(download, timezone.now())


def _raise_for_status(download: client.Download) -> None:
    status = download.status
    if status in (429, 503):
        # Clamped to RETRY_FOR: a batch target gives up after that long anyway.
        wait = headers.retry_after(
            download.headers.get("retry-after"),
            now=timezone.now(),
            most=float(settings.SIFT_BATCH_RETRY_FOR),
        )
        raise FetchError(
            Outcome.BUSY,
            f"the site answered {status}",
            f"The site asks to slow down; retry after {wait:.0f} seconds." if wait else "Retry later.",
            upstream_status=status,
            retry_after=wait,
        )
    if 400 <= status < 500:
        raise FetchError(
            Outcome.UPSTREAM_4XX,
            f"the site answered {status}",
            "Check the URL: the page may have moved, need a login, or not exist.",
            upstream_status=status,
        )
    if status >= 500:
        raise FetchError(
            Outcome.UPSTREAM_5XX,
            f"the site answered {status}",
            "The site is failing; retry later, or send recover: true to get the last cached copy.",
            upstream_status=status,
        )
    if status == 304:  # a conditional request's 304 never comes here (``_from_upstream``)
        raise FetchError(
            Outcome.UPSTREAM_5XX,
            "the site answered 304 Not Modified to a request that was not conditional",
            "The site is misbehaving (a 304 answers only a request with If-None-Match or "
            "If-Modified-Since); retry later, or send recover: true to get the last cached copy.",
            upstream_status=status,
        )
    if status >= 300:
        raise FetchError(
            Outcome.UPSTREAM_4XX,
            f"the site answered {status} without a usable redirect",
            "Fetch the URL the site points to, if it names one.",
            upstream_status=status,
        )


def _extract(target: Target, source: Source, started: float) -> Extracted:
    download = source.download
    finish_by = max(time.monotonic() + EXTRACT_GRACE_SECONDS, started + float(settings.SIFT_FETCH_TIMEOUT))
    with finish_line.finish_by(finish_by):
        return extract(
            download.body,
            declared_type=download.content_type,
            charset=download.charset,
            url=download.final_url,
            options=target.options,
            rendered=source.rendered,
        )


def _envelope(
    target: Target, source: Source, document: Extracted, started: float, *, start: slices.Start, caller: str
) -> dict[str, Any]:
    download = source.download
    envelope: dict[str, Any] = {
        "url": target.url,
        "final_url": download.final_url,
        "status": download.status,
        "content_type": document.media_type,
        "mode": target.options.mode,
        **slices.answer(document, target, start, caller=caller),
        "bytes": len(download.body),
        "fetched_at": source.fetched_at.isoformat().replace("+00:00", "Z"),
        "elapsed_ms": round((time.monotonic() - started) * 1000),
        **_provenance(source),
        **document.meta(),
    }
    if source.rendered:
        envelope["rendered"] = True
        envelope["consent_handled"] = source.consent_handled
    if source.screenshot is not None:
        picture = source.screenshot
        envelope["screenshot"] = {
            "kind": picture.kind,
            "type": picture.media_type,
            "width": picture.width,
            "height": picture.height,
            "data": base64.b64encode(picture.data).decode("ascii"),
        }
    if source.render_cut is not None:
        envelope["render_cut"] = source.render_cut
    return envelope


def _provenance(source: Source) -> dict[str, Any]:
    """``cache`` and ``age`` (0 for a miss), and the older ``cached``/``stale``/``cached_at``
    said in the same terms, so that none of them can contradict ``cache``."""
    cached = source.cache != "miss"
    provenance: dict[str, Any] = {
        "cache": source.cache,
        "age": cache.age_seconds(source.fetched_at) if cached else 0,
        "cached": cached,
        "stale": source.cache == "stale",
    }
    if cached:
        provenance["cached_at"] = source.fetched_at.isoformat().replace("+00:00", "Z")
    return provenance
