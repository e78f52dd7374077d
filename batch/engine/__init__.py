"""The job engine: claims, the drain task, wake-ups, heartbeat, reconnect, stopping, the supervisor
and the ``FetchFunc`` seam (docs/workers.md).

It never imports the fetch pipeline: the production fetch is ``batch.pipeline_bridge``, loaded by name.
"""
