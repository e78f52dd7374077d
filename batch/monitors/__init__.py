"""Monitors: the service both doors call (``service``) and the shapes they answer (``shapes``).
Their runs are the job engine's (``batch/engine/monitor_runs.py``)."""
