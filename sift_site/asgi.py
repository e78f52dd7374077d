"""ASGI entry point of the web process, served by gunicorn's uvicorn workers (see the Procfile).

ASGI so that an event stream (``/v1/batch/{id}/events``) waits on the event loop rather than in a
request thread; every other view is synchronous and runs in a thread of its own.
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sift_site.settings")
# Each request's synchronous code runs in a thread made for it: a connection per thread would be
# a new connection per request, so on PostgreSQL this process takes its connections from a pool.
os.environ.setdefault("SIFT_DATABASE_POOL", "true")

application = get_asgi_application()
