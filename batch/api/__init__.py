"""The JSON API under ``/v1`` (docs/api.md): the NinjaAPI instance and its routers.

``auth`` says who calls, ``parser`` reads the body, ``validation`` parses raw targets,
``batches`` and ``fetches`` are the endpoints, ``errors`` the one envelope every
error leaves as, ``openapi`` what the schema says beyond django-ninja.
"""

from __future__ import annotations

from batch.api import batches, events, fetches, maps
from batch.api.errors import install_error_handlers
from batch.api.openapi import SiftApi
from batch.api.parser import StrictJsonParser

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
