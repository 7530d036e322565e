"""Downloading benchmarks from their canonical locations, verified by sha256.

Downloads go to ``<root>/.<name>.partial/`` and resume there after an interruption (HTTP
``Range`` requests where the server supports them); a failure that leaves nothing to resume
from leaves no partial file or directory behind. Every downloaded file is checked against
its known sha256 and refused on mismatch; split files extracted from an archive are checked
against the release's per-file checksums where known, and their checksums are written to a
``SHA256SUMS`` file so later reads are verified too. Only a complete, verified dataset is moved
to ``<root>/<name>/``. Two downloads of one benchmark (two runs on a fresh machine) take turns:
the second waits for the first, then uses what it installed.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import time
import zipfile
from pathlib import Path

import requests

from wikitext_toolkit_core import __version__
from wikitext_toolkit_core.catalogue import Benchmark, RemoteFile
from wikitext_toolkit_core.files import (
    CHECKSUM_FILE,
    DatasetError,
    file_sha256,
    waiting_lock,
    write_atomically,
    write_checksum_file,
)
from wikitext_toolkit_core.progress import progress_bar

logger = logging.getLogger(__name__)

USER_AGENT = f"wikitext-toolkit/{__version__} (benchmark downloader; python-requests)"
TIMEOUT_SECONDS = 30
ATTEMPTS_PER_URL = 4
BACKOFF_SECONDS = 1.0
_RETRIABLE_STATUS = {408, 429, 500, 502, 503, 504}
#: What ``requests`` raises when a connection fails, stalls or drops before or during the body:
#: retried, resuming from the bytes already written.
_DROPPED_TRANSFER = (
    requests.ConnectionError,
    requests.Timeout,
    requests.exceptions.ChunkedEncodingError,
    requests.exceptions.ContentDecodingError,
)


class _TransferError(Exception):
    """One URL failed; ``retriable`` says whether trying it again may help."""

    def __init__(self, message: str, retriable: bool, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retriable = retriable
        self.retry_after = retry_after


def _transfer(url: str, part: Path) -> None:
    """Append ``url``'s bytes to ``part``, resuming from its current size where possible."""
    offset = part.stat().st_size if part.exists() else 0
    headers = {"User-Agent": USER_AGENT}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    try:
        with requests.get(url, headers=headers, stream=True, timeout=TIMEOUT_SECONDS) as response:
            if response.status_code == 416 and offset:
                return  # the partial file is already complete
            if response.status_code in _RETRIABLE_STATUS:
                retry_after = response.headers.get("Retry-After", "")
                raise _TransferError(
                    f"HTTP {response.status_code}",
                    True,
                    float(retry_after) if retry_after.isdigit() else None,
                )
            if response.status_code not in (200, 206):
                raise _TransferError(f"HTTP {response.status_code}", False)
            if response.status_code == 200:
                offset = 0  # the server ignored the range: start over
            length = response.headers.get("Content-Length")
            total = offset + int(length) if length and length.isdigit() else None
            with (
                part.open("ab" if offset else "wb") as handle,
                progress_bar(
                    total=total, initial=offset, unit="B", unit_scale=True, desc=part.name[:-5]
                ) as progress,
            ):
                for block in response.iter_content(chunk_size=1 << 16):
                    handle.write(block)
                    progress.update(len(block))
    except _DROPPED_TRANSFER as error:
        raise _TransferError(type(error).__name__, True) from None


class DownloadFailed(DatasetError):
    """Every mirror of a file failed (unreachable, or an HTTP error)."""


def _fetch_url(url: str, part: Path) -> None:
    for attempt in range(ATTEMPTS_PER_URL):
        try:
            _transfer(url, part)
            return
        except _TransferError as error:
            if not error.retriable or attempt == ATTEMPTS_PER_URL - 1:
                raise
            time.sleep(error.retry_after if error.retry_after is not None else BACKOFF_SECONDS * 2**attempt)


def fetch(source: RemoteFile, directory: Path) -> Path:
    """Download ``source`` into ``directory`` (trying its mirrors in order) and verify it.

    Returns the path of the verified file. Raises :class:`DatasetError` when every mirror
    fails or the bytes do not match ``source.sha256``. However it ends, it leaves no empty
    ``.part`` file (nothing to resume from). Two calls must not write one directory at once:
    :func:`download_benchmark` makes its downloads take turns.
    """
    final = directory / source.filename
    if final.exists():
        return final  # only verified files are given their final name
    part = directory / f"{source.filename}.part"
    try:
        return _fetch_mirrors(source, part, final)
    finally:
        if part.exists() and part.stat().st_size == 0:
            part.unlink()


def _fetch_mirrors(source: RemoteFile, part: Path, final: Path) -> Path:
    """Download ``source`` into ``part`` from its first mirror that answers, verify it and
    rename it to ``final``; returns ``final``."""
    failures = []
    for url in source.urls:
        try:
            _fetch_url(url, part)
        except _TransferError as error:
            failures.append(f"{url}: {error}")
            continue
        digest = file_sha256(part)
        if digest != source.sha256:
            part.unlink()
            raise DatasetError(
                f"{source.filename} from {url}: sha256 mismatch (expected {source.sha256}, "
                f"got {digest}): refusing the download"
            )
        part.rename(final)
        return final
    raise DownloadFailed(f"could not download {source.filename}: {'; '.join(failures)}")


def _extract(archive: Path, members: dict[str, str], directory: Path) -> None:
    """Extract ``members`` (archive path -> file name) of a zip; members are matched by path,
    else by unique base name."""
    try:
        with zipfile.ZipFile(archive) as zipped:
            names = zipped.namelist()
            for member, filename in members.items():
                if member not in names:
                    candidates = [name for name in names if name.rsplit("/", 1)[-1] == filename]
                    if len(candidates) != 1:
                        raise DatasetError(f"{archive.name}: no member {member}")
                    member = candidates[0]
                with zipped.open(member) as source:
                    write_atomically(directory / filename, lambda h: shutil.copyfileobj(source, h, 1 << 20))
    except zipfile.BadZipFile:
        raise DatasetError(f"{archive.name}: not a valid zip archive") from None


def download_benchmark(benchmark: Benchmark, root: Path) -> Path:
    """Download, verify and install ``benchmark`` as ``root/<name>``; returns that directory.

    Downloads of one benchmark into one root take turns (they hold ``root/.<name>.lock``): a
    second one waits for the first to finish, then finds the benchmark installed."""
    target = root / benchmark.name
    staging = root / f".{benchmark.name}.partial"
    with contextlib.ExitStack() as held:
        try:
            root.mkdir(parents=True, exist_ok=True)
            waiting = f"waiting for another process downloading {benchmark.name} into {root}"
            held.enter_context(waiting_lock(root / f".{benchmark.name}.lock", waiting))
            if all((target / filename).is_file() for filename in benchmark.split_files.values()):
                return target  # installed by a download that held the lock first
            staging.mkdir(exist_ok=True)
        except OSError as error:
            raise DatasetError(
                f"cannot write the download cache {root} ({error.strerror}): set HARNESS_CACHE_DIR to "
                f"a writable directory, or put {benchmark.name}'s files in DIR/{benchmark.name}/ and "
                "pass --data-dir DIR"
            ) from None
        return _install(benchmark, staging, target)


def _install(benchmark: Benchmark, staging: Path, target: Path) -> Path:
    """Download ``benchmark``'s files into ``staging``, verify them and rename it to ``target``;
    returns ``target``."""
    logger.info("downloading %s (about %g MB) into %s", benchmark.name, benchmark.approx_mb, target)
    for source in benchmark.sources:
        try:
            path = fetch(source, staging)
        except DownloadFailed as error:
            if not any(staging.iterdir()):
                staging.rmdir()  # nothing to resume from
            files = ", ".join(benchmark.split_files.values())
            raise DownloadFailed(
                f"{error}. To use local copies instead, put {files} in DIR/{benchmark.name}/ and "
                f"pass --data-dir DIR or set HARNESS_DATA_DIR=DIR"
            ) from None
        if source.members:
            _extract(path, dict(source.members), staging)
    sums = {}
    for filename in benchmark.split_files.values():
        digest = file_sha256(staging / filename)
        expected = benchmark.file_sha256.get(filename)
        if expected is not None and digest != expected:
            raise DatasetError(
                f"{benchmark.name}/{filename}: sha256 mismatch after extraction "
                f"(expected {expected}, got {digest})"
            )
        sums[filename] = digest
    for source in benchmark.sources:
        if source.members:
            (staging / source.filename).unlink()
    write_checksum_file(staging / CHECKSUM_FILE, sums)
    if target.exists():
        if any(target.iterdir()):
            raise DatasetError(
                f"{target} exists but holds none of {benchmark.name}'s split files; move it away"
            )
        target.rmdir()
    staging.rename(target)
    return target
