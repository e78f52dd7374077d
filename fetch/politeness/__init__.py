"""Politeness towards sites: each host's turn and robots.txt (docs/politeness.md)."""
