"""What the Procfile's long-running commands (``run_cluster``, ``deliver_webhooks``, ``run_render``)
share: their start-up's system checks said as log lines, so that with ``LOG_FORMAT=json`` every
line they write is JSON (Django's own ``check`` prints a block of text to stderr)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.core import checks
from django.core.management.base import BaseCommand, SystemCheckError

logger = logging.getLogger("sift.checks")


class LoggedChecksCommand(BaseCommand):
    """A command whose system checks are logged, one line each at its level; errors still stop it."""

    def check(  # noqa: PLR0917 — Django's signature
        self,
        app_configs: Sequence[AppConfig] | None = None,
        tags: Sequence[str] | None = None,
        display_num_errors: bool = False,
        include_deployment_checks: bool = False,
        fail_level: int = checks.ERROR,
        databases: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        issues = checks.run_checks(
            app_configs=app_configs,
            tags=tags,
            include_deployment_checks=include_deployment_checks,
            databases=databases,
        )
        shown = [issue for issue in issues if not issue.is_silenced()]
        for issue in shown:
            logger.log(
                min(max(issue.level, logging.DEBUG), logging.CRITICAL), "%s", str(issue).replace("\n\t", " ")
            )
        serious = [issue for issue in shown if issue.is_serious(fail_level)]
        if serious:
            raise SystemCheckError("; ".join(str(issue) for issue in serious))
