from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from batch.models import ApiKey, hash_key


class Command(BaseCommand):
    help = "Issue a fresh key for the 'demo' caller and a password for the 'admin' user, and print both."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8000, help="port the web server will listen on")

    def handle(self, *args: Any, port: int, **options: Any) -> None:
        demo = ApiKey.objects.filter(name="demo").first()
        if demo is None:
            demo, raw_key = ApiKey.issue("demo", workspace="demo")
        else:
            # The old key cannot be shown again (only its hash is kept), so the demo gets a new one,
            # and a new webhook secret, which is never shown twice either.
            raw_key = "sk_" + secrets.token_urlsafe(32)
            ApiKey.objects.filter(pk=demo.pk).update(key_sha256=hash_key(raw_key), active=True)
            demo.rotate_webhook_secret()
        password = secrets.token_urlsafe(12)
        user_model = get_user_model()
        admin = user_model.objects.filter(username="admin").first() or user_model(username="admin")
        admin.is_staff = admin.is_superuser = True
        admin.set_password(password)
        admin.save()
        base = f"http://127.0.0.1:{port}"
        self.stdout.write(
            f"\nsift is starting on {base}\n"
            f"  demo API key : {raw_key}\n"
            f"  webhook secret: {demo.webhook_secret}  (verifies the demo's webhooks, docs/webhooks.md)\n"
            f"  try          : curl -s -H 'Authorization: Bearer {raw_key}' '{base}/v1/fetch?url=https://example.org/'\n"
            f"  API docs     : {base}/v1/docs\n"
            f"  admin        : {base}/admin/  user admin, password {password}\n"
        )
