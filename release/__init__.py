"""Release tooling: what is written from a source, and checked against it."""
