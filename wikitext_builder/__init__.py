"""Rebuilds WikiText-style corpora from Wikipedia Good and Featured articles (not yet implemented)."""
