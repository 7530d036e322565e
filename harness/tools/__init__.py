"""Development tools: command lines that build fixtures for the plugins and check their parts.

They are not plugins (none has a ``load_model`` factory); each runs as
``python -m harness.tools.NAME``: :mod:`~harness.tools.hf_tiny` builds a tiny random-weight
Hugging Face model for the ``hf`` plugin, :mod:`~harness.tools.detokenizer_round_trip` checks
that a detokenizer loses nothing on a benchmark file.
"""
