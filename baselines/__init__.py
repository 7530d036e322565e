"""The baselines: KN-5, the zoneout LSTM, the Pointer Sentinel-LSTM and the neural cache.

Layout (imports only go down this list, never up):

* :mod:`baselines.models`: the neural models as plain ``torch.nn`` modules and what they share;
* :mod:`baselines.checkpoint`: checkpoint files (save, load, package, verify);
* :mod:`baselines.plugin_bridge`: a model as a harness :class:`~harness.LanguageModel`, and which
  checkpoint a plugin loads;
* :mod:`baselines.tuning`: the neural cache's grid search and the tuning file it writes;
* the harness plugins (``python -m harness eval baselines.NAME``), one top-level module per
  model and named after it: :mod:`baselines.zoneout_lstm`, :mod:`baselines.pointer_sentinel`,
  :mod:`baselines.neural_cache` and :mod:`baselines.kneser_ney` (numpy only);
* :mod:`baselines.training`, :mod:`baselines.analysis` and :mod:`baselines.cli`
  (``python -m baselines``).
"""
