"""Reference plugins shipped with the harness."""
