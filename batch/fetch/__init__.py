"""The fetch pipeline (SPEC §5): guard, client, extract, narrow, sandbox, gate, cache.

It knows nothing about jobs: it turns one target into an envelope or a ``FetchError``.
"""
