"""Scripts copied to nodes and run there (standard library and torch only)."""
