"""``changes: true``: a reading compared with the caller's last one (docs/api.md, "Changes")."""
