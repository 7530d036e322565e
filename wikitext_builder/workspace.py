"""The directories a build writes, held for the whole build.

:func:`holding_output` locks the output directory (and the directory of a cache that lies
elsewhere) against a second build, removes the temporaries a killed build left, and, when the
build fails, removes what it created without content, so that a failed first build leaves the
working directory as it was.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from wikitext_builder.cache import Cache, CacheError
from wikitext_toolkit_core.files import LOCK_FILE, exclusive_directory, remove_stale_temporaries


@contextlib.contextmanager
def holding_output(out_dir: Path, cache_path: Path | None = None) -> Iterator[None]:
    """Hold ``out_dir``, and the directory of a cache that lies elsewhere, against a second build
    for the whole body (a second one gets :class:`DirectoryBusy`), after removing the temporary
    files that a killed build left in ``out_dir``.

    When the body fails, what this run created and left without content is removed (a new cache
    that holds nothing fetched, new directories left empty), so that a failed first build, such
    as one without the network, leaves the working directory as it was.
    """
    directories = [out_dir]
    if cache_path is not None and cache_path.parent.resolve() != out_dir.resolve():
        directories.append(cache_path.parent)
    created = {directory: _missing_directories(directory) for directory in directories}
    new_cache = cache_path if cache_path is not None and not cache_path.exists() else None
    with contextlib.ExitStack() as held:
        held.enter_context(exclusive_directory(out_dir, "--output-dir"))
        locked = [out_dir]
        try:
            for directory in directories[1:]:
                held.enter_context(exclusive_directory(directory, "the directory of --cache"))
                locked.append(directory)
            remove_stale_temporaries(out_dir)
            yield
        except BaseException:
            if new_cache is not None and len(locked) == len(directories):  # not another build's
                _remove_unfilled_cache(new_cache)
            for directory in reversed(locked):
                _remove_created(created[directory])
            raise


def _missing_directories(directory: Path) -> list[Path]:
    """``directory`` and its ancestors that do not exist yet, deepest first."""
    missing = []
    for path in (directory, *directory.parents):
        if path.exists():
            break
        missing.append(path)
    return missing


def _remove_created(created: list[Path]) -> None:
    """Remove the directories this run created (:func:`_missing_directories`, deepest first) that
    hold nothing but the lock file; stop at the first that holds more."""
    for directory in created:
        try:
            if any(path.name != LOCK_FILE for path in directory.iterdir()):
                return
            (directory / LOCK_FILE).unlink(missing_ok=True)
            directory.rmdir()
        except OSError:
            return


def _remove_unfilled_cache(path: Path) -> None:
    """Remove a cache this run created, with SQLite's side files, unless it holds something
    fetched (a rerun resumes from it)."""
    if not path.exists():
        return
    try:
        with Cache(path) as cache:
            if cache.holds_fetched():
                return
    except CacheError:
        return
    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm", f"{path.name}-journal"):
        path.with_name(name).unlink(missing_ok=True)
