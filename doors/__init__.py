"""The doors: REST (``doors.rest``) and MCP (``doors.mcp``), and what both share: authentication,
the error envelope, validation of raw requests, fetches and maps answered at once, event streams,
the middleware and the health and metrics views.

Both doors call the same service functions (``batch.jobs``, ``doors.direct``); no business rule
lives here (docs/architecture.md).
"""
