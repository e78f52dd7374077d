"""Documents other than HTML: what a body is (``sniff``), PDF text, JSON through jq."""
