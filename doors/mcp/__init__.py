"""sift as a Model Context Protocol server: the REST API's functions behind tools (docs/mcp.md)."""
