"""The JSON API under ``/v1`` (docs/api.md): the NinjaAPI instance and its routers.

``parser`` reads the body, ``batches``, ``fetches``, ``reads``, ``maps`` and ``events`` are the endpoints,
``errors`` sends every error as the one envelope, ``openapi`` says what the schema says beyond
django-ninja. Who calls (``doors.auth``) and raw targets (``doors.validation``) are shared with MCP.
"""

from __future__ import annotations

from doors.rest import batches, events, fetches, maps, monitors, reads
from doors.rest.errors import install_error_handlers
from doors.rest.openapi import SiftApi
from doors.rest.parser import StrictJsonParser

api = SiftApi(
    title="sift",
    version="1",
    description="Read the web for agents: clean Markdown, text, PDF pages, jq, grep and questions.",
    parser=StrictJsonParser(),
    docs_url="/docs",
    openapi_url="/openapi.json",
    urls_namespace="v1",
)
install_error_handlers(api)
api.add_router("/batch", batches.router)
api.add_router("/batch", events.router)
api.add_router("/fetch", fetches.router)
api.add_router("/map", maps.router)
api.add_router("/read", reads.router)
api.add_router("/monitors", monitors.router)
