"""Checkpoints: what ``baselines train`` writes and the plugins load.

A checkpoint is a ``.pt`` file holding only tensors and plain Python values, so it loads with
``torch.load(weights_only=True)``: ``format``, ``kind`` (``zoneout_lstm`` or
``pointer_sentinel``), ``config`` (the model's hyper-parameters), ``vocab`` (the token list it
was trained with), ``dataset`` and ``model`` (the state dict); a training checkpoint adds the
optimizer, schedule and position in the data.

A training run's directory (``--output-dir``, default ``<cache>/runs/KIND/DATASET``) holds
``checkpoint.pt`` (resumable training state), ``best.pt`` (the weights with the best validation
perplexity, which the plugins load when ``--checkpoint`` names it), ``log.jsonl`` and
``config.json``.

Trained checkpoints ship in the package as ``trained/DATASET/KIND.pt`` (weights in float16, or
int8 matrices with per-row scales, written by ``python -m baselines package``), each checked on
load against ``trained/SHA256SUMS``; ``trained/README.md`` says how each was trained.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, BinaryIO, TypeAlias

import torch

from baselines.models import CoreConfig, PointerConfig, PointerSentinelLSTM, ZoneoutLSTM
from harness.datasets import Vocabulary
from harness.plugin import PluginError
from wikitext_toolkit_core.benchmarks import user_cache_dir
from wikitext_toolkit_core.files import (
    file_sha256,
    parse_checksum_file,
    waiting_lock,
    write_atomically,
    write_checksum_file,
)

FORMAT = "wikitext-toolkit/baseline-checkpoint/1"
BEST = "best.pt"
RESUME = "checkpoint.pt"
LOG = "log.jsonl"
#: Checkpoints shipped in the package, ``PACKAGED/DATASET/KIND.pt``, and their checksums.
PACKAGED = Path(__file__).parent / "trained"
PACKAGED_SUMS = PACKAGED / "SHA256SUMS"
#: A model that a checkpoint holds.
CheckpointedModel: TypeAlias = ZoneoutLSTM | PointerSentinelLSTM
#: kind -> (model class, its config class); each model class takes an instance of its own config class.
MODELS: dict[str, tuple[Callable[[Any], CheckpointedModel], type[CoreConfig]]] = {
    ZoneoutLSTM.kind: (ZoneoutLSTM, CoreConfig),
    PointerSentinelLSTM.kind: (PointerSentinelLSTM, PointerConfig),
}


class CheckpointError(PluginError):
    """A checkpoint that is missing, corrupt, of the wrong kind or for another vocabulary."""


def default_run_dir(kind: str, dataset_name: str) -> Path:
    """Where ``baselines train KIND --dataset DATASET`` writes when given no ``--output-dir``."""
    return user_cache_dir() / "runs" / kind / dataset_name


def model_config(kind: str, config: Mapping[str, Any]) -> CoreConfig:
    """The config of a ``kind`` model from a dict of its fields.

    Raises:
        ValueError: an unknown kind or field, or a value of the wrong type or out of range (the
            message names it).
    """
    if kind not in MODELS:
        raise ValueError(f"unknown model kind {kind!r} (known: {', '.join(MODELS)})")
    fields = dataclasses.fields(MODELS[kind][1])
    known = [field.name for field in fields]
    unknown = sorted(set(config) - set(known))
    if unknown:
        raise ValueError(f"{kind} has no field {', '.join(unknown)} (its fields: {', '.join(known)})")
    missing = [
        field.name for field in fields if field.default is dataclasses.MISSING and field.name not in config
    ]
    if missing:
        raise ValueError(f"{kind} config lacks {', '.join(missing)}")
    return MODELS[kind][1](**config)


def build_model(kind: str, config: Mapping[str, Any]) -> CheckpointedModel:
    """A fresh model of ``kind`` from its config dict (raises ValueError as :func:`model_config`)."""
    validated = model_config(kind, config)
    return MODELS[kind][0](validated)


#: Bytes a float32 weight takes.
WEIGHT_BYTES = 4


def check_fits(
    kind: str, config: Mapping[str, Any], device: torch.device, bytes_per_parameter: int, what: str
) -> None:
    """Refuse, before any allocation, a ``kind`` model of ``config`` whose parameters, at
    ``bytes_per_parameter`` each (``what`` says for what), exceed the memory of ``device``: it
    would fail deep inside torch, or swap for hours.

    Raises:
        ValueError: as :func:`parameter_count`, or the model does not fit (the message says how
            much it needs and ``device`` has).
    """
    parameters = parameter_count(kind, config)
    needed = parameters * bytes_per_parameter
    available = device_memory_bytes(device)
    if available is not None and needed > available:
        raise ValueError(
            f"a {kind} of {parameters:,} parameters needs {needed / 1e9:,.1f} GB {what}; "
            f"{device} has {available / 1e9:,.1f} GB"
        )


def parameter_count(kind: str, config: Mapping[str, Any]) -> int:
    """The parameters of a ``kind`` model of ``config``, counted on the meta device, which holds
    no data.

    Raises:
        ValueError: as :func:`model_config`, or sizes that give a weight of more than 2**63 bytes,
            which torch cannot even describe.
    """
    try:
        with torch.device("meta"):
            model = build_model(kind, config)
    except RuntimeError:  # torch's "Storage size calculation overflowed"
        raise ValueError(
            f"a {kind} of these sizes has a weight of more than 2**63 bytes, beyond any memory"
        ) from None
    return sum(parameter.numel() for parameter in model.parameters())


def device_memory_bytes(device: torch.device) -> int | None:
    """The memory of ``device``: the GPU's, or this machine's physical memory (None: unknown)."""
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).total_memory)
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def packaged_checkpoint(kind: str, dataset_name: str) -> Path | None:
    """The checkpoint of ``kind`` for ``dataset_name`` shipped in the package, if there is one."""
    path = PACKAGED / dataset_name / f"{kind}.pt"
    return path if path.is_file() else None


def _packaged_sums() -> dict[str, str]:
    """``trained/SHA256SUMS`` as {path relative to ``trained/``: sha256}."""
    return parse_checksum_file(PACKAGED_SUMS) if PACKAGED_SUMS.is_file() else {}


def is_packaged(path: Path) -> bool:
    """Whether ``path`` is a file in the package's ``trained/`` directory (however it is named)."""
    return path.resolve().is_relative_to(PACKAGED.resolve())


def verify_packaged(path: Path) -> None:
    """Fail unless a packaged checkpoint has the checksum ``trained/SHA256SUMS`` lists for it."""
    name = path.resolve().relative_to(PACKAGED.resolve()).as_posix()
    expected = _packaged_sums().get(name)
    if expected is None:
        raise CheckpointError(f"packaged checkpoint {path} is not listed in {PACKAGED_SUMS}")
    digest = file_sha256(path)
    if digest != expected:
        raise CheckpointError(
            f"packaged checkpoint {path}: sha256 mismatch (expected {expected}, "
            f"got {digest}): the installation is damaged (reinstall the package), or a "
            "`baselines package` writing it was interrupted (run it again)"
        )


#: How ``package`` may store a model's floating-point weights: all in float16, or the matrices in
#: int8 with one float32 scale per row (:func:`quantize_rows`) and the vectors in float16.
PRECISIONS = ("float16", "int8")
#: The payload key of an int8 package's per-row scales (weight name -> float32 scales).
INT8_SCALES = "int8_scales"
#: The payload key that marks a package: the validation perplexity of the float32 weights.
PACKAGED_PERPLEXITY = "valid_perplexity_float32"


def package(source: Path, dataset_name: str, precision: str = "float16") -> Path:
    """Ship the model of checkpoint ``source`` as ``trained/DATASET/KIND.pt``: the model part
    only, its weights stored in ``precision`` (one of :data:`PRECISIONS`); ``trained/SHA256SUMS``
    is updated, one ``package`` at a time (another one running waits: :func:`_packaging_lock`). A
    source that is itself a package (e.g. one that ``baselines calibrate`` changed) keeps its
    stored weights, and must have been packaged in ``precision``."""
    payload = load(source)
    if payload["dataset"] != dataset_name:
        raise CheckpointError(f"checkpoint {source} was trained on {payload['dataset']}, not {dataset_name}")
    shipped = {key: payload[key] for key in ("format", "kind", "config", "vocab", "vocab_sha256", "dataset")}
    if PACKAGED_PERPLEXITY in payload:  # already packaged: its weights stay as they are stored
        stored = "int8" if INT8_SCALES in payload else "float16"
        if stored != precision:
            raise CheckpointError(
                f"checkpoint {source} is a package in {stored}; package the float32 checkpoint it "
                f"came from to store it in {precision}"
            )
        shipped["model"], scales = payload["model"], payload.get(INT8_SCALES, {})
    else:
        shipped["model"], scales = _stored_weights(payload["model"], precision)
    if scales:
        shipped[INT8_SCALES] = scales
    shipped[PACKAGED_PERPLEXITY] = payload.get("valid_perplexity", payload.get(PACKAGED_PERPLEXITY))
    if "calibration" in payload:
        shipped["calibration"] = payload["calibration"]
    target = PACKAGED / dataset_name / f"{payload['kind']}.pt"
    with _packaging_lock():
        save(target, shipped)
        _record_packaged(target)
    return target


def _packaging_lock() -> contextlib.AbstractContextManager[None]:
    """Held while a ``package`` writes a model and its ``SHA256SUMS`` entry: an ``flock`` on
    ``.SHA256SUMS.lock`` beside the file, for which a second ``package`` (of this model or another,
    in this process or another) waits, so that neither loses the other's entry (a read-modify-write)
    and the entry is that of the model file last written."""
    PACKAGED_SUMS.parent.mkdir(parents=True, exist_ok=True)
    return waiting_lock(
        PACKAGED_SUMS.with_name(f".{PACKAGED_SUMS.name}.lock"),
        f"waiting for another `baselines package` to finish updating {PACKAGED_SUMS}",
    )


def _record_packaged(target: Path) -> None:
    """Set the checksum of the packaged ``target`` in ``SHA256SUMS``, keeping the other entries (hold
    :func:`_packaging_lock` around it)."""
    sums = _packaged_sums()
    sums[target.relative_to(PACKAGED).as_posix()] = file_sha256(target)
    write_checksum_file(PACKAGED_SUMS, sums)


def _stored_weights(
    state: dict[str, torch.Tensor], precision: str
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """``state`` as shipped in ``precision``, and the int8 matrices' row scales by name.

    Tensors that share storage (tied weights: embedding = decoder) stay one shared tensor."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; expected one of {', '.join(PRECISIONS)}")
    stored: dict[tuple, tuple[torch.Tensor, torch.Tensor | None]] = {}
    weights, scales = {}, {}
    for name, tensor in state.items():
        if tensor.is_floating_point():
            storage = tensor.untyped_storage().data_ptr()
            key = (storage, tensor.storage_offset(), tuple(tensor.shape), tensor.stride())
            if key not in stored:
                quantized = precision == "int8" and tensor.dim() >= 2
                stored[key] = quantize_rows(tensor) if quantized else (tensor.half(), None)
            tensor, scale = stored[key]
            if scale is not None:
                scales[name] = scale
        weights[name] = tensor
    return weights, scales


def quantize_rows(matrix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 quantization of each row (index along dim 0) of ``matrix``.

    Shapes: ``matrix`` (R, ...) -> values (R, ...) int8 and scales (R, 1, ...) float32, with
    ``values * scales`` within half a step (``scale / 2``) of ``matrix``."""
    rows = matrix.detach().float().flatten(1)
    scales = rows.abs().amax(dim=1, keepdim=True).clamp_min(torch.finfo(torch.float32).tiny) / 127
    values = torch.round(rows / scales).clamp(-127, 127).to(torch.int8)
    shape = (matrix.shape[0],) + (1,) * (matrix.dim() - 1)
    return values.view(matrix.shape), scales.view(shape)


def float_weights(payload: dict[str, Any]) -> dict[str, torch.Tensor]:
    """A checkpoint's state dict with int8 matrices (from ``package --precision int8``) turned back
    into floats; float16 and float32 tensors as stored (``load_state_dict`` casts them)."""
    scales = payload.get(INT8_SCALES, {})
    return {
        name: tensor.float() * scales[name] if name in scales else tensor
        for name, tensor in payload["model"].items()
    }


def save(path: Path, payload: dict[str, Any]) -> None:
    """Write a checkpoint atomically: a failure mid-write leaves the previous file intact, and a
    write the file system refuses (a full disk) is its ``OSError``, which names the file."""

    def write(handle: BinaryIO) -> None:
        recorder = _WriteErrors(handle)
        try:
            torch.save(payload, recorder)  # type: ignore[arg-type]  # it calls write and flush only
        except RuntimeError:
            if recorder.error is not None:
                raise recorder.error from None
            raise

    write_atomically(path, write)


class _WriteErrors:
    """A binary file that keeps the ``OSError`` of a write or flush that failed: ``torch.save``
    turns one into a ``RuntimeError`` of its own (``unexpected pos``) that names no cause."""

    def __init__(self, handle: BinaryIO) -> None:
        self.handle = handle
        self.error: OSError | None = None

    def write(self, data: bytes) -> int:
        try:
            return self.handle.write(data)
        except OSError as error:
            self.error = error
            raise

    def flush(self) -> None:
        try:
            self.handle.flush()
        except OSError as error:
            self.error = error
            raise


def load(path: str | os.PathLike) -> dict[str, Any]:
    """Read a checkpoint with ``weights_only=True``, a packaged one once :func:`verify_packaged`
    passes (whether named or found by default); any problem is one :class:`CheckpointError`."""
    path = Path(path)
    if path.is_dir():
        raise CheckpointError(f"checkpoint {path} is a directory, not a checkpoint file")
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    if is_packaged(path):
        verify_packaged(path)
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 - torch's parsers raise anything on garbage
        # (UnpicklingError, BadZipFile, EOFError, KeyError or IndexError for a text file read as
        # a legacy pickle, ...): whatever it is, the file is not a checkpoint
        reason = (
            "it holds Python objects other than tensors and plain values"
            if "Unsupported global" in str(error)
            else type(error).__name__
        )
        raise CheckpointError(f"checkpoint {path} is corrupt or not a checkpoint ({reason})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"checkpoint {path} is not a wikitext-toolkit baseline checkpoint")
    return payload


def model_payload(model: CheckpointedModel, vocab: Vocabulary, dataset_name: str) -> dict[str, Any]:
    """The part of a checkpoint that defines a trained model."""
    return {
        "format": FORMAT,
        "kind": model.kind,
        "config": dataclasses.asdict(model.config),
        "vocab": list(vocab.tokens),
        "vocab_sha256": vocab.sha256(),
        "dataset": dataset_name,
        "model": _on_cpu(model.state_dict()),
    }


def _on_cpu(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``state`` moved to the CPU, tensors that share their memory (tied weights) still one
    tensor: moved one by one from a GPU they would become copies, each saved in full."""
    moved: dict[tuple[Any, ...], torch.Tensor] = {}
    result = {}
    for name, tensor in state.items():
        key = (tensor.device, tensor.data_ptr(), tensor.dtype, tuple(tensor.shape), tensor.stride())
        if key not in moved:
            moved[key] = tensor.detach().cpu()
        result[name] = moved[key]
    return result


def check_vocabulary(payload: dict[str, Any], vocab: Vocabulary, path: str | os.PathLike) -> None:
    """Fail unless the checkpoint was trained with exactly ``vocab``."""
    if payload["vocab"] != list(vocab.tokens):
        raise CheckpointError(
            f"checkpoint {path} was trained on {payload['dataset']} with a different vocabulary "
            f"({len(payload['vocab'])} types, sha256 {payload['vocab_sha256'][:12]}) than this "
            f"dataset's ({len(vocab)} types, sha256 {vocab.sha256()[:12]})"
        )


def load_model(
    path: str | os.PathLike, vocab: Vocabulary | None = None, kind: str | None = None
) -> tuple[CheckpointedModel, dict[str, Any]]:
    """The model stored in a checkpoint, checked against ``vocab`` and ``kind`` when given."""
    payload = load(path)
    if kind is not None and payload["kind"] != kind:
        raise CheckpointError(f"checkpoint {path} holds a {payload['kind']} model, not {kind}")
    if vocab is not None:
        check_vocabulary(payload, vocab, path)
    try:
        check_fits(payload["kind"], payload["config"], torch.device("cpu"), WEIGHT_BYTES, "for its weights")
        model = build_model(payload["kind"], payload["config"])
    except ValueError as error:
        raise CheckpointError(f"checkpoint {path}: {error}") from None
    try:
        model.load_state_dict(float_weights(payload))
    except RuntimeError as error:
        raise CheckpointError(
            f"checkpoint {path} does not match its config: {str(error).splitlines()[0]}"
        ) from None
    return model, payload
