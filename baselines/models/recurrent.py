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
from typing import Any, cast

import torch
from torch import Tensor, nn

from baselines.models.cpu_products import RepeatedMatmul, affine
from baselines.models.sampled_softmax import VocabularySample, sampled_target_log_probs

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


#: The half-precision dtypes autocast computes in (on a CPU, oneDNN's GEMMs; for float32's see
#: :mod:`baselines.models.cpu_products`).
HALF_PRECISION = (torch.float16, torch.bfloat16)


def full_precision(x: Tensor) -> Tensor:
    """``x`` in float32 when autocast left it in half precision; otherwise unchanged."""
    return x.float() if x.dtype in HALF_PRECISION else x


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


def lstm_step(
    gates: Tensor, h: Tensor, c: Tensor, zone_h: Tensor, zone_c: Tensor, out: tuple[Tensor, ...]
) -> None:
    """One LSTM step after the matmuls, with zoneout, written into ``out``.

    ``h_t = z_h * h_{t-1} + (1 - z_h) * o * tanh(c~_t)`` and ``c_t = z_c * c_{t-1} + (1 - z_c) * c~_t``
    with ``c~_t = f * c_{t-1} + i * g``. In training mode ``z`` is a 0/1 mask (a unit is zoned
    out, keeping its previous value); in evaluation mode it is the zoneout probability, the mask's
    expectation. The results go straight into their places in the recurrence's buffers (``out``
    must be contiguous tensors: ``torch.compile`` writes no other).

    Args:
        gates: ``[B, 4H]`` pre-activations in the order input, forget, cell, output.
        h, c: ``[B, H]`` previous state.
        zone_h, zone_c: ``[B, H]`` masks or probabilities (broadcastable).
        out: where to write ``h_t``, ``c_t`` (``[B, H]``), the gate activations ``[B, 4H]`` and
            ``tanh(c~_t)`` ``[B, H]``: what :func:`lstm_step_backward` needs.
    """
    new_h, new_c, activations, tanh_c = out
    hidden = h.shape[1]
    torch.sigmoid(gates, out=activations)
    activations[:, 2 * hidden : 3 * hidden] = torch.tanh(gates[:, 2 * hidden : 3 * hidden])
    i, f, g, o = activations.chunk(4, dim=1)
    torch.mul(f, c, out=new_c).addcmul_(i, g)  # c~_t
    torch.tanh(new_c, out=tanh_c)
    torch.mul(o, tanh_c, out=new_h).lerp_(h, zone_h)
    new_c.lerp_(c, zone_c)


def lstm_step_backward(
    grad_h: Tensor,
    grad_c: Tensor,
    activations: Tensor,
    tanh_c: Tensor,
    c: Tensor,
    zone_h: Tensor,
    zone_c: Tensor,
    grad_gates: Tensor,
) -> tuple[Tensor, Tensor]:
    """The gradients of one :func:`lstm_step`, except through the recurrent matmul.

    Args:
        grad_h, grad_c: ``[B, H]`` gradients of the loss with respect to ``h_t`` and ``c_t``.
        activations, tanh_c: what :func:`lstm_step` returned for this step.
        c: ``[B, H]`` the previous cell state ``c_{t-1}``.
        zone_h, zone_c: the step's masks or probabilities.
        grad_gates: ``[B, 4H]``, where the gradient of the gates' pre-activations is written.

    Returns:
        the parts of the gradients of ``h_{t-1}`` and ``c_{t-1}`` that do not pass through the
        gates (``[B, H]`` each).
    """
    i, f, g, o = activations.chunk(4, dim=1)
    grad_candidate_h = grad_h - grad_h * zone_h
    grad_candidate_c = grad_c - grad_c * zone_c + grad_candidate_h * o * (1 - tanh_c * tanh_c)
    gate_gradients = [
        grad_candidate_c * g * i * (1 - i),
        grad_candidate_c * c * f * (1 - f),
        grad_candidate_c * i * (1 - g * g),
        grad_candidate_h * tanh_c * o * (1 - o),
    ]
    torch.cat(gate_gradients, dim=1, out=grad_gates)
    return grad_h * zone_h, grad_c * zone_c + grad_candidate_c * f


def _autocast_operands(x: Tensor, weight: Tensor, bias: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The operands of ``x @ weight^T + bias`` cast as autocast casts ``torch.nn.functional.linear``
    (unchanged where autocast is off)."""
    device = x.device.type
    if not torch.is_autocast_enabled(device):
        return x, weight, bias
    dtype = torch.get_autocast_dtype(device)
    return x.to(dtype), weight.to(dtype), bias.to(dtype)


class _Linear(torch.autograd.Function):
    """``x @ weight^T + bias`` for ``x`` ``[N, I]`` (:func:`~baselines.models.cpu_products.affine`),
    whose backward pass lays the products out for a CPU's GEMM (:func:`_linear_gradients`): in
    float32 the input's gradient as ``(weight^T @ g^T)^T``, 10-30% faster than autograd's
    ``g @ weight`` for the baselines' shapes with MKL (docs/measurements.md).

    Under autocast the operands are cast as ``torch.nn.functional.linear`` casts them, and the
    gradients come back in the dtypes of the inputs.
    """

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
        ctx.dtypes = x.dtype, weight.dtype, bias.dtype
        x, weight, bias = _autocast_operands(x, weight, bias)
        ctx.save_for_backward(x, weight)
        with torch.autocast(x.device.type, enabled=False):
            return affine(x, weight, bias)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        x, weight = ctx.saved_tensors
        grad = grad.to(x.dtype)
        grad_x, grad_weight = _linear_gradients(x, weight, grad)
        x_dtype, weight_dtype, bias_dtype = ctx.dtypes
        return grad_x.to(x_dtype), grad_weight.to(weight_dtype), grad.sum(0).to(bias_dtype)


def _linear_gradients(x: Tensor, weight: Tensor, grad: Tensor) -> tuple[Tensor, Tensor]:
    """The gradients of ``x @ weight^T`` with respect to ``x`` ``[N, I]`` and ``weight`` ``[O, I]``
    from ``grad`` ``[N, O]``, laid out for a CPU's GEMM: the input's as ``(weight^T @ grad^T)^T``
    in float32 (MKL) but as ``grad @ weight`` in bfloat16 or float16, where oneDNN would copy the
    transposed ``grad`` first and take twice as long; the weight's by :func:`_weight_gradient`
    (docs/measurements.md)."""
    if grad.dtype in HALF_PRECISION:
        grad_x = grad @ weight
    else:
        grad_x = (weight.t() @ grad.t()).t().contiguous()
    return grad_x, _weight_gradient(x, grad)


def _weight_gradient(x: Tensor, grad: Tensor) -> Tensor:
    """``grad^T @ x``, the gradient of the weight ``[O, I]`` of ``x @ weight^T``, for ``x``
    ``[N, I]`` and ``grad`` ``[N, O]``: contiguous like the weight, so that autograd neither
    copies it into the weight's layout nor adds a tied weight's other gradient to it with strided
    reads. In bfloat16 or float16, where oneDNN takes up to twice as long from a transposed
    operand, as ``(x^T @ grad)^T`` from a contiguous copy of ``x^T``, transposed by a copy in half
    precision (docs/measurements.md); in float32 as it is (MKL reads ``grad^T`` as fast)."""
    if grad.dtype in HALF_PRECISION:
        return (x.t().contiguous() @ grad).t().contiguous()
    return grad.t() @ x


def linear(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    """``torch.nn.functional.linear`` with a faster backward pass on CPU (:class:`_Linear`).

    Shapes: ``x`` ``[..., I]``, ``weight`` ``[O, I]``, ``bias`` ``[O]`` -> ``[..., O]``."""
    flat = _Linear.apply(x.reshape(-1, x.shape[-1]), weight, bias)
    return flat.view(*x.shape[:-1], weight.shape[0])


def _gemm_layout(weight_t: Tensor) -> Tensor:
    """A transposed weight ``[I, O]`` as the right operand of a CPU GEMM: as it is in float32
    (MKL reads it transposed), but a contiguous copy in bfloat16 or float16, where oneDNN takes
    1.2-1.4 times as long for the decoder's product from the transposed view as it takes to make
    the copy and multiply from it (docs/measurements.md)."""
    if weight_t.dtype in HALF_PRECISION:
        return weight_t.contiguous()
    return weight_t


#: How many logits :class:`_TargetLogSoftmax` normalises at a time: 2 MB of float32, so that each
#: block stays in a core's L2 cache between its passes.
_SOFTMAX_BLOCK_ELEMENTS = 2**19


def _row_blocks(rows: int, width: int) -> list[slice]:
    """Consecutive slices of ``rows`` rows of ``width`` logits, each at most
    ``_SOFTMAX_BLOCK_ELEMENTS`` logits (and at least one row)."""
    step = max(1, _SOFTMAX_BLOCK_ELEMENTS // width)
    return [slice(start, start + step) for start in range(0, rows, step)]


class _TargetLogSoftmax(torch.autograd.Function):
    """``log_softmax(x @ weight^T + bias)`` at one target per row, for ``x`` ``[N, I]``, without
    the ``[N, V]`` log-distribution.

    The forward pass normalises the logits a block of rows at a time while the block is in cache;
    the backward pass overwrites the saved logits, block by block, with their gradient
    ``grad * (onehot(target) - softmax)``, then takes the products of :func:`_linear_gradients`.
    Beside ``linear``, ``log_softmax`` and ``gather`` this saves the float32 copies of the logits
    in both directions and the dense ``[N, V]`` gradient of ``gather``: a training step of the
    WikiText-2 medium zoneout LSTM (33,278 words) takes 0.69-0.77 of the time under bfloat16
    autocast and 0.71 in float32 on one CPU core (``benchmarks/baselines_speed.py``,
    docs/measurements.md).

    Dtypes as :class:`_Linear`: under autocast the logits are in its dtype, normalised in float32.
    Returns ``[N]`` in float32 (float64 for float64 inputs). The graph cannot be run backward
    twice (``retain_graph``): the first backward pass consumes the logits.
    """

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, bias: Tensor, targets: Tensor) -> Tensor:
        ctx.dtypes = x.dtype, weight.dtype, bias.dtype
        x, weight, bias = _autocast_operands(x, weight, bias)
        with torch.autocast(x.device.type, enabled=False):
            logits = torch.addmm(bias, x, _gemm_layout(weight.t()))  # [N, V]
        blocks = _row_blocks(*logits.shape)
        normalizers = torch.cat([torch.logsumexp(full_precision(logits[rows]), dim=1) for rows in blocks])
        ctx.save_for_backward(x, weight, logits, normalizers, targets)
        ctx.consumed = False
        return full_precision(logits.gather(1, targets.unsqueeze(1)).squeeze(1)) - normalizers

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor, Tensor, None]:
        if ctx.consumed:
            raise RuntimeError("the fused target log-softmax cannot be run backward twice")
        ctx.consumed = True
        x, weight, logits, normalizers, targets = ctx.saved_tensors
        grad_bias = torch.zeros(logits.shape[1], dtype=normalizers.dtype, device=logits.device)
        for rows in _row_blocks(*logits.shape):
            scale = grad[rows].to(normalizers.dtype).unsqueeze(1)  # [n, 1]
            block = full_precision(logits[rows])  # a float32 copy under autocast, else a view
            block.sub_(normalizers[rows].unsqueeze(1)).exp_().mul_(-scale)
            block.scatter_add_(1, targets[rows].unsqueeze(1), scale)
            grad_bias += block.sum(0)
            if block.dtype != logits.dtype:
                logits[rows] = block  # the logits' gradient, in their dtype
        grad_x, grad_weight = _linear_gradients(x, weight, logits)
        x_dtype, weight_dtype, bias_dtype = ctx.dtypes
        return grad_x.to(x_dtype), grad_weight.to(weight_dtype), grad_bias.to(bias_dtype), None


def target_log_softmax(x: Tensor, weight: Tensor, bias: Tensor, targets: Tensor) -> Tensor:
    """``log_softmax(linear(x, weight, bias))`` at the targets, fused (:class:`_TargetLogSoftmax`).

    Shapes: ``x`` ``[..., I]``, ``weight`` ``[V, I]``, ``bias`` ``[V]``, int64 ``targets``
    ``[...]`` -> ``[...]`` (float32, or float64 for float64 inputs)."""
    flat = _TargetLogSoftmax.apply(x.reshape(-1, x.shape[-1]), weight, bias, targets.reshape(-1))
    return flat.view(targets.shape)


#: The step functions of the recurrence: :func:`lstm_step` and :func:`lstm_step_backward`, or
#: compiled copies of them.
StepFunctions = tuple[Callable[..., None], Callable[..., tuple[Tensor, Tensor]]]


class ZoneoutRecurrence(torch.autograd.Function):
    """``T`` steps of a zoneout LSTM layer after its input projection, with a hand-written
    backward pass (backpropagation through time).

    Autograd would record a dozen nodes per step and accumulate the recurrent weight's gradient
    in ``T`` small matmuls; here the backward pass walks the steps once with one matmul each, and
    the weight's gradient is one ``[H, T*B] @ [T*B, 4H]`` matmul at the end.

    The recurrent matmuls run in the dtype of ``weight_hh`` (bfloat16 under autocast, which the
    caller applies), the element-wise work and the state in float32 (or float64 for float64
    inputs).
    """

    @staticmethod
    def forward(
        ctx: Any,
        input_part: Tensor,
        h0: Tensor,
        c0: Tensor,
        weight_hh: Tensor,
        zone_h: Tensor,
        zone_c: Tensor,
        steps: StepFunctions,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Args: ``input_part`` ``[T, B, 4H]`` (``x W_ih^T + b``); ``h0``, ``c0`` ``[B, H]``;
        ``weight_hh`` ``[4H, H]``; ``zone_h``, ``zone_c`` ``[T, B, H]`` (masks, or probabilities
        expanded). Returns the outputs ``[T, B, H]`` (every step's ``h``) and the final ``h``, ``c``."""
        length, batch, _ = input_part.shape
        state_dtype = torch.promote_types(input_part.dtype, torch.float32)
        hs = input_part.new_empty(length + 1, batch, weight_hh.shape[1], dtype=state_dtype)
        cs, tanh_cs = torch.empty_like(hs), torch.empty_like(hs[1:])
        activations = input_part.new_empty(input_part.shape, dtype=state_dtype)
        hs[0], cs[0] = h0, c0
        recurrent = RepeatedMatmul(weight_hh, batch)
        for t in range(length):
            gates = recurrent(hs[t].to(weight_hh.dtype), add=input_part[t])
            steps[0](
                gates.to(state_dtype),
                hs[t],
                cs[t],
                zone_h[t],
                zone_c[t],
                (hs[t + 1], cs[t + 1], activations[t], tanh_cs[t]),
            )
        ctx.save_for_backward(hs, cs, activations, tanh_cs, weight_hh, zone_h, zone_c)
        ctx.steps, ctx.input_dtype = steps, input_part.dtype
        return hs[1:], hs[-1].clone(), cs[-1].clone()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad_outputs: Tensor, grad_h: Tensor, grad_c: Tensor) -> tuple[Tensor | None, ...]:
        hs, cs, activations, tanh_cs, weight_hh, zone_h, zone_c = ctx.saved_tensors
        length, batch, hidden = tanh_cs.shape
        grad_gates = torch.empty_like(activations)
        transposed = RepeatedMatmul(weight_hh.t().contiguous(), batch)
        grad_h = grad_h.to(hs.dtype) + grad_outputs[-1]
        grad_c = grad_c.to(hs.dtype)
        for t in reversed(range(length)):
            grad_h_carry, grad_c = ctx.steps[1](
                grad_h, grad_c, activations[t], tanh_cs[t], cs[t], zone_h[t], zone_c[t], grad_gates[t]
            )
            grad_h = grad_h_carry + transposed(grad_gates[t].to(weight_hh.dtype)).to(hs.dtype)
            if t:
                grad_h = grad_h + grad_outputs[t - 1]
        flat_gates = grad_gates.view(length * batch, -1).to(weight_hh.dtype)
        grad_weight = _weight_gradient(
            hs[:-1].reshape(length * batch, hidden).to(weight_hh.dtype), flat_gates
        )
        return grad_gates.to(ctx.input_dtype), grad_h, grad_c, grad_weight, None, None, None


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
        steps: StepFunctions = (lstm_step, lstm_step_backward),
    ) -> tuple[Tensor, LayerState]:
        """Run ``T`` steps.

        Args:
            x: ``[B, T, I]``.
            state: ``(h, c)``, each ``[B, H]``.
            generator: draws the zoneout masks in training mode (None: torch's default
                generator); unused in evaluation mode, which applies the expectation.
            steps: the step functions (:data:`StepFunctions`).

        Returns:
            outputs ``[B, T, H]`` (the zoned-out ``h`` of every step) and the final state.
        """
        batch, length, _ = x.shape
        input_part = linear(x.transpose(0, 1), self.weight_ih, self.bias)  # [T, B, 4H]
        shape = (length, batch, self.hidden_size)
        zone_h, zone_c = self._zoneout(shape, zoneout_hidden, zoneout_cell, x, generator)
        h, c = state
        with torch.autocast(x.device.type, enabled=False):
            outputs, h, c = ZoneoutRecurrence.apply(
                input_part, h, c, self.weight_hh.to(input_part.dtype), zone_h, zone_c, steps
            )
        return outputs.transpose(0, 1), (h, c)

    def _zoneout(
        self,
        shape: tuple[int, int, int],
        hidden: float,
        cell: float,
        x: Tensor,
        generator: torch.Generator | None,
    ) -> tuple[Tensor, Tensor]:
        """The ``[T, B, H]`` zoneout of ``h`` and ``c``: 0/1 masks drawn in training mode (zeros
        when both probabilities are 0; a uniform draw below ``p``, which is twice as fast as
        ``bernoulli_`` on CPU), the probabilities themselves in evaluation mode."""
        if self.training and (hidden > 0 or cell > 0):
            masks = [
                (torch.rand(shape, device=x.device, generator=generator) < p).to(x.dtype)
                for p in (hidden, cell)
            ]
            return masks[0], masks[1]
        if self.training:
            hidden = cell = 0.0
        return tuple(  # type: ignore[return-value]
            torch.full((), p, device=x.device, dtype=x.dtype).expand(shape) for p in (hidden, cell)
        )


class LSTMCore(nn.Module):
    """Embedding, a stack of zoneout LSTM layers with locked dropout, and the output layer.

    ``forward`` returns the top layer's output features ``[B, T, D]`` (``D = config.output_size``,
    after output dropout); ``logits`` maps them to ``[..., V]``.
    """

    #: False makes training use the plain log-softmax too (tests compare the two).
    fuse_training_softmax = True

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
        self.steps: StepFunctions = (lstm_step, lstm_step_backward)

    def compile_step(self) -> None:
        """Fuse each step's element-wise work, forward and backward, into one kernel each with
        ``torch.compile``."""
        self.steps = (
            torch.compile(lstm_step, dynamic=False, fullgraph=True),
            torch.compile(lstm_step_backward, dynamic=False, fullgraph=True),
        )

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
                x, state[index], config.zoneout_hidden, config.zoneout_cell, generator, self.steps
            )
            new_state.append(layer_state)
            x = locked_dropout(x, config.dropout, self.training, generator)
        return x, new_state

    def logits(self, features: Tensor) -> Tensor:
        """``[..., D]`` -> ``[..., V]``."""
        return linear(features, self.decoder.weight, self.decoder.bias)

    def log_vocab(self, features: Tensor) -> Tensor:
        """float32 ``[..., V]``: the full softmax's log-distribution from features ``[..., D]``."""
        return torch.log_softmax(full_precision(self.logits(features)), dim=-1)

    def target_log_vocab(self, features: Tensor, targets: Tensor) -> Tensor:
        """float32 ``[B, T]``: each target's ``log p_vocab`` under the full softmax, from features
        ``[B, T, D]`` and int64 targets ``[B, T]``.

        Training on a CPU takes :func:`target_log_softmax`, which never holds the ``[B, T, V]``
        log-distribution (unless ``fuse_training_softmax`` is False). Evaluation gathers from
        :meth:`log_vocab`, exactly as when the models also return full distributions, so that
        the two agree bit for bit, as the harness's causality audit requires on a CPU.
        """
        if self.training and self.fuse_training_softmax and features.device.type == "cpu":
            return target_log_softmax(features, self.decoder.weight, self.decoder.bias, targets)
        return self.log_vocab(features).gather(2, targets.unsqueeze(2)).squeeze(2)

    def sampled_target_log_vocab(self, features: Tensor, targets: Tensor, sample: VocabularySample) -> Tensor:
        """float32 ``[B, T]``: the sampled-softmax estimate of each target's ``log p_vocab`` from
        features ``[B, T, D]`` (:mod:`baselines.models.sampled_softmax`; training only)."""
        return sampled_target_log_probs(features, self.decoder.weight, self.decoder.bias, targets, sample)
