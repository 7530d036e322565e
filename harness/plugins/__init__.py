"""The generic plugins shipped with the harness, one module or package each:
:mod:`~harness.plugins.unigram` (an add-one unigram model) and :mod:`~harness.plugins.hf` (any
Hugging Face causal LM, with the detokenizer it needs).

The reproduced baselines' plugins are the top-level modules of :mod:`baselines`; development tools
are in :mod:`harness.tools`. A user's own plugin lives anywhere importable, or is registered in
the ``harness.models`` entry-point group.
"""
