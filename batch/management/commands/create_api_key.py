from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from batch.models import ApiKey, CallerClass


class Command(BaseCommand):
    help = "Create a caller and print its API key once; only its hash is stored."

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

    def handle(self, *args: Any, name: str, workspace: str, caller_class: str, **options: Any) -> None:
        if ApiKey.objects.filter(name=name).exists():
            raise CommandError(f"a caller named {name!r} already exists; pick another name")
        _, raw_key = ApiKey.issue(name, workspace=workspace, caller_class=caller_class)
        self.stdout.write(raw_key)
