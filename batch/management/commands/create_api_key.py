from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from batch.models import ApiKey, CallerClass


class Command(BaseCommand):
    help = (
        "Create a caller and print its API key once (only its hash is stored), then its webhook "
        "secret once, on stderr (docs/webhooks.md); --json prints both on stdout."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="unique caller name")
        parser.add_argument("--workspace", default="", help="free-form workspace label")
        parser.add_argument(
            "--class",
            dest="caller_class",
            choices=CallerClass.values,
            default=CallerClass.FLEET,
            help="restricted callers never share the document cache",
        )
        parser.add_argument(
            "--json",
            dest="as_json",
            action="store_true",
            help='print {"name", "key", "webhook_secret"} as one JSON line on stdout instead',
        )

    def handle(
        self, *args: Any, name: str, workspace: str, caller_class: str, as_json: bool, **options: Any
    ) -> None:
        if ApiKey.objects.filter(name=name).exists():
            raise CommandError(f"a caller named {name!r} already exists; pick another name")
        api_key, raw_key = ApiKey.issue(name, workspace=workspace, caller_class=caller_class)
        if as_json:
            self.stdout.write(_json_line(name, raw_key, api_key.webhook_secret))
            return
        # The key alone on stdout, so that KEY=$(manage.py create_api_key NAME) keeps working.
        self.stdout.write(raw_key)
        self.stderr.write(f"webhook secret (shown once, docs/webhooks.md): {api_key.webhook_secret}")


def _json_line(name: str, raw_key: str, webhook_secret: str) -> str:
    return json.dumps({"name": name, "key": raw_key, "webhook_secret": webhook_secret})
