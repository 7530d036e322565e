"""The token cache: each split's encoded ids and the train vocabulary, keyed by file checksums.

Encoding a WikiText-103-sized split (540 MB, 103 M tokens) takes seconds; reading it back from
the cache, memory-mapped, takes almost nothing. An entry is keyed by the sha256 of the train
file (which fixes the vocabulary) and of the split file (which fixes its ids), so an edited
file can never meet a stale entry. Layout, under ``$HARNESS_CACHE_DIR/tokens/v1/TRAIN_SHA256/``:

- ``vocab.txt``: the vocabulary, one type per line, id order (``"\\n".join(tokens)``, whose
  sha256 is :meth:`harness.datasets.Vocabulary.sha256`); ``vocab.json``: that sha256 and the
  number of types.
- ``SPLIT_SHA256.npy``: the split's ids, int32 ``[N]``; ``SPLIT_SHA256.json``: ``N``, the
  out-of-vocabulary count, the vocabulary's sha256 and the CRC-32 of the ids' bytes.

Every read checks an entry against its JSON (sizes, checksums); an entry that fails is reported (a
warning in the log: a line on a command's stderr), deleted and rebuilt, never used. Files are
written under temporary names and renamed into place, the JSON last, so an interrupted write leaves
no entry at all; the temporaries of a killed run, and the scratch directories of its encoding worker
(``tokens/.encode.PID-RANDOM.tmp``), are removed by a run an hour later (:func:`remove_leftovers`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import secrets
import shutil
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wikitext_toolkit_core import bounded_json
from wikitext_toolkit_core.files import remove_stale_temporaries, write_atomically

logger = logging.getLogger(__name__)

#: Layout version: entries of another version are never read.
VERSION = 1
#: dtype of the cached ids (vocabularies stay far below 2**31 types).
IDS_DTYPE = np.dtype(np.int32)


class CacheCorrupt(Exception):
    """An entry that does not match its own record; the message says how."""


#: How long a dead process's temporaries stay in the cache before a run removes them: the cache
#: may be shared by containers or machines whose live writers' PIDs look dead from here, and no
#: write leaves its files unchanged for an hour.
LEFTOVER_IDLE_SECONDS = 3600.0


def _entry(cache_root: Path, train_sha256: str) -> Path:
    return cache_root / "tokens" / f"v{VERSION}" / train_sha256


def remove_leftovers(cache_root: Path) -> None:
    """Remove what runs killed while writing the cache left in it: the temporary files of its
    entries and the scratch directories of :func:`scratch_directory`, those of processes that
    are gone and unchanged for :data:`LEFTOVER_IDLE_SECONDS` (a live run's are left alone; see
    :func:`wikitext_toolkit_core.files.remove_stale_temporaries`)."""
    tokens = cache_root / "tokens"
    remove_stale_temporaries(tokens, LEFTOVER_IDLE_SECONDS)
    with contextlib.suppress(OSError):  # no cache yet, or one that cannot be read
        for entry in sorted((tokens / f"v{VERSION}").iterdir()):
            remove_stale_temporaries(entry, LEFTOVER_IDLE_SECONDS)


@contextlib.contextmanager
def scratch_directory(cache_root: Path) -> Iterator[Path]:
    """A new, empty directory for temporary files, removed on exit: ``tokens/.encode.PID-RANDOM.tmp``
    in the cache, named as a temporary of this process so that a later run's
    :func:`remove_leftovers` removes it if this one is killed; in the system's temporary folder
    when the cache cannot be written."""
    scratch = cache_root / "tokens" / f".encode.{os.getpid()}-{secrets.token_hex(4)}.tmp"
    try:
        scratch.mkdir(parents=True)
    except OSError:
        with tempfile.TemporaryDirectory(prefix="harness-encode-") as fallback:
            yield Path(fallback)
        return
    try:
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _write_json(path: Path, record: dict[str, Any]) -> None:
    write_atomically(path, json.dumps(record))


def _read_json(path: Path, expected: dict[str, Any]) -> dict[str, Any] | None:
    """The record at ``path``; None when there is none (or the cache cannot be read). Raises
    :class:`CacheCorrupt` when it is not JSON or disagrees with ``expected`` (version, keys)."""
    try:
        text = path.read_bytes()
    except OSError:
        return None
    try:
        record = bounded_json.loads(text)
    except ValueError as error:
        raise CacheCorrupt(f"{path.name} unreadable ({error})") from None
    if not isinstance(record, dict) or any(record.get(k) != v for k, v in expected.items()):
        raise CacheCorrupt(f"{path.name} does not describe this entry")
    return record


def _discard(files: Sequence[Path], reason: CacheCorrupt) -> None:
    logger.warning("note: token cache entry %s is corrupt (%s); rebuilding it", files[0].parent, reason)
    for file in files:
        try:
            file.unlink(missing_ok=True)
        except OSError:  # rewritten in place on the next store, or the cache is read-only
            pass


def load_vocabulary(cache_root: Path, train_sha256: str) -> tuple[str, ...] | None:
    """The cached vocabulary of the train file with this checksum, or None (also when the entry
    was corrupt: it is then deleted)."""
    entry = _entry(cache_root, train_sha256)
    meta, text_path = entry / "vocab.json", entry / "vocab.txt"
    try:
        record = _read_json(meta, {"version": VERSION, "train_sha256": train_sha256})
        if record is None:
            return None
        try:
            data = text_path.read_bytes()
        except OSError as error:
            raise CacheCorrupt(f"vocab.txt unreadable ({error.strerror})") from None
        if hashlib.sha256(data).hexdigest() != record.get("vocab_sha256"):
            raise CacheCorrupt("vocab.txt does not match its checksum")
        tokens = tuple(data.decode("utf-8").split("\n"))
        if len(tokens) != record.get("types"):
            raise CacheCorrupt(f"vocab.txt holds {len(tokens)} types, not {record.get('types')}")
        return tokens
    except CacheCorrupt as reason:
        _discard([meta, text_path], reason)
        return None


def store_vocabulary(cache_root: Path, train_sha256: str, tokens: Sequence[str]) -> None:
    """Cache a vocabulary (raises OSError when the cache cannot be written)."""
    entry = _entry(cache_root, train_sha256)
    data = "\n".join(tokens).encode("utf-8")
    write_atomically(entry / "vocab.txt", data)
    _write_json(
        entry / "vocab.json",
        {
            "version": VERSION,
            "train_sha256": train_sha256,
            "vocab_sha256": hashlib.sha256(data).hexdigest(),
            "types": len(tokens),
        },
    )


def load_ids(
    cache_root: Path, train_sha256: str, split_sha256: str, vocab_sha256: str
) -> tuple[np.ndarray, int] | None:
    """The cached ids of a split (read-only int32 memory-map ``[N]``) and its out-of-vocabulary
    count, or None (also when the entry was corrupt: it is then deleted)."""
    entry = _entry(cache_root, train_sha256)
    meta, ids_path = entry / f"{split_sha256}.json", entry / f"{split_sha256}.npy"
    try:
        record = _read_json(
            meta,
            {
                "version": VERSION,
                "train_sha256": train_sha256,
                "split_sha256": split_sha256,
                "vocab_sha256": vocab_sha256,
            },
        )
        if record is None:
            return None
        try:
            ids = np.load(ids_path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as error:
            raise CacheCorrupt(f"{ids_path.name} unreadable ({error})") from None
        if ids.dtype != IDS_DTYPE or ids.shape != (record.get("tokens"),):
            raise CacheCorrupt(
                f"{ids_path.name} holds {ids.dtype} {ids.shape}, not {IDS_DTYPE} ({record.get('tokens')},)"
            )
        if zlib.crc32(memoryview(ids).cast("B")) != record.get("crc32"):
            raise CacheCorrupt(f"{ids_path.name} does not match its CRC-32")
        oov_tokens = record.get("oov_tokens")
        if isinstance(oov_tokens, bool) or not isinstance(oov_tokens, int) or not 0 <= oov_tokens <= len(ids):
            raise CacheCorrupt(f"{meta.name}: oov_tokens {oov_tokens!r} is not a count of its tokens")
        return ids, oov_tokens
    except CacheCorrupt as reason:
        _discard([meta, ids_path], reason)
        return None


def store_ids(
    cache_root: Path,
    train_sha256: str,
    split_sha256: str,
    vocab_sha256: str,
    blocks: Sequence[np.ndarray],
    oov_tokens: int,
    remap: np.ndarray | None = None,
) -> np.ndarray:
    """Cache a split's ids, given as consecutive blocks (each mapped through ``remap``, int
    ``[old id] -> new id``, when given), and return them memory-mapped (int32 ``[N]``), so that
    no second copy of a large split is ever in memory. Raises OSError when the cache cannot be
    written."""
    entry = _entry(cache_root, train_sha256)
    meta, ids_path = entry / f"{split_sha256}.json", entry / f"{split_sha256}.npy"
    total = sum(len(block) for block in blocks)
    crc = 0

    def write(handle: Any) -> None:
        nonlocal crc
        np.lib.format.write_array_header_1_0(
            handle,
            {"descr": np.lib.format.dtype_to_descr(IDS_DTYPE), "fortran_order": False, "shape": (total,)},
        )
        for block in blocks:
            data = np.ascontiguousarray(block if remap is None else remap[block], dtype=IDS_DTYPE)
            view = data.data.cast("B")
            crc = zlib.crc32(view, crc)
            handle.write(view)

    write_atomically(ids_path, write)
    _write_json(
        meta,
        {
            "version": VERSION,
            "train_sha256": train_sha256,
            "split_sha256": split_sha256,
            "vocab_sha256": vocab_sha256,
            "tokens": total,
            "oov_tokens": oov_tokens,
            "crc32": crc,
        },
    )
    return np.load(ids_path, mmap_mode="r", allow_pickle=False)
