"""ASGI entry point of ``/mcp``, served by uvicorn (the Procfile's ``mcp`` process, docs/mcp.md).

The rest of the site stays on gunicorn (WSGI); this process serves the MCP endpoint only.
"""

from __future__ import annotations

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sift_site.settings")
django.setup()

from batch.mcp.server import application as build_application  # noqa: E402 - needs Django set up

application = build_application()
