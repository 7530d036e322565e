"""The result record of one evaluation, written as JSON by ``harness eval --output``."""

from __future__ import annotations

import datetime
import platform
import subprocess
from pathlib import Path
from typing import Any

from harness import __version__
from harness.datasets import Dataset
from harness.evaluate import Evaluation

SCHEMA_VERSION = 1


def git_commit() -> str | None:
    """The commit of the toolkit's checkout, suffixed ``-dirty`` with local changes; None when
    it is not installed from a git checkout."""
    source = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=source, capture_output=True,
                                text=True, check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=source,
                               capture_output=True, text=True, check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("-dirty" if dirty else "")


def torch_version() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return torch.__version__


def describe_device(device: str) -> str:
    """``"cuda:0 (NVIDIA H100 80GB HBM3)"``, ``"cpu (x86_64)"``."""
    if device.startswith("cuda"):
        import torch

        return f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    return f"{device} ({platform.machine()})"


def result_record(*, plugin: str, model_args: dict[str, Any], checkpoint: str | None,
                  dataset: Dataset, split: str, evaluation: Evaluation, batch_size: int, bptt: int,
                  num_parameters: int | None, device: str,
                  token_log_probs_file: str | None) -> dict[str, Any]:
    """The JSON-ready record of one evaluation."""
    stream = dataset.tokens(split)
    return {
        "schema_version": SCHEMA_VERSION,
        "model": plugin,
        "model_args": model_args,
        "checkpoint": checkpoint,
        "dataset": dataset.name,
        "dataset_path": str(dataset.directory.resolve()),
        "split": split,
        "dataset_sha256": stream.sha256,
        "dataset_verified": dataset.is_verified(split),
        "vocab_size": len(dataset.vocab),
        "vocab_sha256": dataset.vocab.sha256(),
        "oov_tokens": stream.oov_tokens,
        "tokens": evaluation.tokens,
        "nll": evaluation.nll,
        "perplexity": evaluation.perplexity,
        "bits_per_token": evaluation.bits_per_token,
        "protocol": {"batch_size": batch_size, "bptt": bptt},
        "audit": evaluation.audit.to_json(),
        "num_parameters": num_parameters,
        "runtime_seconds": evaluation.seconds,
        "tokens_per_second": evaluation.tokens / evaluation.seconds if evaluation.seconds else None,
        "device": describe_device(device),
        "torch_version": torch_version(),
        "package_version": __version__,
        "git_commit": git_commit(),
        "token_log_probs_file": token_log_probs_file,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
