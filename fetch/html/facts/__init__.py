"""What a page says about itself (docs/api.md, "Page facts"): its metadata, the structured data it
declares (JSON-LD, microdata, RDFa, OpenGraph), a product's facts, and its data tables.

The sandbox child runs these modules with the page: standard library and lxml only.
"""
