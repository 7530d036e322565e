"""Harness plugin: dynamic evaluation (Krause et al. 2018) of a trained baseline (the update
rules: :mod:`baselines.models.dynamic`; the tuning: :mod:`baselines.dynamic_tuning`).

``python -m harness eval baselines.dynamic_eval --dataset ptb`` wraps the
packaged zoneout LSTM (or the checkpoint ``--checkpoint`` names) and adapts its weights to the
text as it scores it: each segment is scored first, then the weights take one step on that
segment's loss. ``--model-args``:

- ``base``: ``zoneout_lstm`` (default) or ``pointer_sentinel``;
- ``cache_window``: 0 (default) or the window of a neural cache on the zoneout LSTM, with
  ``theta`` and ``interpolation`` given or as tuned for :mod:`baselines.neural_cache`;
- ``method``: ``sgd`` or ``rms`` (default: the one tuned, ``rms`` first, else ``sgd``); ``lr``
  (eta) and ``decay`` (lambda): given, else as ``python -m baselines tune-dynamic`` tuned them
  (``dynamic_eval.json`` beside the checkpoint);
- ``segment``: positions per update (default: the tuned one, else each chunk of the protocol);
- ``rms_tokens``: training tokens over which ``rms`` collects its mean squared gradients
  (default :data:`DEFAULT_RMS_TOKENS`).

The papers' protocol scores one stream (``--batch-size 1``, the harness's default). With ``B``
streams the B streams share one set of weights, updated with the mean loss over all of them:
then stream ``b`` learns from text of the other streams, which lies later in the split, and the
causality audit rejects the evaluation.
"""

from __future__ import annotations

import copy
import dataclasses
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import torch
from torch import Tensor, nn

from baselines import checkpoint as checkpoints
from baselines.models import PointerSentinelLSTM, ZoneoutLSTM
from baselines.models.dynamic import METHODS, DynamicAdapter, DynamicSettings
from baselines.neural_cache import cache_adaptation, cache_from_checkpoint
from baselines.plugin_bridge import (
    TorchLanguageModel,
    announce_checkpoint,
    dataset_argument,
    detach_state,
    resolve_checkpoint,
)
from baselines.tuning_files import DYNAMIC_EVAL, read_tuned
from harness.datasets import Dataset
from harness.plugin import (
    Chunk,
    ChunkScores,
    ModelUnavailable,
    NonNegativeInt,
    OneOf,
    PluginError,
    PositiveInt,
    declared_model_args,
)
from wikitext_toolkit_core.result_schema import TEST_TIME_ADAPTATION

PLUGIN = "dynamic_eval"
#: The models dynamic evaluation wraps.
BASES = (ZoneoutLSTM.kind, PointerSentinelLSTM.kind)
#: Training tokens over which ``rms`` collects its mean squared gradients.
DEFAULT_RMS_TOKENS = 20_000
#: Positions per gradient of the ``rms`` statistic when no ``segment`` is set (the default BPTT).
STATISTIC_SEGMENT = 100


@dataclasses.dataclass(frozen=True)
class DynamicEvalArgs:
    """The plugin's ``--model-args`` (the module docstring says more).

    Attributes:
        base: the trained model adapted, one of :data:`BASES`.
        cache_window: 0, or the window of a neural cache on the zoneout LSTM.
        theta, interpolation: the cache's settings (None: as tuned for the cache).
        method: ``sgd`` or ``rms`` (None: the one tuned, ``rms`` first, else ``sgd``).
        lr, decay: the update's eta and lambda (None: as tuned).
        segment: positions per update (None: as tuned, else each chunk of the protocol).
        rms_tokens: training tokens of the ``rms`` statistic (None: :data:`DEFAULT_RMS_TOKENS`).
    """

    base: Annotated[str, OneOf(BASES)] = ZoneoutLSTM.kind
    cache_window: NonNegativeInt = 0
    theta: float | None = None
    interpolation: float | None = None
    method: Annotated[str, OneOf(METHODS)] | None = None
    lr: float | None = None
    decay: float | None = None
    segment: PositiveInt | None = None
    rms_tokens: PositiveInt | None = None


@dataclasses.dataclass(frozen=True)
class BaseModel:
    """The trained model dynamic evaluation starts from.

    Attributes:
        base: ``zoneout_lstm`` or ``pointer_sentinel``.
        cache_window: 0, or the window of a neural cache on the zoneout LSTM.
        theta, interpolation: the cache's settings (None: as tuned for the cache).
        rms_tokens: training tokens of the ``rms`` statistic.
    """

    base: str = ZoneoutLSTM.kind
    cache_window: int = 0
    theta: float | None = None
    interpolation: float | None = None
    rms_tokens: int = DEFAULT_RMS_TOKENS

    def key(self, method: str) -> str:
        """The entry of the tuning file that holds this model's tuned ``method``."""
        return f"{self.base}/{method}" + (f"/cache{self.cache_window}" if self.cache_window else "")


def read_dynamic_tuning(checkpoint: Path, retune: Sequence[str]) -> dict[str, Any]:
    """The tuned settings ({key: {"method", "lr", "decay", "segment", ...}}) of the tuning file
    beside ``checkpoint`` (:data:`baselines.tuning_files.DYNAMIC_EVAL`); {} without a file.

    Raises:
        PluginError: the file is not a dynamic-evaluation tuning file or an entry is out of range.
        ModelUnavailable: the file was tuned on another checkpoint (the message says to run
            ``retune``, the command that tunes this one).
    """
    return read_tuned(checkpoint, DYNAMIC_EVAL, retune)


class DynamicLanguageModel(TorchLanguageModel):
    """A :class:`TorchLanguageModel` whose weights adapt to the text it has scored.

    :meth:`score` cuts each chunk ``[B, T]`` into segments of ``settings.segment`` positions
    (all ``T`` when None); each is scored with the current weights, and then (only then) the
    weights step on its mean NLL over its real positions (over all ``B`` streams).
    :meth:`reset` puts the trained weights back, so every pass starts from the trained model.
    The module stays in evaluation mode (no dropout or zoneout noise); gradients still flow.
    """

    def __init__(
        self,
        module: nn.Module,
        device: str | torch.device,
        checkpoint: Path,
        settings: DynamicSettings,
        root_mean_squares: list[Tensor] | None = None,
    ) -> None:
        super().__init__(module, device, checkpoint=checkpoint)  # type: ignore[arg-type]
        self.settings = settings
        parameters = [parameter.requires_grad_(True) for parameter in self.module.parameters()]
        statistics = None if root_mean_squares is None else [rms.to(self.device) for rms in root_mean_squares]
        self.adapter = DynamicAdapter(parameters, settings, statistics)
        self.metadata["dynamic_evaluation"] = dataclasses.asdict(settings)
        if settings.adapts:
            every = f"every {settings.segment} positions" if settings.segment else "every chunk"
            self.metadata[TEST_TIME_ADAPTATION] = f"dynamic evaluation ({settings.method}, an update {every})"

    def reset(self, batch_size: int) -> None:
        """Back to the trained weights and an empty state. One stream only (``--batch-size 1``,
        the papers' protocol): streams sharing adapted weights would each learn from the others'
        text, which comes later in the split."""
        if batch_size != 1:
            raise PluginError(
                "dynamic_eval: adapts its weights to one stream: run it with --batch-size 1 "
                f"(got {batch_size})"
            )
        self.adapter.restore()
        super().reset(batch_size)

    def score(self, chunk: Chunk) -> ChunkScores:
        """Score ``chunk`` segment by segment, each before the weights learn from it.

        Returns target log-probabilities ``[B, T]`` and, where ``chunk.distribution_mask`` asks,
        the distributions ``[K, V]`` from the same forward passes, in row-major order.
        """
        inputs = torch.from_numpy(chunk.inputs).to(self.device)
        targets = torch.from_numpy(chunk.targets).to(self.device)
        mask = torch.from_numpy(chunk.mask).to(self.device)
        wanted = None if chunk.distribution_mask is None else torch.from_numpy(chunk.distribution_mask)
        length = inputs.shape[1]
        segment = self.settings.segment or length
        adapting = self.settings.adapts
        scores, rows, where = [], [], []
        for begin in range(0, length, segment):
            columns = slice(begin, begin + segment)
            asked = None if wanted is None else wanted[:, columns].to(self.device)
            with torch.set_grad_enabled(adapting):  # the graph of the segment's loss
                output = self.module(
                    inputs[:, columns], targets[:, columns], self.state, distribution_rows=asked
                )
            self.state = detach_state(output.state)
            scores.append(output.target_log_probs.detach())
            if asked is not None and output.distributions is not None:
                rows.append(output.distributions.detach())
                stream, column = torch.nonzero(asked.cpu(), as_tuple=True)
                where.append(stream * length + column + begin)
            real = mask[:, columns]
            if real.any() and adapting:
                self.adapter.step(-output.target_log_probs[real].mean())  # after scoring it
        distributions = None
        if wanted is not None and rows:
            order = torch.argsort(torch.cat(where))  # segment by segment -> row-major
            distributions = torch.cat(rows)[order.to(self.device)]
        return ChunkScores(torch.cat(scores, dim=1), distributions)


def gradient_statistics(module: Any, ids: np.ndarray, *, eos_id: int, segment: int) -> list[Tensor]:
    """``sqrt(MS)`` of each parameter of ``module``: the root of the mean over the segments of
    ``ids`` (int ``[N]``, one stream from ``<eos>``) of the squared gradient of the segment's
    mean NLL, the module in evaluation mode and the weights unchanged (Krause et al.'s ``MS``)."""
    parameters = list(module.parameters())
    device = parameters[0].device
    squares = [torch.zeros_like(parameter) for parameter in parameters]
    stream = torch.from_numpy(np.concatenate([[eos_id], ids]).astype(np.int64)).to(device).view(1, -1)
    state = module.initial_state(1, device)
    count = 0
    for begin in range(0, len(ids), segment):
        inputs = stream[:, begin : begin + segment]
        targets = stream[:, begin + 1 : begin + 1 + segment]
        inputs = inputs[:, : targets.shape[1]]
        with torch.enable_grad():
            output = module(inputs, targets, state)
            gradients = torch.autograd.grad(-output.target_log_probs.mean(), parameters, allow_unused=True)
        state = detach_state(output.state)
        for total, gradient in zip(squares, gradients, strict=True):
            if gradient is not None:
                total += gradient.detach() ** 2
        count += 1
    return [(total / max(count, 1)).sqrt() for total in squares]


def base_module(path: Path, dataset: Dataset, base: BaseModel) -> tuple[nn.Module, dict[str, Any] | None]:
    """The trained module of ``base`` from the checkpoint ``path`` (with its cache, if any), and
    the checkpoint's ``calibration`` record (a calibrated pointer's) if it has one."""
    if base.cache_window:
        cache = cache_from_checkpoint(
            path, dataset, base.cache_window, theta=base.theta, interpolation=base.interpolation
        )
        return cache, None
    module, payload = checkpoints.load_model(path, dataset.vocab, kind=base.base)
    return module, payload.get("calibration")


class DynamicFactory:
    """Builds :class:`DynamicLanguageModel` s of one trained module for any settings (the
    plugin's and ``tune-dynamic``'s).

    Each model adapts a copy of the trained module of its own, so a model's updates never reach
    another model of the factory or the trained module, from which the ``rms`` statistic is
    collected, once per segment length for the factory's lifetime (:meth:`statistics`).
    """

    def __init__(self, dataset: Dataset, path: Path, base: BaseModel, device: str) -> None:
        self.dataset, self.path, self.base, self.device = dataset, path, base, device
        module, self.calibration = base_module(path, dataset, base)
        self.module = module.to(device).eval()
        self._statistics: dict[int, list[Tensor]] = {}

    def statistics(self, segment: int | None) -> list[Tensor]:
        """``sqrt(MS)`` of each trained parameter for updates of ``segment`` positions (None:
        :data:`STATISTIC_SEGMENT`), on the CPU, collected on the first call for that length."""
        length = segment or STATISTIC_SEGMENT
        if length not in self._statistics:
            ids = self.dataset.tokens("train").ids[: self.base.rms_tokens]
            eos_id = self.dataset.vocab.eos_id
            self._statistics[length] = [
                rms.cpu() for rms in gradient_statistics(self.module, ids, eos_id=eos_id, segment=length)
            ]
        return self._statistics[length]

    def model(self, settings: DynamicSettings) -> DynamicLanguageModel:
        """A model of ``settings`` adapting a copy of the trained module of its own."""
        statistics = self.statistics(settings.segment) if settings.method == "rms" else None
        module = copy.deepcopy(self.module)
        model = DynamicLanguageModel(module, self.device, self.path, settings, statistics)
        if self.calibration is not None:
            model.metadata["calibration"] = self.calibration
        described = model.metadata["dynamic_evaluation"]
        described.update(dataclasses.asdict(self.base))
        if self.base.cache_window:  # the cache's settings in use, given or tuned
            described.update(theta=module.theta, interpolation=module.interpolation)
            adaptations = [model.metadata.get(TEST_TIME_ADAPTATION), cache_adaptation(self.base.cache_window)]
            model.metadata[TEST_TIME_ADAPTATION] = " and ".join(filter(None, adaptations))
        if settings.method != "rms":
            del described["rms_tokens"]
        return model


def _options(model_args: DynamicEvalArgs) -> tuple[BaseModel, dict[str, Any]]:
    """The base model and the update's settings of ``model_args`` (a neural cache sits on the
    zoneout LSTM only)."""
    if model_args.cache_window and model_args.base != ZoneoutLSTM.kind:
        raise PluginError(f"{PLUGIN}: the neural cache (cache_window) sits on the zoneout_lstm base only")
    model = BaseModel(
        model_args.base,
        model_args.cache_window,
        model_args.theta,
        model_args.interpolation,
        model_args.rms_tokens or DEFAULT_RMS_TOKENS,
    )
    update = {name: getattr(model_args, name) for name in ("method", "lr", "decay", "segment")}
    return model, update


def _settings(update: dict[str, Any], base: BaseModel, path: Path, dataset: Dataset) -> DynamicSettings:
    """The update's settings: those given, the others as tuned beside ``path``; no ``method``
    given, the tuned one (``rms`` before ``sgd``), else ``sgd``."""
    if update["lr"] is None or update["decay"] is None:
        command = ["python", "-m", "baselines", "tune-dynamic", "--dataset", dataset_argument(dataset)]
        command += ["--checkpoint", str(path), "--base", base.base]
        if base.cache_window:
            command += ["--cache-window", str(base.cache_window)]
        tuning = read_dynamic_tuning(path, retune=command)
        tuned_methods = [method for method in ("rms", "sgd") if base.key(method) in tuning]
        update["method"] = update["method"] or next(iter(tuned_methods), "sgd")
        tuned = tuning.get(base.key(update["method"]))
        if tuned is None:
            command += ["--method", update["method"]]
            raise ModelUnavailable(
                f"no tuned dynamic evaluation ({base.key(update['method'])}) beside {path}: run "
                f"`{shlex.join(command)}` or give lr and decay"
            )
        for name in ("lr", "decay", "segment"):
            update[name] = tuned[name] if update[name] is None else update[name]
    update["method"] = update["method"] or "sgd"
    try:
        return DynamicSettings(**update)
    except ValueError as error:
        raise PluginError(f"{PLUGIN}: {error}") from None


@declared_model_args(PLUGIN, DynamicEvalArgs)
def load_model(
    dataset: Dataset, *, device: str, checkpoint: str | None, model_args: DynamicEvalArgs
) -> DynamicLanguageModel:
    """Harness factory: dynamic evaluation of a trained model for ``dataset`` (see the module
    docstring for ``model_args``)."""
    base, update = _options(model_args)
    command = [
        "python",
        "-m",
        "harness",
        "eval",
        f"baselines.{PLUGIN}",
        "--dataset",
        dataset_argument(dataset),
    ]
    path = resolve_checkpoint(base.base, dataset, checkpoint, device=device, command=command)
    settings = _settings(update, base, path, dataset)
    factory = DynamicFactory(dataset, path, base, device)
    announce_checkpoint(base.base, path)
    return factory.model(settings)
