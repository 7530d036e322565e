"""Baseline language models, each a harness plugin (``python -m harness eval baselines.NAME``)."""
