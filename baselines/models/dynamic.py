"""Dynamic evaluation (Krause et al. 2018, "Dynamic Evaluation of Neural Sequence Models",
arXiv 1709.07432): the weights of a trained model follow the text it has already scored.

The text is cut into segments ``s_1, s_2, ...`` of ``segment`` positions. Each segment is scored
with the current weights ``theta``; only then are the weights moved by the gradient ``g`` of
that segment's mean negative log-likelihood (so no score ever depends on its own target or a
later one). ``theta_0`` are the trained weights.

- ``sgd``: ``theta <- theta - lr * g + decay * (theta_0 - theta)`` (Krause's SGD update, with
  his optional decay towards the trained weights; ``decay = 0`` is plain SGD).
- ``rms`` (Krause's "RMS with a global decay prior", his eq. 8 and the released code):
  ``theta <- theta - lr * g / (sqrt(MS) + eps) + decay * min(RMS_norm, 1 / decay) * (theta_0 - theta)``
  where ``MS`` is the per-parameter mean of the squared gradient collected on training text
  before evaluation and ``RMS_norm = sqrt(MS) / mean(sqrt(MS))`` (the mean over all parameters),
  so that parameters whose gradients are large on training text decay faster; the clip keeps
  each parameter's decay factor at most 1.

Both terms are computed from the weights before the step, as Krause's code does.
"""

from __future__ import annotations

import dataclasses
import math

import torch
from torch import Tensor

#: The update rules, by name.
METHODS = ("sgd", "rms")
#: ``eps`` of the ``rms`` update (Krause's released code uses 2e-5).
RMS_EPSILON = 2e-5


@dataclasses.dataclass(frozen=True)
class DynamicSettings:
    """How the weights adapt.

    Attributes:
        method: ``sgd`` or ``rms`` (see the module docstring).
        lr: the step size ``eta`` (at least 0; 0 scores the static model).
        decay: ``lambda``, the pull towards the trained weights per update, in [0, 1].
        segment: positions per update; None: one update per chunk the harness sends (its BPTT).

    Raises:
        ValueError: a value out of range (the message names it).
    """

    method: str = "sgd"
    lr: float = 0.0
    decay: float = 0.0
    segment: int | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if not 0.0 <= self.lr < math.inf:
            raise ValueError(f"lr must be a finite number of at least 0, got {self.lr!r}")
        if self.lr > torch.finfo(torch.float32).max:  # torch fails on it in the first update
            raise ValueError(f"lr must be at most 3.4e+38, the largest float32, got {self.lr!r}")
        if not 0.0 <= self.decay <= 1.0:
            raise ValueError(f"decay must be in [0, 1], got {self.decay!r}")
        if self.segment is not None and self.segment < 1:
            raise ValueError(f"segment must be a positive integer, got {self.segment!r}")

    @property
    def adapts(self) -> bool:
        """Whether the weights move at all (``lr`` 0 and ``decay`` 0 score the static model)."""
        return self.lr + self.decay > 0


class DynamicAdapter:
    """The weights of a module and the update of :class:`DynamicSettings` on them.

    Args:
        parameters: the ``P`` parameters adapted (their values now are ``theta_0``).
        settings: the update rule and its hyper-parameters.
        root_mean_squares: for ``rms``, ``sqrt(MS)`` of each parameter (same shapes); ignored by
            ``sgd``.
    """

    def __init__(
        self,
        parameters: list[Tensor],
        settings: DynamicSettings,
        root_mean_squares: list[Tensor] | None = None,
    ) -> None:
        self.parameters = parameters
        self.settings = settings
        self.trained = [parameter.detach().clone() for parameter in parameters]
        self.gradient_scales: list[Tensor | float] = [1.0] * len(parameters)
        self.decay_rates: list[Tensor | float] = [settings.decay] * len(parameters)
        if settings.method == "rms":
            if root_mean_squares is None or len(root_mean_squares) != len(parameters):
                raise ValueError("the rms update needs sqrt(MS) of every parameter")
            mean = torch.cat([rms.flatten() for rms in root_mean_squares]).mean().clamp(min=1e-30)
            self.gradient_scales = [1.0 / (rms + RMS_EPSILON) for rms in root_mean_squares]
            if settings.decay > 0:
                self.decay_rates = [
                    settings.decay * (rms / mean).clamp(max=1.0 / settings.decay) for rms in root_mean_squares
                ]

    @torch.no_grad()
    def restore(self) -> None:
        """Put the trained weights back (the update keeps no other state)."""
        for parameter, trained in zip(self.parameters, self.trained, strict=True):
            parameter.copy_(trained)

    def step(self, loss: Tensor) -> None:
        """Move the weights by the gradient of ``loss`` (a scalar, the mean NLL of a segment
        already scored) and decay them towards the trained ones."""
        gradients = torch.autograd.grad(loss, self.parameters, allow_unused=True)
        lr = self.settings.lr
        with torch.no_grad():  # in place, with no temporaries: a step touches every weight
            for parameter, gradient, trained, scale, rate in zip(
                self.parameters, gradients, self.trained, self.gradient_scales, self.decay_rates, strict=True
            ):
                if not isinstance(rate, float) or rate > 0:  # theta + rate * (theta_0 - theta)
                    parameter.lerp_(trained, rate)
                if gradient is None:
                    continue
                if isinstance(scale, float):
                    parameter.add_(gradient, alpha=-lr * scale)
                else:
                    parameter.addcmul_(gradient, scale, value=-lr)
