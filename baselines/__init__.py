"""The baselines: KN-5, the zoneout LSTM, the Pointer Sentinel-LSTM and the neural cache.

Layout (imports only go down this list, never up):

* :mod:`baselines.models`: the neural models as plain ``torch.nn`` modules and what they share;
* :mod:`baselines.checkpoint`: checkpoint files (save, load, package, verify);
* :mod:`baselines.scoring`: a model as a harness :class:`~harness.LanguageModel`, and which
  checkpoint a plugin loads;
* the harness plugins ``python -m harness eval baselines.NAME``: :mod:`baselines.zoneout_lstm`,
  :mod:`baselines.pointer_sentinel`, :mod:`baselines.neural_cache` (which also tunes the cache)
  and :mod:`baselines.kneser_ney` (numpy only);
* :mod:`baselines.training`, :mod:`baselines.analysis` and :mod:`baselines.cli`
  (``python -m baselines``).
"""
