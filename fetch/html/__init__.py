"""An HTML page read for an agent: hidden text dropped, the main content found by the page's kind,
Markdown made (docs/fetch-content.md).

The sandbox child imports these modules: the standard library, lxml and trafilatura only; nothing
here may import Django or the rest of sift.
"""
