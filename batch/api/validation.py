"""Raw targets from a request body (REST or MCP) become parsed targets here, or a refusal.

The API edge is the one place request bodies are validated: the jobs service and the pipeline only
ever see parsed targets.
"""

from __future__ import annotations

from django.conf import settings

from batch.errors import Refusal, Refused
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
