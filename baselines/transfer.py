"""Carry a training run directory between machines in pieces of bounded size.

A lent machine (an accelerator for a few minutes) sends files back under limits such as
"8 files of at most 16 MB"; a medium run directory (``checkpoint.pt`` + ``best.pt``) is 240 MB.
:func:`pack_run` writes it as ``NAME.manifest.json`` plus ``NAME.partNN`` pieces and
:func:`unpack_run` rebuilds the directory from them, so that ``baselines train`` resumes it:

- every tensor's data is stored once: tied weights, and ``best.pt`` weights equal to the
  checkpoint's, cost nothing more; tensors that shared storage share it again after unpacking;
- the data is split into byte planes (the i-th byte of every element together), which zlib
  compresses far better than raw floats;
- ``precision="float32"`` (the default) is lossless: the rebuilt files load to identical tensors,
  and the resumed run is the one that would have continued on the first machine;
- ``precision="float16"`` rounds float32 tensors (the weights and recurrent states) to float16,
  a relative error below 2**-11, about half the size; it is lossy, so the run resumes from
  slightly different weights (validate before trusting them);
- the manifest holds the SHA-256 of every piece and of the whole, checked before anything is
  written; ``log.jsonl`` and ``config.json`` travel inside it;
- ``with_best=False`` leaves ``best.pt`` behind, for a leg of training on a lent machine whose
  way in is tight: the checkpoint records the best validation perplexity so far, so the leg
  writes a ``best.pt`` only if it beats it, and :func:`unpack_run` takes the one left behind
  (``best_from``) when the pack that comes back carries none.
"""

from __future__ import annotations

import hashlib
import io
import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from baselines import checkpoint as checkpoints
from baselines.run_directory import RunDirectory
from wikitext_toolkit_core.errors import ToolkitError
from wikitext_toolkit_core.files import exclusive_directory, write_atomically

#: A manifest's ``format``.
FORMAT = "wikitext-toolkit/run-transfer/1"
PRECISIONS = ("float32", "float16")
#: The default size of a piece: under a 16 MiB limit per file.
PIECE_BYTES = 16_000_000
#: The files of a run directory that travel (the checkpoints as data, the rest as text).
CHECKPOINT_FILES = (checkpoints.RESUME, checkpoints.BEST)
TEXT_FILES = (checkpoints.LOG, "config.json")
#: Tensors smaller than this stay inside the (pickled) skeleton.
SMALL_TENSOR = 1024
#: The marker that stands for an extracted tensor in the skeleton: (MARKER, alias index).
MARKER = "__run_transfer_tensor__"
FLOAT16_LIMIT = 65504.0


class TransferError(ToolkitError):
    """A run directory that cannot be packed, or pieces that do not rebuild one."""


def _sha256(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class _Extraction:
    """The large tensors taken out of the checkpoints: ``data`` holds each distinct content once;
    ``aliases`` maps each distinct original storage view to its entry of ``data``."""

    precision: str
    data: list[torch.Tensor] = field(default_factory=list)
    aliases: list[int] = field(default_factory=list)
    original_dtypes: list[torch.dtype] = field(default_factory=list)
    _by_content: dict[tuple[Any, ...], int] = field(default_factory=dict)
    _by_view: dict[tuple[Any, ...], int] = field(default_factory=dict)

    def stored(self, tensor: torch.Tensor) -> torch.Tensor:
        """The tensor as it travels: rounded to float16 under that precision."""
        tensor = tensor.detach().cpu().contiguous()
        if self.precision == "float16" and tensor.dtype == torch.float32:
            if not bool(torch.isfinite(tensor).all()) or float(tensor.abs().max()) >= FLOAT16_LIMIT:
                return tensor
            return tensor.to(torch.float16)
        return tensor

    def take(self, tensor: torch.Tensor) -> tuple[str, int]:
        view = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tensor.shape, tensor.stride())
        if view not in self._by_view:
            stored = self.stored(tensor)
            content = (stored.dtype, tuple(stored.shape), tensor.dtype, _sha256(_bytes(stored).data))
            if content not in self._by_content:
                self._by_content[content] = len(self.data)
                self.data.append(stored)
                self.original_dtypes.append(tensor.dtype)
            self._by_view[view] = len(self.aliases)
            self.aliases.append(self._by_content[content])
        return (MARKER, self._by_view[view])

    def strip(self, value: Any) -> Any:
        """``value`` with every large tensor replaced by its marker."""
        if isinstance(value, torch.Tensor) and value.numel() >= SMALL_TENSOR:
            return self.take(value)
        if isinstance(value, dict):
            return {key: self.strip(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.strip(item) for item in value)
        return value


def _bytes(tensor: torch.Tensor) -> np.ndarray:
    """A contiguous CPU tensor's bytes, ``[numel * element_size]`` uint8."""
    return tensor.reshape(-1).view(torch.uint8).numpy()


def _byte_planes(tensors: list[torch.Tensor]) -> bytes:
    """Each tensor's bytes regrouped by position within the element (all first bytes, then all
    second bytes, ...), concatenated."""
    return b"".join(_bytes(tensor).reshape(-1, tensor.element_size()).T.tobytes() for tensor in tensors)


def pack_run(
    run_dir: Path,
    destination: Path,
    name: str,
    precision: str = "float32",
    piece_bytes: int = PIECE_BYTES,
    with_best: bool = True,
) -> Path:
    """Write ``run_dir`` as ``destination/NAME.manifest.json`` and ``NAME.partNN`` pieces of at
    most ``piece_bytes`` bytes, ``best.pt`` left out unless ``with_best``; returns the manifest's
    path. The run directory is locked meanwhile, so a training run cannot write it half-way
    through."""
    if precision not in PRECISIONS:
        raise TransferError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")
    manifest_path = destination / f"{name}.manifest.json"
    if manifest_path.exists():
        raise TransferError(f"{manifest_path} exists: choose another name or directory")
    packed = CHECKPOINT_FILES if with_best else (checkpoints.RESUME,)
    with exclusive_directory(run_dir, "the run directory"):
        missing = [f for f in (*packed, *TEXT_FILES) if not (run_dir / f).is_file()]
        if missing:
            raise TransferError(f"{run_dir} is not a run directory: it has no {', '.join(missing)}")
        files = {f: checkpoints.load(run_dir / f) for f in packed}
        if not with_best:
            _record_best_left_behind(files[checkpoints.RESUME], run_dir)
        extraction = _Extraction(precision)
        skeleton = extraction.strip(files)
        texts = {f: (run_dir / f).read_text(encoding="utf-8") for f in TEXT_FILES}
    buffer = io.BytesIO()
    torch.save(skeleton, buffer)
    blob = zlib.compress(buffer.getvalue() + _byte_planes(extraction.data), 6)
    destination.mkdir(parents=True, exist_ok=True)
    pieces = []
    for index, start in enumerate(range(0, len(blob), piece_bytes)):
        piece, part = f"{name}.part{index:02d}", blob[start : start + piece_bytes]
        write_atomically(destination / piece, part)
        pieces.append({"file": piece, "bytes": len(part), "sha256": _sha256(part)})
    manifest = {
        "format": FORMAT,
        "precision": precision,
        "skeleton_bytes": buffer.tell(),
        "tensors": [
            {"stored": _dtype_name(t.dtype), "dtype": _dtype_name(original), "shape": list(t.shape)}
            for t, original in zip(extraction.data, extraction.original_dtypes)
        ],
        "aliases": extraction.aliases,
        "sha256": _sha256(blob),
        "pieces": pieces,
        "texts": texts,
    }
    write_atomically(manifest_path, json.dumps(manifest, indent=1) + "\n")
    return manifest_path


def _record_best_left_behind(checkpoint: dict[str, Any], run_dir: Path) -> None:
    """Make ``checkpoint``'s best validation perplexity that of ``run_dir/best.pt`` where that
    is lower (a kill between writing the two leaves ``best.pt`` newer): what resuming in
    ``run_dir`` would take, so that a leg without ``best.pt`` never writes worse weights as its
    best."""
    progress = checkpoint["training"]["progress"]
    best = RunDirectory(run_dir, writer=False).best_perplexity()
    progress["best_file_valid"] = min(progress["best_file_valid"], best)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _read_blob(manifest_path: Path, manifest: dict[str, Any]) -> bytes:
    """The pieces joined, each checked against its SHA-256 and the whole against its own."""
    parts = []
    for piece in manifest["pieces"]:
        path = manifest_path.parent / piece["file"]
        if not path.is_file():
            raise TransferError(f"{path}: missing (the manifest lists it)")
        data = path.read_bytes()
        if _sha256(data) != piece["sha256"]:
            raise TransferError(f"{path}: its SHA-256 is not the manifest's (damaged in transfer?)")
        parts.append(data)
    blob = b"".join(parts)
    if _sha256(blob) != manifest["sha256"]:
        raise TransferError(f"{manifest_path}: the joined pieces do not match its SHA-256")
    return blob


def _tensors(planes: bytes, manifest: dict[str, Any]) -> list[torch.Tensor]:
    """The extracted tensors, in their original dtypes, from their byte planes."""
    tensors, offset = [], 0
    for entry in manifest["tensors"]:
        stored = getattr(torch, entry["stored"])
        size = stored.itemsize
        count = int(np.prod(entry["shape"], dtype=np.int64))
        chunk = np.frombuffer(planes, dtype=np.uint8, count=count * size, offset=offset)
        raw = np.ascontiguousarray(chunk.reshape(size, count).T).reshape(-1)
        tensor = torch.from_numpy(raw).view(stored).reshape(entry["shape"])
        tensors.append(tensor.to(getattr(torch, entry["dtype"])))
        offset += count * size
    if offset != len(planes):
        raise TransferError("the pieces hold more data than the manifest describes")
    return tensors


def _fill(value: Any, aliases: list[torch.Tensor]) -> Any:
    """``value`` with every marker replaced by its tensor."""
    if isinstance(value, tuple) and len(value) == 2 and value[0] == MARKER:
        return aliases[value[1]]
    if isinstance(value, dict):
        return {key: _fill(item, aliases) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_fill(item, aliases) for item in value)
    return value


@dataclass(frozen=True)
class Unpacked:
    """What :func:`unpack_run` rebuilt: the pack's precision (one of :data:`PRECISIONS`), whether
    the run directory has a ``best.pt``, and whether it came from ``best_from``."""

    precision: str
    has_best: bool
    best_taken: bool


def unpack_run(manifest_path: Path, run_dir: Path, best_from: Path | None = None) -> Unpacked:
    """Rebuild the run directory packed in ``manifest_path`` into ``run_dir``, which must hold no
    ``checkpoint.pt`` yet; nothing is written unless every piece checks out, and ``checkpoint.pt``
    is written last, so an interrupted unpack is simply run again. A pack without ``best.pt``
    (``pack_run(with_best=False)``) takes ``best_from/best.pt`` when it is given: the weights of
    the best validation the checkpoint records, since a leg writes its own only when it beats it."""
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise TransferError(f"{manifest_path}: not a readable manifest ({error})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise TransferError(f"{manifest_path}: not a manifest written by `baselines pack-run`")
    names = [piece["file"] for piece in manifest["pieces"]]
    if set(manifest["texts"]) - set(TEXT_FILES) or any(Path(name).name != name for name in names):
        raise TransferError(f"{manifest_path}: names files outside the run directory's own")
    whole = zlib.decompress(_read_blob(manifest_path, manifest))
    split = manifest["skeleton_bytes"]
    skeleton = torch.load(io.BytesIO(whole[:split]), map_location="cpu", weights_only=True)
    data = _tensors(whole[split:], manifest)
    files = _fill(skeleton, [data[index].clone() for index in manifest["aliases"]])
    best, taken = files.get(checkpoints.BEST), False
    if best is None and best_from is not None:
        best, taken = _best_left_behind(best_from, files[checkpoints.RESUME]), True
    with exclusive_directory(run_dir, "the run directory"):
        if (run_dir / checkpoints.RESUME).exists():
            raise TransferError(f"{run_dir} already holds a run: unpack into a new directory")
        for name, text in manifest["texts"].items():
            write_atomically(run_dir / name, text)
        if best is not None:
            checkpoints.save(run_dir / checkpoints.BEST, best)
        checkpoints.save(run_dir / checkpoints.RESUME, files[checkpoints.RESUME])
    return Unpacked(str(manifest["precision"]), has_best=best is not None, best_taken=taken)


def _best_left_behind(run_dir: Path, checkpoint: dict[str, Any]) -> dict[str, Any]:
    """``run_dir/best.pt``, checked to be the best that ``checkpoint`` records (which
    :func:`pack_run` set from it when it left it behind)."""
    path = run_dir / checkpoints.BEST
    if not path.is_file():
        raise TransferError(f"{path}: missing (the pack carries no best.pt to replace it)")
    best = checkpoints.load(path)
    recorded = best.get("valid_perplexity")
    expected = checkpoint["training"]["progress"]["best_file_valid"]
    if recorded != expected:
        raise TransferError(
            f"{path} records valid perplexity {recorded}, but the packed checkpoint's best is {expected}: "
            "it is not the best.pt of this run"
        )
    return best
