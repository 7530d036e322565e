"""The ``--device`` option of every tool: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``."""

from __future__ import annotations

import re
from pathlib import Path

from wikitext_toolkit_core.errors import ToolkitError

#: Present whenever a GPU driver torch could use is loaded (NVIDIA's, AMD's ROCm); without any,
#: ``auto`` is ``cpu`` without importing torch (seconds to import).
GPU_DRIVER_FILES = ("/proc/driver/nvidia/version", "/dev/kfd")
_DEVICE = re.compile(r"cpu|cuda(:\d+)?")


class DeviceError(ToolkitError):
    """A ``--device`` that does not name a device this machine has; the message is one line."""


def resolve_device(device: str) -> str:
    """The device to run on: ``auto`` is ``cuda`` when torch is installed and sees a GPU, else
    ``cpu``; any other name must be ``cpu``, ``cuda`` or ``cuda:N``, and a CUDA device must be
    available (which needs torch)."""
    if device == "auto":
        if not any(Path(path).exists() for path in GPU_DRIVER_FILES):
            return "cpu"
        try:
            import torch
        except ModuleNotFoundError:  # the harness core and KN-5 run without torch
            return "cpu"
        return "cuda" if torch.cuda.is_available() else "cpu"
    if not _DEVICE.fullmatch(device):
        raise DeviceError(f"--device {device!r} is not a device (auto, cpu, cuda or cuda:N)")
    if device.startswith("cuda"):
        try:
            import torch
        except ModuleNotFoundError:
            raise DeviceError(
                f"--device {device}: torch is not installed (pip install 'wikitext-toolkit[torch]')"
            ) from None

        if not torch.cuda.is_available():
            raise DeviceError(f"--device {device}: CUDA is not available on this machine (use --device cpu)")
        index = int(device.partition(":")[2] or 0)
        if index >= torch.cuda.device_count():
            raise DeviceError(
                f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s)"
            )
    return device
