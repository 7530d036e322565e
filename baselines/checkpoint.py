"""Checkpoints: what ``baselines train`` writes and the plugins load.

A checkpoint is a ``.pt`` file holding only tensors and plain Python values, so it loads with
``torch.load(weights_only=True)``: ``format``, ``kind`` (``zoneout_lstm`` or
``pointer_sentinel``), ``config`` (the model's hyper-parameters), ``vocab`` (the token list it
was trained with), ``dataset`` and ``model`` (the state dict); a training checkpoint adds the
optimizer, schedule and position in the data.

A training run's directory (``--out``, default ``<cache>/runs/KIND/DATASET``) holds
``checkpoint.pt`` (resumable training state), ``best.pt`` (the weights with the best validation
perplexity, what the plugins load), ``log.jsonl`` and ``config.json``.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch
from torch import nn

from harness.datasets import Vocabulary, user_cache_dir
from harness.plugin import PluginError
from baselines.pointer_sentinel import PointerConfig, PointerSentinelLSTM
from baselines.recurrent import CoreConfig
from baselines.zoneout_lstm import ZoneoutLSTM

FORMAT = "wikitext-toolkit/baseline-checkpoint/1"
BEST = "best.pt"
RESUME = "checkpoint.pt"
LOG = "log.jsonl"
MODELS: dict[str, tuple[type[nn.Module], type[CoreConfig]]] = {
    ZoneoutLSTM.kind: (ZoneoutLSTM, CoreConfig),
    PointerSentinelLSTM.kind: (PointerSentinelLSTM, PointerConfig),
}


class CheckpointError(PluginError):
    """A checkpoint that is missing, corrupt, of the wrong kind or for another vocabulary."""


def default_run_dir(kind: str, dataset_name: str) -> Path:
    """Where ``baselines train KIND --dataset DATASET`` writes when given no ``--out``."""
    return user_cache_dir() / "runs" / kind / dataset_name


def build_model(kind: str, config: dict[str, Any]) -> nn.Module:
    """A fresh model of ``kind`` from its config dict."""
    if kind not in MODELS:
        raise CheckpointError(f"unknown model kind {kind!r} (known: {', '.join(MODELS)})")
    model_class, config_class = MODELS[kind]
    known = {field.name for field in dataclasses.fields(config_class)}
    unknown = sorted(set(config) - known)
    if unknown:
        raise CheckpointError(f"{kind} config has unknown fields: {', '.join(unknown)}")
    return model_class(config_class(**config))


def save(path: Path, payload: dict[str, Any]) -> None:
    """Write atomically: a crash mid-write leaves the previous file intact."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    torch.save(payload, partial)
    os.replace(partial, path)


def load(path: str | os.PathLike) -> dict[str, Any]:
    """Read a checkpoint with ``weights_only=True``; any problem is one :class:`CheckpointError`."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, pickle.UnpicklingError, zipfile.BadZipFile, EOFError, ValueError) as error:
        reason = ("it holds Python objects other than tensors and plain values"
                  if "Unsupported global" in str(error) else type(error).__name__)
        raise CheckpointError(f"checkpoint {path} is corrupt or not a checkpoint ({reason})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"checkpoint {path} is not a wikitext-toolkit baseline checkpoint")
    return payload


def model_payload(model: nn.Module, vocab: Vocabulary, dataset_name: str) -> dict[str, Any]:
    """The part of a checkpoint that defines a trained model."""
    return {
        "format": FORMAT,
        "kind": model.kind,
        "config": dataclasses.asdict(model.config),
        "vocab": list(vocab.tokens),
        "vocab_sha256": vocab.sha256(),
        "dataset": dataset_name,
        "model": {name: tensor.detach().cpu() for name, tensor in model.state_dict().items()},
    }


def check_vocabulary(payload: dict[str, Any], vocab: Vocabulary, path: str | os.PathLike) -> None:
    """Fail unless the checkpoint was trained with exactly ``vocab``."""
    if payload["vocab"] != list(vocab.tokens):
        raise CheckpointError(
            f"checkpoint {path} was trained on {payload['dataset']} with a different vocabulary "
            f"({len(payload['vocab'])} types, sha256 {payload['vocab_sha256'][:12]}) than this "
            f"dataset's ({len(vocab)} types, sha256 {vocab.sha256()[:12]})")


def load_model(path: str | os.PathLike, vocab: Vocabulary | None = None,
               kind: str | None = None) -> tuple[nn.Module, dict[str, Any]]:
    """The model stored in a checkpoint, checked against ``vocab`` and ``kind`` when given."""
    payload = load(path)
    if kind is not None and payload["kind"] != kind:
        raise CheckpointError(f"checkpoint {path} holds a {payload['kind']} model, not {kind}")
    if vocab is not None:
        check_vocabulary(payload, vocab, path)
    model = build_model(payload["kind"], payload["config"])
    try:
        model.load_state_dict(payload["model"])
    except RuntimeError as error:
        raise CheckpointError(f"checkpoint {path} does not match its config: "
                              f"{str(error).splitlines()[0]}") from None
    return model, payload
