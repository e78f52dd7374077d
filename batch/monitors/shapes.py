"""A monitor and a change as the API answers them, and as the ``monitor.changed`` webhook carries
them (docs/api.md, "Monitors")."""

from __future__ import annotations

from typing import Any

from batch.models import Monitor, MonitorChange


def monitor_summary(monitor: Monitor) -> dict[str, Any]:
    """A monitor as the API answers it (and its webhook carries it)."""
    return {
        "id": monitor.id,
        "url": monitor.url,
        "options": monitor.options,
        "every": monitor.every,
        "callback_url": monitor.callback_url or None,
        "created_at": monitor.created_at,
        "paused": monitor.paused,
        "paused_reason": monitor.paused_reason or None,
        "next_run_at": monitor.due_at,
        "runs": monitor.runs,
        "failures_in_a_row": monitor.failures_in_a_row,
        "last_run_at": monitor.last_run_at,
        "last_outcome": monitor.last_outcome or None,
        "last_error": monitor.last_error or None,
        "last_change_at": monitor.last_change_at,
        "changes_url": f"/v1/monitors/{monitor.id}/changes",
    }


def change_out(change: MonitorChange) -> dict[str, Any]:
    return {
        "at": change.at,
        "previous_at": change.previous_at,
        "diff": change.diff,
        "added": change.added,
        "removed": change.removed,
        "diff_truncated": change.diff_truncated,
    }
