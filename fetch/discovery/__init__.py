"""A site's URLs for ``/v1/map``: its sitemaps, robots.txt lines and a page's links (docs/mapping.md)."""
