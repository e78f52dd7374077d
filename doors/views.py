"""Plain Django views: the health check and JSON error pages for API paths."""

from __future__ import annotations

import hmac

from django.conf import settings
from django.db import DatabaseError
from django.db.models import Max
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views import defaults
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from batch.errors import Refusal, error_json
from batch.metrics import HEARTBEAT_FRESH, QueueCollector
from batch.models import ClusterHeartbeat
from fetch.metrics import CacheCollector
from fetch.outcomes import Outcome

CLUSTER_STALE_AFTER = HEARTBEAT_FRESH


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """The database is up when it answers the query for the cluster's last heartbeat."""
    try:
        seen = ClusterHeartbeat.objects.aggregate(seen=Max("seen_at"))["seen"]
    except DatabaseError:
        return JsonResponse({"db": "down", "cluster": "unknown"}, status=503)
    fresh = seen is not None and timezone.now() - seen < CLUSTER_STALE_AFTER
    return JsonResponse({"db": "ok", "cluster": "ok" if fresh else "stale"})


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text: every process's counters (multi-process mode), and the gauges read from the
    database (queue, cluster, webhooks, cache)."""
    if settings.SIFT_METRICS_TOKEN and not _scrape_authorised(request, settings.SIFT_METRICS_TOKEN):
        response = error_json(
            Refusal.UNAUTHORIZED,
            "missing or wrong metrics token",
            "Send Authorization: Bearer <SIFT_METRICS_TOKEN>; see docs/metrics.md.",
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    queue = CollectorRegistry()
    queue.register(QueueCollector())
    queue.register(CacheCollector())
    if settings.SIFT_METRICS_DIR:
        MultiProcessCollector(queue, path=settings.SIFT_METRICS_DIR)
        body = generate_latest(queue)
    else:
        body = generate_latest(REGISTRY) + generate_latest(queue)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)


def _scrape_authorised(request: HttpRequest, token: str) -> bool:
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    # compare_digest refuses non-ASCII text; as bytes it compares any header in constant time.
    return hmac.compare_digest(given.strip().encode("utf-8", "surrogatepass"), token.encode())


def _wants_json(request: HttpRequest) -> bool:
    return request.path.startswith(("/v1/", "/healthz", "/metrics"))


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _wants_json(request):
        return error_json(Refusal.NOT_FOUND, f"no endpoint {request.path}", "See /v1/docs for the endpoints.")
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if _wants_json(request):
        return error_json(Refusal.INTERNAL, "internal error", Outcome.INTERNAL.hint)
    return defaults.server_error(request)
