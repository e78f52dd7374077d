"""The fetch pipeline, a Django app of its own (label ``fetch``): guard, client, extract, narrow,
sandbox, gate, cache (docs/fetch-pipeline.md).

It knows nothing about jobs: it turns one target into an envelope or a ``FetchError``.
"""
