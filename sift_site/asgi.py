"""ASGI entry point of the web process, served by gunicorn's uvicorn workers (see the Procfile).

ASGI so that an event stream (``/v1/batch/{id}/events``) waits on the event loop rather than in a
request thread; every other view is synchronous and runs in a thread of its own.
"""

from __future__ import annotations

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sift_site.settings")
# Each request's synchronous code runs in a thread made for it: a connection per thread would be
# a new connection per request, so on PostgreSQL this process takes its connections from a pool.
os.environ.setdefault("SIFT_DATABASE_POOL", "true")

application = get_asgi_application()
# gunicorn loads this module once and forks its workers from it (``--preload``): objects made so
# far are left out of the garbage collector's passes, which would otherwise write to every page
# holding them and so give each worker its own copy of pages it could share.
gc.freeze()
