"""The baselines as plain ``torch.nn`` modules: no checkpoint I/O, no harness plugin protocol.

Every model maps a chunk to an :class:`~baselines.models.common.LMOutput` with
``forward(inputs, targets, state, generator=None, distribution_rows=None, analyze=False,
vocab_sample=None)`` and starts a stream with ``initial_state(batch_size, device)``. Checkpoints are
:mod:`baselines.checkpoint`'s business; the harness plugins are ``baselines.zoneout_lstm``,
``baselines.pointer_sentinel`` and ``baselines.neural_cache``.

One module per model, named after what it adds: :mod:`~baselines.models.zoneout` (the zoneout
LSTM), :mod:`~baselines.models.pointer` (the Pointer Sentinel-LSTM), :mod:`~baselines.models.continuous_cache`
(the neural cache); what they share is in :mod:`~baselines.models.recurrent` (the LSTM stack),
:mod:`~baselines.models.common` (the output record, the windowed attention) and
:mod:`~baselines.models.cpu_products` (which library multiplies on a CPU); the sampled softmax
that training may use instead of the full one is :mod:`~baselines.models.sampled_softmax`.
"""

from baselines.models.common import LMOutput
from baselines.models.continuous_cache import CacheState, NeuralCache
from baselines.models.pointer import PointerConfig, PointerSentinelLSTM, PointerState
from baselines.models.recurrent import CoreConfig, LSTMCore
from baselines.models.sampled_softmax import UnigramSampler, VocabularySample
from baselines.models.zoneout import ZoneoutLSTM

__all__ = [
    "CacheState",
    "CoreConfig",
    "LMOutput",
    "LSTMCore",
    "NeuralCache",
    "PointerConfig",
    "PointerSentinelLSTM",
    "PointerState",
    "UnigramSampler",
    "VocabularySample",
    "ZoneoutLSTM",
]
