"""The processes of one training run: one, or ``W`` under ``torchrun``.

Under ``torchrun`` (``WORLD_SIZE`` > 1) each process trains ``B / W`` of the streams through
DistributedDataParallel (``gloo`` on CPU, ``nccl`` on GPU); process 0 alone writes the run
directory and validates, and the others learn its results through :class:`Processes`. With one
process every helper here is the identity, and ``torch.distributed`` is never initialized.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch import nn


@dataclasses.dataclass(frozen=True)
class Processes:
    """This process's place among a run's processes: ``rank`` of ``world``."""

    rank: int = 0
    world: int = 1

    @classmethod
    def current(cls) -> Processes:
        """The processes of the process group this process joined (one when it joined none)."""
        if not dist.is_initialized():
            return cls()
        return cls(dist.get_rank(), dist.get_world_size())

    @property
    def writes(self) -> bool:
        """Whether this process writes the run directory and prints (process 0)."""
        return self.rank == 0

    def wrap(self, model: nn.Module, device: torch.device) -> nn.Module:
        """``model`` as the processes train it: itself, or in DistributedDataParallel."""
        if self.world == 1:
            return model
        return nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None
        )

    def gather(self, value: Any) -> list[Any]:
        """Every process's ``value`` (picklable, on the CPU), in rank order; all must call it."""
        if self.world == 1:
            return [value]
        gathered: list[Any] = [None] * self.world
        dist.all_gather_object(gathered, value)
        return gathered

    def share_first(self, value: torch.Tensor) -> None:
        """Overwrite ``value`` in every process with process 0's (in place); all must call it."""
        if self.world > 1:
            dist.broadcast(value, src=0)

    def any(self, flag: torch.Tensor) -> bool:
        """Whether ``flag`` (an integer ``[1]`` on the training device: nccl reduces on the GPU) is
        non-zero in any process; all must call it, so that all act on it at the same step."""
        if self.world > 1:
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())


@contextlib.contextmanager
def distributed(device: str) -> Iterator[str]:
    """Join the process group when launched by ``torchrun`` (``WORLD_SIZE`` > 1); yields the
    device this process trains on."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        yield device
        return
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device.startswith("cuda"):
        torch.cuda.set_device(local_rank)
        device = f"cuda:{local_rank}"
    dist.init_process_group("nccl" if device.startswith("cuda") else "gloo")
    try:
        yield device
    finally:
        dist.destroy_process_group()
