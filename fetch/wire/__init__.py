"""What crosses the wire, read strictly: headers, charsets, content codings, a download's deadline,
host names."""
