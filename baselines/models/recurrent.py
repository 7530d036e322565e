"""The recurrent core shared by the baselines: an LSTM stack with zoneout and variational dropout.

Shapes: ``B`` streams, ``T`` positions per chunk, ``E`` embedding size, ``H`` hidden size,
``V`` vocabulary size.

Dropout and zoneout follow the module's mode, as in ``torch.nn``: after ``module.train()`` every
forward pass draws masks, after ``module.eval()`` none does (zoneout then uses its expectation).
The optional ``generator`` of a forward pass only chooses *which* masks are drawn (None: torch's
default generator); the training loop reseeds its own per step, so a resumed run draws exactly the
masks of an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Callable
from typing import cast

import torch
from torch import Tensor, nn

#: Per-layer recurrent state: ``(h, c)``, each ``[B, H]``.
LayerState = tuple[Tensor, Tensor]


#: The types of the config fields: the values each accepts and how a message names them.
_FIELD_TYPES = {
    "int": (numbers.Integral, "an integer"),
    "float": (numbers.Real, "a number"),
    "bool": (bool, "true or false"),
}


def _check_type(field: dataclasses.Field, value: object) -> None:
    """Fail unless ``value`` suits a config field of type ``int``, ``float`` or ``bool`` (an
    integer is a number; ``True`` is neither)."""
    annotation = field.type if isinstance(field.type, str) else field.type.__name__
    expected, wanted = _FIELD_TYPES[annotation]
    if not isinstance(value, expected) or (isinstance(value, bool) and annotation != "bool"):
        raise ValueError(f"{field.name} must be {wanted}, got {value!r}")


@dataclasses.dataclass(frozen=True)
class CoreConfig:
    """Hyper-parameters of :class:`LSTMCore`.

    Attributes:
        vocab_size: ``V``.
        embedding_size: ``E``.
        hidden_size: ``H`` of every layer (the last one is ``E`` when weights are tied).
        num_layers: stacked LSTM layers.
        dropout: variational (locked) dropout on each layer's input and the last layer's output.
        zoneout_hidden, zoneout_cell: zoneout probability of each unit of ``h`` and ``c``.
        tie_weights: share the embedding matrix with the output layer.

    Raises:
        ValueError: a value of the wrong type or out of range (the message names the field).
    """

    vocab_size: int
    embedding_size: int = 650
    hidden_size: int = 650
    num_layers: int = 2
    dropout: float = 0.5
    zoneout_hidden: float = 0.1
    zoneout_cell: float = 0.1
    tie_weights: bool = True

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            _check_type(field, getattr(self, field.name))
        for name in ("dropout", "zoneout_hidden", "zoneout_cell"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {value}")
        for name in ("vocab_size", "embedding_size", "hidden_size", "num_layers"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")

    @property
    def output_size(self) -> int:
        """Width of the top layer's output: ``E`` when weights are tied, else ``H``."""
        return self.embedding_size if self.tie_weights else self.hidden_size


def full_precision(x: Tensor) -> Tensor:
    """``x`` in float32 when autocast left it in half precision; otherwise unchanged."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def locked_dropout(x: Tensor, p: float, training: bool, generator: torch.Generator | None = None) -> Tensor:
    """Variational dropout: one mask per stream, shared by all positions of the chunk.

    Args:
        x: ``[B, T, D]``.
        p: drop probability; no-op when 0 or when not ``training``.
        generator: draws the mask (None: torch's default generator).
    """
    if p == 0.0 or not training:
        return x
    keep = torch.empty(x.shape[0], 1, x.shape[2], device=x.device, dtype=x.dtype)
    keep.bernoulli_(1.0 - p, generator=generator)
    return x * keep / (1.0 - p)


def lstm_pointwise(
    gates: Tensor, h: Tensor, c: Tensor, zone_h: Tensor | float, zone_c: Tensor | float
) -> LayerState:
    """One LSTM step after the matmuls, with zoneout.

    ``h_t = z_h * h_{t-1} + (1 - z_h) * o * tanh(c~_t)`` and ``c_t = z_c * c_{t-1} + (1 - z_c) * c~_t``
    with ``c~_t = f * c_{t-1} + i * g``. In training mode ``z`` is a 0/1 mask (a unit is zoned
    out, keeping its previous value); in evaluation mode it is the zoneout probability, the mask's
    expectation.

    Args:
        gates: ``[B, 4H]`` pre-activations in the order input, forget, cell, output.
        h, c: ``[B, H]`` previous state.
        zone_h, zone_c: ``[B, H]`` masks or scalar probabilities.
    """
    in_gate, forget_gate, cell_gate, out_gate = gates.chunk(4, dim=1)
    candidate_c = torch.sigmoid(forget_gate) * c + torch.sigmoid(in_gate) * torch.tanh(cell_gate)
    candidate_h = torch.sigmoid(out_gate) * torch.tanh(candidate_c)
    new_h = (
        torch.lerp(candidate_h, h, zone_h)
        if isinstance(zone_h, Tensor)
        else zone_h * h + (1.0 - zone_h) * candidate_h
    )
    new_c = (
        torch.lerp(candidate_c, c, zone_c)
        if isinstance(zone_c, Tensor)
        else zone_c * c + (1.0 - zone_c) * candidate_c
    )
    return new_h, new_c


class ZoneoutLSTMLayer(nn.Module):
    """One LSTM layer with zoneout on ``h`` and ``c``; weights laid out like ``torch.nn.LSTM``."""

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.weight_ih = nn.Parameter(torch.empty(4 * hidden_size, input_size))
        self.weight_hh = nn.Parameter(torch.empty(4 * hidden_size, hidden_size))
        self.bias = nn.Parameter(torch.empty(4 * hidden_size))
        bound = hidden_size**-0.5
        for weight in (self.weight_ih, self.weight_hh, self.bias):
            nn.init.uniform_(weight, -bound, bound)

    def forward(
        self,
        x: Tensor,
        state: LayerState,
        zoneout_hidden: float,
        zoneout_cell: float,
        generator: torch.Generator | None = None,
        pointwise: Callable[..., LayerState] = lstm_pointwise,
    ) -> tuple[Tensor, LayerState]:
        """Run ``T`` steps.

        Args:
            x: ``[B, T, I]``.
            state: ``(h, c)``, each ``[B, H]``.
            generator: draws the zoneout masks in training mode (None: torch's default
                generator); unused in evaluation mode, which applies the expectation.
            pointwise: the step function (``lstm_pointwise`` or a compiled copy of it).

        Returns:
            outputs ``[B, T, H]`` (the zoned-out ``h`` of every step) and the final state.
        """
        batch, length, _ = x.shape
        input_part = torch.nn.functional.linear(x, self.weight_ih, self.bias)  # [B, T, 4H]
        h, c = state
        masks: list[tuple[Tensor | float, Tensor | float]]  # per step: zone_h, zone_c
        if self.training and (zoneout_hidden > 0 or zoneout_cell > 0):
            shape = (length, batch, self.hidden_size)
            zone_h = torch.empty(shape, device=x.device, dtype=x.dtype).bernoulli_(
                zoneout_hidden, generator=generator
            )
            zone_c = torch.empty(shape, device=x.device, dtype=x.dtype).bernoulli_(
                zoneout_cell, generator=generator
            )
            masks = list(zip(zone_h.unbind(0), zone_c.unbind(0)))
        else:
            masks = [(0.0, 0.0) if self.training else (zoneout_hidden, zoneout_cell)] * length
        outputs = []
        # unbind once: indexing input_part per step would make backward zero-fill [B, T, 4H]
        # for every step (quadratic in T).
        for step, step_input in enumerate(input_part.unbind(1)):
            gates = torch.addmm(step_input, h, self.weight_hh.t())
            h, c = pointwise(gates, h, c, *masks[step])
            outputs.append(h)
        return torch.stack(outputs, dim=1), (h, c)


class LSTMCore(nn.Module):
    """Embedding, a stack of zoneout LSTM layers with locked dropout, and the output layer.

    ``forward`` returns the top layer's output features ``[B, T, D]`` (``D = config.output_size``,
    after output dropout); ``logits`` maps them to ``[..., V]``.
    """

    def __init__(self, config: CoreConfig) -> None:
        super().__init__()
        self.config = config
        self.embedding = nn.Embedding(config.vocab_size, config.embedding_size)
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)
        sizes = (
            [config.embedding_size] + [config.hidden_size] * (config.num_layers - 1) + [config.output_size]
        )
        self.layers = nn.ModuleList(
            ZoneoutLSTMLayer(sizes[i], sizes[i + 1]) for i in range(config.num_layers)
        )
        self.decoder = nn.Linear(config.output_size, config.vocab_size)
        nn.init.zeros_(self.decoder.bias)
        if config.tie_weights:
            self.decoder.weight = self.embedding.weight
        else:
            nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        self.pointwise: Callable[..., LayerState] = lstm_pointwise

    def compile_step(self) -> None:
        """Fuse each step's element-wise work into one kernel with ``torch.compile``."""
        self.pointwise = torch.compile(lstm_pointwise, dynamic=False, fullgraph=True)

    def initial_state(self, batch_size: int, device: torch.device | str) -> list[LayerState]:
        """Zero ``(h, c)`` for every layer, each ``[B, H_layer]``."""
        sizes = [cast(ZoneoutLSTMLayer, layer).hidden_size for layer in self.layers]
        return [
            (torch.zeros(batch_size, size, device=device), torch.zeros(batch_size, size, device=device))
            for size in sizes
        ]

    def forward(
        self, inputs: Tensor, state: list[LayerState], generator: torch.Generator | None = None
    ) -> tuple[Tensor, list[LayerState]]:
        """Args: ``inputs`` int64 ``[B, T]``; ``generator`` draws the dropout and zoneout masks in
        training mode (None: torch's default generator; unused in evaluation mode). Returns
        features ``[B, T, D]`` and the new state."""
        config = self.config
        x = locked_dropout(self.embedding(inputs), config.dropout, self.training, generator)
        new_state = []
        for index, layer in enumerate(self.layers):
            x, layer_state = layer(
                x, state[index], config.zoneout_hidden, config.zoneout_cell, generator, self.pointwise
            )
            new_state.append(layer_state)
            x = locked_dropout(x, config.dropout, self.training, generator)
        return x, new_state

    def logits(self, features: Tensor) -> Tensor:
        """``[..., D]`` -> ``[..., V]``."""
        return self.decoder(features)
