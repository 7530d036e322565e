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
- :func:`unpack_run` reads only what :func:`pack_run` writes: a manifest of other keys, types,
  file names or sizes, pieces that inflate to other than the size it states (inflating stops one
  byte past it), and a run directory whose files it would replace are each refused in one line;
- ``with_best=False`` leaves ``best.pt`` behind, for a leg of training on a lent machine whose
  way in is tight: the checkpoint records the best validation perplexity so far, so the leg
  writes a ``best.pt`` only if it beats it, and :func:`unpack_run` takes the one left behind
  (``best_from``) when the pack that comes back carries none.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from baselines import checkpoint as checkpoints
from baselines.run_directory import RunDirectory
from wikitext_toolkit_core import bounded_json
from wikitext_toolkit_core.errors import ToolkitError
from wikitext_toolkit_core.files import exclusive_directory, write_atomically

#: A manifest's ``format``.
FORMAT = "wikitext-toolkit/run-transfer/1"
PRECISIONS = ("float32", "float16")
#: The default size of a piece: under a 16 MiB limit per file.
PIECE_BYTES = 16_000_000
#: The smallest piece ``pack-run`` writes: a 250 MB run in at most 250 pieces.
MIN_PIECE_BYTES = 1_000_000
#: A pack's name, the stem of its files: the POSIX portable file name characters, neither hidden
#: nor taken for an option, short enough for its longest file's temporary name (and for transfers
#: that refuse odd names).
PACK_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
#: The largest manifest read (those of a long run's log are under 1 MB).
MANIFEST_BYTES = 16 * 2**20
#: The most that zlib inflates one byte of its stream to: no pack states more than this per byte
#: of its pieces.
ZLIB_RATIO = 1032
#: The keys of a manifest, and the dtypes each stored dtype may stand for.
MANIFEST_KEYS = ("format", "precision", "skeleton_bytes", "tensors", "aliases", "sha256", "pieces", "texts")
STORED_AS = {"float32": ("float32", "float16")}
SHA256_HEX = re.compile(r"[0-9a-f]{64}")
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
    if not PACK_NAME.fullmatch(name):
        raise TransferError(
            f"the pack's name {name!r} is not a plain file stem (at most 128 letters, digits, '.', '_' "
            "and '-', not first '.' or '-'): choose one with --name"
        )
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


def _read_manifest(path: Path) -> dict[str, Any]:
    """The manifest at ``path``, checked to be what :func:`pack_run` writes before anything else
    reads it; a :class:`TransferError` naming the file otherwise."""
    try:
        if path.stat().st_size > MANIFEST_BYTES:
            raise TransferError(f"over {MANIFEST_BYTES} bytes")
        manifest = bounded_json.loads(path.read_bytes())
        _check_manifest(manifest)
    except (OSError, ValueError) as error:
        raise TransferError(f"{path}: not a readable manifest ({error})") from None
    except TransferError as error:
        raise TransferError(f"{path}: not a manifest written by `baselines pack-run`: {error}") from None
    return manifest


def _require(condition: bool, problem: str) -> None:
    if not condition:
        raise TransferError(problem)


def _is_count(value: Any, least: int = 0) -> bool:
    """Whether ``value`` is a JSON integer of at least ``least`` (not a boolean, nor a float)."""
    return type(value) is int and value >= least


def _is_digest(value: Any) -> bool:
    return isinstance(value, str) and SHA256_HEX.fullmatch(value) is not None


def _is_dtype_name(value: Any) -> bool:
    """Whether ``value`` names a torch dtype as :func:`pack_run` writes it (``float32``, not ``float``)."""
    dtype = getattr(torch, value, None) if isinstance(value, str) else None
    return isinstance(dtype, torch.dtype) and _dtype_name(dtype) == value


def _is_file_name(value: Any) -> bool:
    """Whether ``value`` names a file of the manifest's own directory."""
    return isinstance(value, str) and value not in ("", ".", "..") and "/" not in value and "\0" not in value


def _check_manifest(manifest: Any) -> None:
    """Raise a :class:`TransferError` saying how ``manifest`` differs from what :func:`pack_run`
    writes: its keys, their types, the names of its files and the sizes it states."""
    _require(isinstance(manifest, dict), "not a JSON object")
    missing = [key for key in MANIFEST_KEYS if key not in manifest]
    _require(not missing, f"it has no {', '.join(missing)}")
    _require(manifest["format"] == FORMAT, f"its format is not {FORMAT} (another version's?)")
    _require(manifest["precision"] in PRECISIONS, f"its precision is not one of {', '.join(PRECISIONS)}")
    _require(_is_count(manifest["skeleton_bytes"]), "its skeleton_bytes is not a count of bytes")
    _require(_is_digest(manifest["sha256"]), "its sha256 is not a SHA-256 in lowercase hex")
    _check_tensors(manifest["tensors"])
    aliases, count = manifest["aliases"], len(manifest["tensors"])
    _require(
        isinstance(aliases, list) and all(_is_count(index) and index < count for index in aliases),
        "its aliases are not indices of its tensors",
    )
    _check_pieces(manifest["pieces"])
    texts = manifest["texts"]
    _require(
        isinstance(texts, dict)
        and sorted(texts) == sorted(TEXT_FILES)
        and all(isinstance(text, str) for text in texts.values()),
        f"its texts are not the run directory's {' and '.join(TEXT_FILES)}",
    )
    pieces_bytes = sum(piece["bytes"] for piece in manifest["pieces"])
    _require(
        _inflated_bytes(manifest) <= ZLIB_RATIO * pieces_bytes, "it states more data than its pieces hold"
    )


def _check_tensors(tensors: Any) -> None:
    _require(
        isinstance(tensors, list) and all(isinstance(entry, dict) for entry in tensors),
        "its tensors are not a list of objects",
    )
    for entry in tensors:
        dtype, shape = entry.get("dtype"), entry.get("shape")
        _require(
            _is_dtype_name(dtype) and entry.get("stored") in STORED_AS.get(dtype, (dtype,)),
            "a tensor's dtype or stored dtype is not one a tensor is packed in",
        )
        _require(
            isinstance(shape, list) and all(map(_is_count, shape)), "a tensor's shape is not a list of sizes"
        )


def _check_pieces(pieces: Any) -> None:
    _require(isinstance(pieces, list) and len(pieces) > 0, "its pieces are not a list of at least one")
    for piece in pieces:
        _require(
            isinstance(piece, dict)
            and _is_file_name(piece.get("file"))
            and _is_count(piece.get("bytes"), least=1)
            and _is_digest(piece.get("sha256")),
            "a piece is not a file name beside it, a size in bytes and a SHA-256",
        )
    names = [piece["file"] for piece in pieces]
    _require(len(set(names)) == len(names), "it lists a piece twice")


def _tensor_bytes(entry: dict[str, Any]) -> int:
    return math.prod(entry["shape"]) * getattr(torch, entry["stored"]).itemsize


def _inflated_bytes(manifest: dict[str, Any]) -> int:
    """The size of the pieces' data once inflated, as the manifest states it: the skeleton and
    the tensors."""
    return manifest["skeleton_bytes"] + sum(map(_tensor_bytes, manifest["tensors"]))


def _read_blob(manifest_path: Path, manifest: dict[str, Any]) -> bytes:
    """The pieces joined, each checked against its size and SHA-256 and the whole against its own."""
    parts = []
    for piece in manifest["pieces"]:
        path = manifest_path.parent / piece["file"]
        if not path.is_file():
            raise TransferError(f"{path}: missing (the manifest lists it)")
        if path.stat().st_size != piece["bytes"]:
            raise TransferError(
                f"{path}: not the {piece['bytes']} bytes the manifest states (damaged in transfer?)"
            )
        data = path.read_bytes()
        if _sha256(data) != piece["sha256"]:
            raise TransferError(f"{path}: its SHA-256 is not the manifest's (damaged in transfer?)")
        parts.append(data)
    blob = b"".join(parts)
    if _sha256(blob) != manifest["sha256"]:
        raise TransferError(f"{manifest_path}: the joined pieces do not match its SHA-256")
    return blob


def _inflate(blob: bytes, size: int) -> bytes:
    """``blob`` decompressed, refused unless it inflates to exactly ``size`` bytes: inflating
    stops one byte past it, so that pieces made to inflate without end (a compression bomb)
    cost no more memory than the manifest states."""
    inflater = zlib.decompressobj()
    try:
        whole = inflater.decompress(blob, size + 1)
    except zlib.error as error:
        raise TransferError(f"the pieces are not one zlib stream ({error})") from None
    if len(whole) != size or not inflater.eof or inflater.unused_data:
        raise TransferError(f"the pieces do not inflate to the {size} bytes their manifest states")
    return whole


def _skeleton(data: bytes) -> dict[str, Any]:
    """The checkpoints without their large tensors, as :func:`pack_run` saved them."""
    try:
        skeleton = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 - torch's parsers raise anything on garbage
        raise TransferError(f"the pieces do not hold packed checkpoints ({type(error).__name__})") from None
    if not isinstance(skeleton, dict) or checkpoints.RESUME not in skeleton:
        raise TransferError(f"the pieces hold no {checkpoints.RESUME}")
    return skeleton


def _tensors(planes: bytes, manifest: dict[str, Any]) -> list[torch.Tensor]:
    """The extracted tensors, in their original dtypes, from their byte planes (as many bytes as
    the manifest states)."""
    tensors, offset = [], 0
    for entry in manifest["tensors"]:
        stored = getattr(torch, entry["stored"])
        size, count = stored.itemsize, math.prod(entry["shape"])
        chunk = np.frombuffer(planes, dtype=np.uint8, count=count * size, offset=offset)
        raw = np.ascontiguousarray(chunk.reshape(size, count).T).reshape(-1)
        tensor = torch.from_numpy(raw).view(stored).reshape(entry["shape"])
        tensors.append(tensor.to(getattr(torch, entry["dtype"])))
        offset += count * size
    return tensors


def _fill(value: Any, aliases: list[torch.Tensor]) -> Any:
    """``value`` with every marker replaced by its tensor."""
    if isinstance(value, tuple) and len(value) == 2 and value[0] == MARKER:
        if not (_is_count(value[1]) and value[1] < len(aliases)):
            raise TransferError("the pieces' checkpoints refer to tensors the manifest does not list")
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
    run's files yet (:func:`_check_nothing_lost`); nothing is written unless the manifest and
    every piece check out, and ``checkpoint.pt`` is written last, so an interrupted unpack is
    simply run again. A pack without ``best.pt``
    (``pack_run(with_best=False)``) takes ``best_from/best.pt`` when it is given: the weights of
    the best validation the checkpoint records, since a leg writes its own only when it beats it."""
    manifest = _read_manifest(manifest_path)
    split = manifest["skeleton_bytes"]
    whole = _inflate(_read_blob(manifest_path, manifest), _inflated_bytes(manifest))
    skeleton = _skeleton(whole[:split])
    data = _tensors(whole[split:], manifest)
    files = _fill(skeleton, [data[index].clone() for index in manifest["aliases"]])
    best, taken = files.get(checkpoints.BEST), False
    if best is None and best_from is not None:
        best, taken = _best_left_behind(best_from, files[checkpoints.RESUME]), True
    with exclusive_directory(run_dir, "the run directory"):
        _check_nothing_lost(run_dir, manifest["texts"])
        for name, text in manifest["texts"].items():
            write_atomically(run_dir / name, text)
        if best is not None:
            checkpoints.save(run_dir / checkpoints.BEST, best)
        checkpoints.save(run_dir / checkpoints.RESUME, files[checkpoints.RESUME])
    return Unpacked(str(manifest["precision"]), has_best=best is not None, best_taken=taken)


def _check_nothing_lost(run_dir: Path, texts: dict[str, str]) -> None:
    """Refuse a ``run_dir`` where unpacking would replace a file of another run: a
    ``checkpoint.pt``, a text file other than the packed one, or a ``best.pt`` without the packed
    texts beside it. Only an interrupted unpack of the same pack passes, having written the texts,
    then ``best.pt``, before ``checkpoint.pt``."""
    if (run_dir / checkpoints.RESUME).exists():
        raise TransferError(f"{run_dir} already holds a run: unpack into a new directory")
    for name, text in texts.items():
        path, packed = run_dir / name, text.encode("utf-8")
        if path.exists() and not (
            path.is_file() and path.stat().st_size == len(packed) and path.read_bytes() == packed
        ):
            raise TransferError(f"{path} exists and is not the packed one: unpack into a new directory")
    if (run_dir / checkpoints.BEST).exists() and not all((run_dir / name).exists() for name in texts):
        raise TransferError(
            f"{run_dir / checkpoints.BEST} exists without the packed texts: unpack into a new directory"
        )


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
