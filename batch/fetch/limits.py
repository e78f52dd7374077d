"""URL limits, defined once: the API's validation, its OpenAPI schema, the guard and the client's
redirects all read them from here (docs/fetch-client.md)."""

from __future__ import annotations

# The longest URL sift accepts from a caller, or fetches: a target, a redirect's resolved URL.
MAX_URL_CHARS = 2048
# The longest ``Location`` value a redirect may send. Longer than a URL: resolving a relative
# reference (dot segments) can shorten it, and the resolved URL meets MAX_URL_CHARS in the guard.
MAX_LOCATION_CHARS = 2 * MAX_URL_CHARS
