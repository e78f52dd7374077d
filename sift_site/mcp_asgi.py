"""ASGI entry point of ``/mcp``, served by uvicorn (the Procfile's ``mcp`` process, docs/mcp.md).

The rest of the site is the web process (gunicorn with uvicorn workers); this one serves the
MCP endpoint only.
"""

from __future__ import annotations

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sift_site.settings")
# Requests run in threads of their own here: PostgreSQL connections come from a pool (settings.py).
os.environ.setdefault("SIFT_DATABASE_POOL", "true")
django.setup()

from doors.edge import RequestEdge  # noqa: E402 - needs Django set up
from doors.mcp.server import application as build_application  # noqa: E402 - needs Django set up

application = RequestEdge(build_application())
