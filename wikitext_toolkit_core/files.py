"""Files on disk: the one atomic writer, the one error any unusable dataset file raises, and
sha256 checksums.

The files the harness, the baselines, the leaderboard and the builder write (results, per-token
arrays, checkpoints, token-cache entries, tables, figures, corpus files, checksum files; not the
training log, which is appended to) go through :func:`write_atomically`, so an interrupted or
failed write never leaves a truncated file or a stray temporary behind, and the temporary that a
killed writer (``kill -9``, a power cut) left beside a file is removed by the next write of that
file (the rule is :func:`remove_stale_temporaries`'s).

A ``SHA256SUMS`` file lists checksums in the ``sha256sum`` format (``HEX  relative/path``); the
downloader writes one beside every benchmark it installs, the builder one beside every corpus,
and ``baselines/trained`` ships one.

Standard library only. Importing it imports the ``harness`` package, whose ``__init__`` loads
the plugin contract and with it numpy, but never torch: the builder uses it that way.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import logging
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import BinaryIO

from wikitext_toolkit_core.errors import ToolkitError

logger = logging.getLogger(__name__)

#: Name of the checksum file beside a dataset's split files.
CHECKSUM_FILE = "SHA256SUMS"

#: The name :func:`write_atomically` gives its temporary file: ``.NAME.PID-RANDOM.tmp``.
_TEMPORARY_NAME = re.compile(r"\.(?P<name>.+)\.(?P<pid>[0-9]+)-[0-9a-f]+\.tmp")

#: Name of the lock file that :func:`exclusive_directory` holds in a directory.
LOCK_FILE = ".lock"


class DirectoryBusy(ToolkitError):
    """Another process is writing the directory; the message is one line naming it."""


class DatasetError(ToolkitError):
    """A dataset that cannot be used as asked; the message is one line naming the file."""


def file_sha256(path: Path) -> str:
    """The hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def parse_checksum_file(path: Path) -> dict[str, str]:
    """``sha256  relative/path`` lines (the ``sha256sum`` format) -> {relative path: sha256}.

    Raises:
        DatasetError: one line naming the file, when it cannot be read, is not UTF-8 text (a
            binary file) or holds a line of another format.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise DatasetError(f"{path}: not a checksum file (not UTF-8 text, at byte {error.start})") from None
    except OSError as error:
        raise DatasetError(f"{path}: cannot read the checksum file: {error.strerror}") from None
    sums = {}
    for number, line in enumerate(text.splitlines(), start=1):
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

    The writer holds an ``flock`` on its temporary until it is renamed, and first removes the
    stale temporaries of ``path`` (``.NAME.PID-RANDOM.tmp`` of the same ``NAME``) that killed
    writers left: those of writers that are gone by the rule of :func:`remove_stale_temporaries`.
    A concurrent writer's temporary is never removed, nor the temporaries of other files.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries_of(path)
    temporary, handle = _new_temporary(path)
    try:
        with handle:
            if callable(content):
                content(handle)
            else:
                handle.write(content.encode("utf-8") if isinstance(content, str) else content)
            handle.flush()
            os.fsync(handle.fileno())
            os.replace(temporary, path)  # still locked: the name is never free of its writer's lock
    except BaseException as error:
        temporary.unlink(missing_ok=True)
        if isinstance(error, OSError) and error.filename is None:
            error.filename = str(path)  # a failed write names no file: say which (a full disk, say)
        raise
    return path


def check_files_can_be_created(directory: str | os.PathLike) -> None:
    """Create a file in ``directory``, or in the nearest existing folder above it (where a write
    would create it), and remove it; the ``OSError`` of a file system that refuses it is raised
    as it is. Permissions alone do not tell: root may write anywhere by them, yet ``/proc``
    takes no file. The file is named as :func:`write_atomically` names its temporaries
    (``.check.PID-RANDOM.tmp``), which :func:`remove_stale_temporaries` sweeps should the check
    be killed in between."""
    folder = Path(os.path.abspath(directory))
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    temporary, handle = _new_temporary(folder / ".check")
    handle.close()
    temporary.unlink()


def _new_temporary(path: Path) -> tuple[Path, BinaryIO]:
    """Create this process's temporary for ``path`` (``.NAME.PID-RANDOM.tmp``), open for writing and
    ``flock``-ed, the sign to sweepers that it is at work (see :func:`remove_stale_temporaries`).
    Made again under a new name if a sweeper removed it before the lock was taken."""
    while True:
        temporary = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
        handle = temporary.open("xb")
        try:
            if _lock_own_temporary(temporary, handle):
                return temporary, handle
        except BaseException:
            handle.close()
            temporary.unlink(missing_ok=True)
            raise
        handle.close()


def _lock_own_temporary(temporary: Path, handle: BinaryIO) -> bool:
    """``flock`` the new ``temporary`` open as ``handle``, waiting for a sweeper that holds it; False
    when that sweeper removed it meanwhile. Where the filesystem has no locks, it goes unlocked."""
    with contextlib.suppress(OSError):
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
    try:
        return os.stat(temporary).st_ino == os.fstat(handle.fileno()).st_ino
    except FileNotFoundError:
        return False


def _process_is_alive(pid: int) -> bool:
    """Whether a process with this id exists (another user's counts too)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temporaries(directory: Path, idle_seconds: float = 0.0) -> list[Path]:
    """Remove the temporaries that killed processes left in ``directory``; returns their paths.

    A ``kill -9`` (or a power cut) between creating ``.NAME.PID-RANDOM.tmp`` and renaming it
    (:func:`write_atomically`) leaves it behind; so does one inside a scratch directory named the
    same way (the token cache's). The rule, which :func:`write_atomically` applies to the
    temporaries of the file it writes: a temporary is stale, and removed (a scratch directory with
    its contents), when its ``PID`` is no live process here (``os.kill(PID, 0)`` finds none) and,
    for a file, no process holds its ``flock`` (every writer holds one until it renames it, so a
    writer of another PID namespace - a container, another machine sharing the directory - whose
    PID looks dead from here is still seen at work where the filesystem has locks). A live ``PID``
    keeps it, even one reused by another program (that only delays the sweep to a later run).
    ``idle_seconds`` also spares those changed more recently (the temporary, or a file directly in
    it): scratch directories carry no lock, so a directory shared by processes of other PID
    namespaces sees their live users as dead PIDs. Other files are left alone, and a directory
    that is missing or cannot be written is no error.
    """
    with contextlib.suppress(OSError):
        return [path for path in sorted(Path(directory).iterdir()) if _remove_if_stale(path, idle_seconds)]
    return []


def _remove_stale_temporaries_of(path: Path) -> None:
    """Remove the stale temporaries of file ``path``: ``.NAME.PID-RANDOM.tmp`` files beside it,
    ``NAME`` its name, by the rule of :func:`remove_stale_temporaries`."""
    prefix, candidates = f".{path.name}.", []
    with contextlib.suppress(OSError), os.scandir(path.parent) as entries:
        candidates = [
            Path(entry.path)
            for entry in entries
            if entry.name.startswith(prefix) and not entry.is_dir(follow_symlinks=False)
        ]
    for candidate in candidates:
        match = _TEMPORARY_NAME.fullmatch(candidate.name)
        if match is not None and match["name"] == path.name:
            _remove_if_stale(candidate)


def _remove_if_stale(path: Path, idle_seconds: float = 0.0) -> bool:
    """Remove ``path`` if it is a stale temporary (see :func:`remove_stale_temporaries`); True
    when removed."""
    match = _TEMPORARY_NAME.fullmatch(path.name)
    if match is None or _process_is_alive(int(match["pid"])):
        return False
    try:
        if time.time() - _last_change(path) < idle_seconds:
            return False
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
            return True
    except OSError:
        return False
    return _unlink_unless_locked(path)


def _unlink_unless_locked(path: Path) -> bool:
    """Remove the file ``path`` unless a process holds its ``flock`` (a writer at work); True when
    removed. It is removed holding the lock, so that a writer that has just created it and waits
    for it sees it gone. Where the filesystem has no locks, it is removed; where it cannot be
    opened, kept."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            os.close(descriptor)
            return False
    try:
        path.unlink()
    except OSError:
        return False
    finally:
        os.close(descriptor)
    return True


def _last_change(path: Path) -> float:
    """The latest modification time of ``path`` and, for a directory, of the entries directly in it."""
    times = [path.lstat().st_mtime]
    if path.is_dir() and not path.is_symlink():
        times.extend(child.lstat().st_mtime for child in path.iterdir())
    return max(times)


@contextlib.contextmanager
def exclusive_directory(directory: str | os.PathLike, what: str) -> Iterator[Path]:
    """Hold ``DIRECTORY/.lock`` (an ``flock``) while the body writes ``directory``; yields it.

    A second writer, in this process or another, fails at once with :class:`DirectoryBusy`
    (``what`` names the directory's role in the message, e.g. ``"--output-dir"``) instead of
    interleaving its files with the first one's. The kernel releases the lock when the holder
    exits, ``kill -9`` included, so a stale lock file never blocks the next run. The directory is
    created if missing.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    handle = _lock_file(directory / LOCK_FILE, wait=False)
    if handle is None:
        raise DirectoryBusy(
            f"{what} {directory}: another process is writing it (it holds {directory / LOCK_FILE}); "
            "wait for it to finish or choose another directory"
        )
    try:
        yield directory
    finally:
        handle.close()


@contextlib.contextmanager
def waiting_lock(path: str | os.PathLike, waiting: str) -> Iterator[None]:
    """Hold an ``flock`` on the file ``path`` while the body runs, after waiting for any other
    holder, in this process or another, to release it (logging ``waiting``, a warning, first). The
    file is created for the body and removed after it (a waiting holder then locks a new one); the
    kernel releases the lock when the holder exits, ``kill -9`` included, so a file left behind
    never blocks the next holder."""
    path = Path(path)
    handle = _lock_file(path, wait=False)
    if handle is None:
        logger.warning(waiting)
        handle = _lock_file(path, wait=True)
    assert handle is not None  # a waiting flock is never refused
    try:
        yield
    finally:
        path.unlink(missing_ok=True)
        handle.close()


def _lock_file(path: Path, *, wait: bool) -> BinaryIO | None:
    """Open and ``flock`` ``path``; when another holder has it, wait for it to release it if
    ``wait``, else return None. Retried when the file was unlinked (by a run that cleaned up a
    directory it had created) between the open and the lock, so that two holders can never hold
    two different files."""
    while True:
        handle = open(path, "a+b")  # noqa: SIM115 (the caller closes it)
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except OSError as error:
            handle.close()
            if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            return None
        try:
            if os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino:
                return handle
        except FileNotFoundError:
            pass
        handle.close()
