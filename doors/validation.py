"""Raw targets from a request body (REST or MCP) become parsed targets here, or a refusal.

The API edge is the one place request bodies are validated: the jobs service and the pipeline only
ever see parsed targets.
"""

from __future__ import annotations

from django.conf import settings

from batch.errors import Refusal, Refused
from fetch.discovery.map_options import MapRequest, parse_map_request
from fetch.targets import InvalidTarget, Target, parse_target, parse_targets


def validate_targets(raw_targets: list[object]) -> list[Target]:
    """Refuse an empty, oversized or invalid submission before touching the database.

    The cheap checks (count) come before any per-target validation, which compiles programs.
    """
    if not raw_targets:
        raise Refused(
            Refusal.NO_TARGETS, "the submission has no targets", 'Send {"targets": ["https://..."]}.'
        )
    limit = settings.SIFT_BATCH_TARGETS_PER_JOB
    if len(raw_targets) > limit:
        raise Refused(
            Refusal.TOO_MANY_TARGETS,
            f"{len(raw_targets)} targets is more than the {limit} a job may hold",
            f"Split the targets into jobs of at most {limit}.",
        )
    try:
        return parse_targets(raw_targets)
    except InvalidTarget as exc:
        raise Refused(
            Refusal.INVALID_REQUEST,
            f"{exc.field}: {exc.message}",
            exc.hint,
            details=[{"index": exc.index, "field": exc.field, "message": exc.message}],
        ) from None


def validate_target(raw_target: object) -> Target:
    """One target, for ``/v1/fetch``: the same validation as a batch target, naming the field."""
    try:
        return parse_target(raw_target)
    except InvalidTarget as exc:
        raise Refused(
            Refusal.INVALID_REQUEST,
            f"{exc.field}: {exc.message}",
            exc.hint,
            details=[{"field": exc.field, "message": exc.message}],
        ) from None


def validate_map(url: object, options: object) -> MapRequest:
    """The URL and options of a map, or ``invalid_request`` naming the field (REST and MCP)."""
    if options is not None and not isinstance(options, dict):
        raise Refused(
            Refusal.INVALID_REQUEST, "options must be an object", 'Send options as {"links": true}.'
        )
    try:
        return parse_map_request(url, options or {})
    except InvalidTarget as exc:
        field = exc.field if exc.field == "url" else f"options.{exc.field}"
        raise Refused(
            Refusal.INVALID_REQUEST,
            f"{field}: {exc.message}",
            exc.hint,
            details=[{"field": field, "message": exc.message}],
        ) from None
