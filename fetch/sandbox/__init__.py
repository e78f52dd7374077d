"""Resource-limited child processes for the parsers of untrusted bytes (docs/security.md).

``child`` runs isolated (``python -I``) and loads ``fetch`` by path, so this ``__init__`` imports
nothing.
"""
