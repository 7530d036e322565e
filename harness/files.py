"""Files on disk: the one atomic writer, the one error any unusable dataset file raises, and
sha256 checksums.

The files the harness, the baselines, the leaderboard and the builder write (results, per-token
arrays, checkpoints, token-cache entries, tables, figures, corpus files, checksum files; not the
training log, which is appended to) go through :func:`write_atomically`, so an interrupted or
failed write never leaves a truncated file or a stray temporary behind.

A ``SHA256SUMS`` file lists checksums in the ``sha256sum`` format (``HEX  relative/path``); the
downloader writes one beside every benchmark it installs, the builder one beside every corpus,
and ``baselines/trained`` ships one.

Standard library only. Importing it imports the ``harness`` package, whose ``__init__`` loads
the plugin contract and with it numpy, but never torch: the builder uses it that way.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import BinaryIO

#: Name of the checksum file beside a dataset's split files.
CHECKSUM_FILE = "SHA256SUMS"


class DatasetError(Exception):
    """A dataset that cannot be used as asked; the message is one line naming the file."""


def file_sha256(path: Path) -> str:
    """The hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def parse_checksum_file(path: Path) -> dict[str, str]:
    """``sha256  relative/path`` lines (the ``sha256sum`` format) -> {relative path: sha256}."""
    sums = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split(maxsplit=1)
        if len(parts) != 2 or len(parts[0]) != 64:
            raise DatasetError(f"{path}:{number}: not a 'sha256  path' line")
        sums[parts[1].lstrip("*").strip()] = parts[0].lower()
    return sums


def write_checksum_file(path: Path, sums: Mapping[str, str]) -> None:
    """Write {relative path: sha256} in the ``sha256sum`` format, sorted, atomically."""
    write_atomically(path, "".join(f"{digest}  {name}\n" for name, digest in sorted(sums.items())))


def write_atomically(path: str | os.PathLike, content: str | bytes | Callable[[BinaryIO], object]) -> Path:
    """Replace ``path`` with ``content`` all at once; returns the path.

    ``content`` is text (written as UTF-8, newlines as given), bytes, or a function that writes
    to the binary file it is given (``lambda handle: np.save(handle, array)``). It is written to
    a new temporary file in the same directory (``.NAME.PID-RANDOM.tmp``), flushed to disk
    (``fsync``) and renamed over ``path``: readers see the previous file or the complete new
    one, never a part. On any failure, Ctrl-C included, the temporary file is removed and the
    previous file, if any, is left as it was. Missing parent directories are created.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        with temporary.open("xb") as handle:
            if callable(content):
                content(handle)
            else:
                handle.write(content.encode("utf-8") if isinstance(content, str) else content)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path
