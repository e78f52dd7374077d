"""Signed webhooks (docs/webhooks.md): an event's delivery made due where the event happens
(``events``), signed per Standard Webhooks with the caller's secret (``signing``), then claimed,
sent, retried and recorded by ``manage.py deliver_webhooks`` (``delivery``).

The job side never imports the fetch pipeline: the POST is ``batch.pipeline_bridge.post_webhook``,
loaded by name (import-linter's ``job-side-not-pipeline``).
"""
