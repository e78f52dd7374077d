"""ASGI entry point of the web process, served by gunicorn's uvicorn workers (see the Procfile).

ASGI so that an event stream (``/v1/batch/{id}/events``) waits on the event loop rather than in a
request thread; every other view is synchronous and runs in a request thread, one request at a
time in each, kept from request to request (``RequestThreads``).
"""

from __future__ import annotations

import gc
import os

from django.core.asgi import get_asgi_application

from sift_site.request_threads import RequestThreads

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sift_site.settings")
# Requests run in as many threads as there are requests at once, each thread going from request
# to request: on PostgreSQL this process takes its connections from a pool, which bounds them and
# checks each as it hands it out, rather than keeping one per thread.
os.environ.setdefault("SIFT_DATABASE_POOL", "true")

django_application = get_asgi_application()  # sets Django up

from doors.edge import RequestEdge  # noqa: E402 - needs Django set up
from doors.middleware import BoundedRequests  # noqa: E402 - needs Django set up

# Each request's id and its door's count first; bodies are bounded, and answers must be taken in
# time, before a request thread is lent.
application = RequestEdge(BoundedRequests(RequestThreads(django_application)))
# gunicorn loads this module once and forks its workers from it (``--preload``): objects made so
# far are left out of the garbage collector's passes, which would otherwise write to every page
# holding them and so give each worker its own copy of pages it could share.
gc.freeze()
