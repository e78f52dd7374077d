"""Raw targets from a request body (REST or MCP) become parsed targets here, or a refusal.

The API edge is the one place request bodies are validated: the jobs service and the pipeline only
ever see parsed targets. A refusal names the field as the caller sent it: ``options.grep`` in a
REST body, ``targets[3].options.pages`` in a batch, ``grep`` for MCP's ``fetch`` and ``map``,
whose options are arguments beside the URL (``flat``).
"""

from __future__ import annotations

from django.conf import settings

from batch.errors import Refusal, Refused
from fetch.discovery.map_options import MapRequest, parse_map_request
from fetch.targets import (
    InvalidTarget,
    Target,
    TargetOptions,
    parse_target,
    parse_targets,
    parse_upload_options,
    site_option_refusal,
)


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


def validate_target(raw_target: object, *, flat: bool = False) -> Target:
    """One target, for ``/v1/fetch``: the same validation as a batch target, naming the field."""
    try:
        return parse_target(raw_target)
    except InvalidTarget as exc:
        raise _invalid(exc, flat) from None


def validate_upload_options(raw_options: dict[str, object], *, flat: bool = False) -> TargetOptions:
    """An upload's options (``/v1/read``, MCP ``read``), or ``invalid_request`` naming the field;
    one that needs a site (``render``, ``max_age``, ``recover``, ``robots``) says so."""
    try:
        return parse_upload_options(raw_options)
    except InvalidTarget as exc:
        raise _invalid(exc, flat) from None


def refuse_site_option(name: str, *, flat: bool = False) -> Refused:
    """The refusal of an option that needs a site, sent with an upload."""
    return _invalid(site_option_refusal(name), flat)


def validate_map(url: object, options: object, *, flat: bool = False) -> MapRequest:
    """The URL and options of a map, or ``invalid_request`` naming the field (REST and MCP)."""
    try:
        return parse_map_request(url, options)
    except InvalidTarget as exc:
        raise _invalid(exc, flat) from None


def _invalid(exc: InvalidTarget, flat: bool) -> Refused:
    field = exc.field.removeprefix("options.") if flat else exc.field
    return Refused(
        Refusal.INVALID_REQUEST,
        f"{field}: {exc.message}",
        exc.hint,
        details=[{"field": field, "message": exc.message}],
    )
