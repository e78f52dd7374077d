"""Rules between settings, as Django system checks: ``manage.py check`` and every command that runs
checks (``migrate``, ``run_cluster``, ``qcluster``, ``runserver``) report them at start-up.

Each setting is read and typed in ``sift_site/settings.py``; what one setting requires of
another is said here, with an id (``sift.E…`` errors stop the command, ``sift.W…`` warnings do
not) and a hint naming the setting to change. Tests: ``tests/test_checks.py``.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Info, Tags, Warning, register

from batch.engine import seam
from fetch import guard, limits
from fetch.render import autoconsent, renderer, server_process
from fetch.sandbox.pool import SANDBOX_CHILDREN, SANDBOX_MEMORY_BYTES


def longest_fetch_seconds() -> float:
    """How long one fetch of the pipeline may hold a claim: a rendered one, the longest (gate wait,
    download, a render and its crash retry with their starts and stops), then extraction grace."""
    longest = limits.longest_render_seconds(
        float(settings.SIFT_FETCH_TIMEOUT), float(settings.SIFT_RENDER_TIMEOUT)
    )
    return max(
        limits.longest_fetch_seconds(float(settings.SIFT_FETCH_TIMEOUT)),
        longest + limits.EXTRACT_GRACE_SECONDS,
    )


@register(Tags.compatibility)
def claim_lease_outlasts_a_fetch(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """A lease shorter than a fetch hands a target still being fetched (or rendered) to a second
    worker, which fetches (or renders) it beside the first."""
    if settings.SIFT_TEST_FETCH_FUNC:
        return []  # a stand-in fetch takes as long as its test says; the rule is about the pipeline
    lease, longest = settings.SIFT_BATCH_CLAIM_LEASE, longest_fetch_seconds()
    if lease > longest:
        return []
    return [
        Error(
            f"SIFT_BATCH_CLAIM_LEASE ({lease:g}s) does not outlast one fetch "
            f"({longest:g}s: gate wait, SIFT_FETCH_TIMEOUT, a render of SIFT_RENDER_TIMEOUT and its crash "
            "retry with their starts, extraction grace)",
            hint=f"Set SIFT_BATCH_CLAIM_LEASE above {longest:g}s, or unset it: the default is "
            "SIFT_FETCH_TIMEOUT + 2 x SIFT_RENDER_TIMEOUT + 90s.",
            id="sift.E001",
        )
    ]


@register(Tags.compatibility)
def drain_ends_before_the_task_timeout(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """django-q2 kills a task at ``timeout`` and hands it out again at ``retry``.

    A drain claims its last target just before ``SIFT_BATCH_DRAIN_SECONDS`` and may hold it for a
    whole lease; a timeout shorter than both kills a fetch, a retry not above the timeout runs a
    task twice at once. Settings derive both; this holds them to it if ``Q_CLUSTER`` is edited.
    """
    timeout, retry = _cluster_seconds("timeout"), _cluster_seconds("retry")
    needed = settings.SIFT_BATCH_DRAIN_SECONDS + settings.SIFT_BATCH_CLAIM_LEASE
    messages: list[CheckMessage] = []
    if timeout <= needed:
        messages.append(
            Error(
                f"Q_CLUSTER['timeout'] ({timeout:g}s) would kill a drain before its last claim ends "
                f"(SIFT_BATCH_DRAIN_SECONDS + SIFT_BATCH_CLAIM_LEASE = {needed:g}s)",
                hint="Lower SIFT_BATCH_DRAIN_SECONDS, or leave Q_CLUSTER's timeout as settings derive it.",
                id="sift.E002",
            )
        )
    if retry <= timeout:
        messages.append(
            Error(
                f"Q_CLUSTER['retry'] ({retry:g}s) is not above its timeout ({timeout:g}s): "
                "django-q2 would hand a running drain to a second worker",
                hint="Leave Q_CLUSTER's retry as settings derive it (timeout + 60s).",
                id="sift.E003",
            )
        )
    return messages


def _cluster_seconds(key: str) -> float:
    value = settings.Q_CLUSTER.get(key)
    return float(value) if isinstance(value, int | float) else 0.0


@register(Tags.security)
def fetch_override_names_a_test_module(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The tests' stand-ins for the fetch of batch targets and for the guard's resolver."""
    messages: list[CheckMessage] = []
    fetch_override, resolve_override = settings.SIFT_TEST_FETCH_FUNC, settings.SIFT_TEST_RESOLVE_FUNC
    if fetch_override and not seam.allowed_test_fetch(fetch_override):
        messages.append(
            Error(
                f"SIFT_TEST_FETCH_FUNC={fetch_override!r}: {seam.TEST_FETCH_FUNC_RULE}",
                hint="Unset SIFT_TEST_FETCH_FUNC: in production the fetch pipeline does the work.",
                id="sift.E004",
            )
        )
    if resolve_override and not guard.allowed_test_resolver(resolve_override):
        messages.append(
            Error(
                f"SIFT_TEST_RESOLVE_FUNC={resolve_override!r}: {guard.TEST_RESOLVE_FUNC_RULE}",
                hint="Unset SIFT_TEST_RESOLVE_FUNC: in production the system's resolver looks names up.",
                id="sift.E004",
            )
        )
    return messages


# A caller's share of a bounded resource, beside the bound for everyone, and what it bounds.
PER_CALLER_AND_TOTAL = (
    ("SIFT_BATCH_WAITS_PER_CALLER", "SIFT_BATCH_WAITS_TOTAL", "waiting request"),
    ("SIFT_MCP_PER_CALLER", "SIFT_MCP_TOTAL", "MCP request in flight"),
    ("SIFT_BATCH_STREAMS_PER_CALLER", "SIFT_BATCH_STREAMS_TOTAL", "event stream"),
    ("SIFT_UPLOADS_PER_CALLER", "SIFT_UPLOADS_TOTAL", "upload in flight"),
)


# The largest upload the sandbox child is sure to read, as a share of its memory limit, which holds
# the upload, what is read from it and the child itself (a 20 MB workbook raised the child's
# resident memory by 100 MB, docs/benchmarks.md; address space runs higher).
UPLOAD_SHARE_OF_CHILD_MEMORY = 8


@register(Tags.compatibility)
def upload_limit_fits_its_reader(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """An upload larger than the sandbox child can read is taken in only to end ``memory_limit``;
    one smaller than the JSON limit refuses files any other request could carry."""
    most, child = settings.SIFT_UPLOAD_MAX_BYTES, SANDBOX_MEMORY_BYTES // UPLOAD_SHARE_OF_CHILD_MEMORY
    least = settings.SIFT_MAX_REQUEST_BYTES
    if least <= most <= child:
        return []
    if most > child:
        message = (
            f"SIFT_UPLOAD_MAX_BYTES ({most}) is above what the sandbox child can read within its memory "
            f"({child} bytes: 1/{UPLOAD_SHARE_OF_CHILD_MEMORY} of its {SANDBOX_MEMORY_BYTES}): larger "
            "uploads are held in memory only to end memory_limit"
        )
    else:
        message = (
            f"SIFT_UPLOAD_MAX_BYTES ({most}) is below the request limit ({least} bytes): an upload is "
            "refused where any JSON request would be read"
        )
    return [
        Warning(
            message,
            hint=f"Set SIFT_UPLOAD_MAX_BYTES between {least // 1024}KiB and {child >> 20}MiB "
            "(the default is 20MiB).",
            id="sift.W013",
        )
    ]


@register(Tags.compatibility)
def per_caller_shares_within_their_totals(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    return [
        Warning(
            f"{share} ({getattr(settings, share)}) is above {total} ({getattr(settings, total)}): "
            f"one caller can hold every {what}",
            hint=f"Set {share} at most {total}.",
            id="sift.W001",
        )
        for share, total, what in PER_CALLER_AND_TOTAL
        if getattr(settings, share) > getattr(settings, total)
    ]


@register(Tags.security)
def webhook_shares_leave_senders_for_others(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """A share as large as all the senders lets one caller, or one dead host, hold every one."""
    sending = settings.SIFT_WEBHOOK_SENDING
    shares = {"SIFT_WEBHOOK_PER_CALLER": settings.SIFT_WEBHOOK_PER_CALLER}
    shares["SIFT_WEBHOOK_PER_HOST"] = settings.SIFT_WEBHOOK_PER_HOST
    too_large = [f"{name} ({value})" for name, value in shares.items() if value >= sending]
    if not too_large:
        return []
    return [
        Warning(
            f"{' and '.join(too_large)} not below SIFT_WEBHOOK_SENDING ({sending}): receivers that "
            "never answer can hold every webhook sender",
            hint="Keep SIFT_WEBHOOK_PER_CALLER and SIFT_WEBHOOK_PER_HOST below SIFT_WEBHOOK_SENDING "
            "(defaults: 2, 4 and 8).",
            id="sift.W006",
        )
    ]


@register(Tags.security)
def only_allowed_has_networks(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    if not settings.SIFT_FETCH_ONLY_ALLOWED or settings.SIFT_FETCH_ALLOW_CIDRS:
        return []
    return [
        Warning(
            "SIFT_FETCH_ONLY_ALLOWED is on and SIFT_FETCH_ALLOW_CIDRS is empty: every fetch is refused",
            hint="Set SIFT_FETCH_ALLOW_CIDRS to the networks sift may fetch from, or turn "
            "SIFT_FETCH_ONLY_ALLOWED off.",
            id="sift.W002",
        )
    ]


@register(Tags.compatibility)
def connect_timeout_within_the_fetch_timeout(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    connect, total = settings.SIFT_FETCH_CONNECT_TIMEOUT, settings.SIFT_FETCH_TIMEOUT
    if connect <= total:
        return []
    return [
        Warning(
            f"SIFT_FETCH_CONNECT_TIMEOUT ({connect:g}s) is above SIFT_FETCH_TIMEOUT ({total:g}s), "
            "which ends every fetch first",
            hint="Set SIFT_FETCH_CONNECT_TIMEOUT below SIFT_FETCH_TIMEOUT (defaults: 10s and 30s).",
            id="sift.W003",
        )
    ]


@register(Tags.compatibility)
def retry_wait_within_retry_for(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    wait, give_up = settings.SIFT_BATCH_RETRY_WAIT, settings.SIFT_BATCH_RETRY_FOR
    if wait <= give_up:
        return []
    return [
        Warning(
            f"SIFT_BATCH_RETRY_WAIT ({wait:g}s) is above SIFT_BATCH_RETRY_FOR ({give_up:g}s): "
            "a busy target fails at its second busy answer",
            hint="Set SIFT_BATCH_RETRY_WAIT below SIFT_BATCH_RETRY_FOR (defaults: 2s and 10m).",
            id="sift.W004",
        )
    ]


@register(Tags.security, deploy=True)
def metrics_need_a_token(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    if settings.SIFT_METRICS_TOKEN:
        return []
    return [
        Warning(
            "SIFT_METRICS_TOKEN is unset: anyone who reaches /metrics reads the service's counters",
            hint="Set SIFT_METRICS_TOKEN (16+ characters) and have Prometheus send it as a bearer token.",
            id="sift.W005",
        )
    ]


@register(Tags.security)
def render_network_mode(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Which browser renders, and where it runs: its own network namespace, or the fail-closed
    proxy alone."""
    if not renderer.available():
        return []
    if server_process.network_mode() == "namespace":
        what = "in a network namespace of its own (no route anywhere; the fail-closed proxy behind it)"
        hint = None
    else:
        what = "with the fail-closed proxy only (no network namespace here)"
        hint = "Set SIFT_RENDER_NAMESPACE=true on a platform that allows unprivileged user namespaces."
    browser = settings.SIFT_RENDER_CHROMIUM
    return [Info(f"rendering's browser ({browser}) runs {what}", hint=hint, id="sift.I001")]


@register(Tags.compatibility)
def consent_rules_installed(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Rendered pages answer consent banners with DuckDuckGo's rules, which ``make`` installs with
    npm; without them a render reads the page with its banner (overlays are still removed)."""
    if not renderer.available() or autoconsent.installed():
        return []
    return [
        Warning(
            "rendered pages answer no cookie-consent banner: @duckduckgo/autoconsent is not "
            f"installed ({autoconsent.PACKAGE})",
            hint="Install Node.js and npm, then run make (npm ci installs it as package-lock.json pins it).",
            id="sift.W012",
        )
    ]


@register(Tags.compatibility)
def fetch_share_within_the_sandbox_children(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """A caller's fetch share above the parsers a process has lets one caller keep every sandbox
    child of a process busy and queue other callers' pages behind its own. It can make sense
    where one key is the whole fleet; it is the operator's choice, said at start-up."""
    share = settings.SIFT_FETCH_PER_CALLER
    if share <= SANDBOX_CHILDREN:
        return []
    return [
        Warning(
            f"SIFT_FETCH_PER_CALLER ({share}) is above the sandbox children a process has here "
            f"({SANDBOX_CHILDREN}, one per core, at least 2): one caller's pages can keep every "
            "parser of a process busy and queue other callers' pages behind them",
            hint=f"Unset SIFT_FETCH_PER_CALLER (the default is at most {SANDBOX_CHILDREN} here) or set "
            "it at most the sandbox children; keep it higher only where one key serves everyone.",
            id="sift.W007",
        )
    ]
