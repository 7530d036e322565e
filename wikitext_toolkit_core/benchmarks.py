"""Benchmark files: where a dataset's split files are, and that they are the right ones.

A dataset is a directory holding one text file per split: the canonical benchmarks of
:mod:`wikitext_toolkit_core.catalogue` (found in ``--data-dir``, ``$HARNESS_DATA_DIR``, the copies shipped in
``wikitext_toolkit_core/data/``, then the download cache, and downloaded there when absent) or any directory
in WikiText or PTB layout (``wiki.{train,valid,test}.tokens``, as ``wikitext_builder`` writes it).
A split file may be stored xz-compressed as ``NAME.xz``. Each file is checked against its known
checksum (the release's, or that of a ``SHA256SUMS`` beside it) when it is read.

This is what the builder needs of a benchmark (its articles, to keep them out of a corpus); the
harness's :class:`harness.datasets.Dataset` adds the vocabulary and the token streams.
"""

from __future__ import annotations

import contextlib
import hashlib
import lzma
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, TypeVar

from wikitext_toolkit_core.catalogue import BENCHMARKS, Benchmark
from wikitext_toolkit_core.files import CHECKSUM_FILE, DatasetError, parse_checksum_file
from wikitext_toolkit_core.format import SPLITS

#: Bytes read at a time when checksumming a split file.
READ_BLOCK_BYTES = 1 << 23
#: A split file may be stored xz-compressed as ``NAME.xz``; its checksum is that of ``NAME``.
COMPRESSED_SUFFIX = ".xz"
#: PTB and WikiText-2 as shipped inside the package (xz-compressed; see ``data/README.md``).
PACKAGED_DATA = Path(__file__).parent / "data"

#: Split file layouts recognised in a user directory, in order of preference.
_DIRECTORY_LAYOUTS = (
    {split: f"wiki.{split}.tokens" for split in SPLITS},
    {split: f"wiki.{split}.raw" for split in SPLITS},
    {split: f"ptb.{split}.txt" for split in SPLITS},
)


def user_cache_dir() -> Path:
    """The toolkit's cache: ``$HARNESS_CACHE_DIR``, else ``$XDG_CACHE_HOME/wikitext-toolkit``."""
    if os.environ.get("HARNESS_CACHE_DIR"):
        return Path(os.environ["HARNESS_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "wikitext-toolkit"


@contextlib.contextmanager
def reading_errors(name: str, path: Path) -> Iterator[None]:
    """Turn the errors of reading a split file into one-line :class:`DatasetError`."""
    try:
        yield
    except FileNotFoundError:
        raise DatasetError(f"{name}: missing split file {path}") from None
    except lzma.LZMAError as error:
        raise DatasetError(f"{path}: not a valid xz file ({error})") from None
    except OSError as error:
        raise DatasetError(f"{name}: cannot read {path}: {error.strerror}") from None


def open_split(path: Path) -> IO[bytes]:
    """The split file's bytes (decompressed for ``NAME.xz``)."""
    return lzma.open(path) if path.name.endswith(COMPRESSED_SUFFIX) else path.open("rb")


class SplitFiles:
    """A benchmark or WikiText-layout directory's split files, verified on read.

    Args:
        name: the benchmark name, or the directory's name for a user directory.
        directory: where the split files are.
        split_files: split -> file name inside ``directory``.
        expected_sha256: file name -> checksum the file must have (the canonical release's,
            or those of a ``SHA256SUMS`` file beside it); files without one are read unverified.
        canonical: whether the directory is a catalogue benchmark, checked against the
            canonical release (what a checksum mismatch advises depends on it; a user directory
            that merely has a benchmark's name is not one).
    """

    def __init__(
        self,
        name: str,
        directory: Path,
        split_files: Mapping[str, str],
        expected_sha256: Mapping[str, str],
        *,
        canonical: bool = False,
    ) -> None:
        self.name = name
        self.canonical = canonical
        self.directory = directory
        self.split_files = dict(split_files)
        self.expected_sha256 = dict(expected_sha256)
        self._sha256: dict[str, str] = {}  # split -> verified checksum of its file

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {str(self.directory)!r})"

    def path(self, split: str) -> Path:
        """The split's file: ``NAME``, else its compressed form ``NAME.xz`` when only that exists."""
        if split not in self.split_files:
            raise DatasetError(f"{self.name}: unknown split {split!r} (known: {', '.join(self.split_files)})")
        return (
            _stored_file(self.directory, self.split_files[split]) or self.directory / self.split_files[split]
        )

    def is_verified(self, split: str) -> bool:
        """Whether ``split`` has a known checksum that its file is checked against."""
        return self.split_files[split] in self.expected_sha256

    def _check(self, split: str, digest: str) -> str:
        expected = self.expected_sha256.get(self.split_files[split])
        if expected is not None and digest != expected:
            advice = (
                ("the file is corrupted or not the canonical release; delete it to download it again")
                if self.canonical
                else (
                    f"the file changed after its {CHECKSUM_FILE} was written: rebuild the corpus with "
                    "`python -m wikitext_builder`, or restore the file"
                )
            )
            raise DatasetError(
                f"{self.path(split)}: sha256 mismatch (expected {expected}, got {digest}): {advice}"
            )
        return digest

    def verify(self, split: str) -> str:
        """The split file's sha256, checked against its known checksum if any (read in blocks,
        once per dataset object)."""
        if split not in self._sha256:
            path = self.path(split)
            digest = hashlib.sha256()
            with reading_errors(self.name, path), open_split(path) as handle:
                for block in iter(lambda: handle.read(READ_BLOCK_BYTES), b""):
                    digest.update(block)
            self._sha256[split] = self._check(split, digest.hexdigest())
        return self._sha256[split]

    def _confirm_encoded(self, split: str, digest: str) -> None:
        """Check ``digest``, the sha256 of the bytes of ``split`` just encoded (or read whole by
        :meth:`read_bytes`): against the file's known checksum, and against what its checksum
        pass read (the cache key), so that what is encoded is always what it is keyed and
        reported by: a file replaced in between, by a rename, is a one-line error."""
        self._check(split, digest)
        if self._sha256.setdefault(split, digest) != digest:
            raise DatasetError(f"{self.path(split)}: changed while being read; run again")

    def read_bytes(self, split: str) -> bytes:
        """The split file's bytes (decompressed for ``NAME.xz``; a byte-order mark included),
        read whole and checked like an encoding pass: they are those :meth:`verify` checksums,
        else a one-line error (the file was replaced in between)."""
        path = self.path(split)
        with reading_errors(self.name, path), open_split(path) as handle:
            data = handle.read()
        self._confirm_encoded(split, hashlib.sha256(data).hexdigest())
        return data

    def files(self) -> list[Path]:
        """The split files (see :meth:`path`), in split order."""
        return [self.path(split) for split in self.split_files]


Files = TypeVar("Files", bound=SplitFiles)


def _stored_file(directory: Path, filename: str) -> Path | None:
    """``directory/filename``, else ``directory/filename.xz``, whichever exists first."""
    for candidate in (filename, filename + COMPRESSED_SUFFIX):
        if (directory / candidate).is_file():
            return directory / candidate
    return None


def _known_checksums(directory: Path, benchmark: Benchmark | None) -> dict[str, str]:
    """Checksums a directory's files must match: the canonical ones, else those of the
    directory's own ``SHA256SUMS`` (names relative to it). A ``SHA256SUMS`` elsewhere, in the
    parent directory say, is not the dataset's and is never read."""
    sums: dict[str, str] = {}
    own_file = directory / CHECKSUM_FILE
    if own_file.is_file():
        sums.update(parse_checksum_file(own_file))
    if benchmark is not None:
        sums.update(benchmark.file_sha256)
    return sums


def dataset_from_directory(
    directory: Path, kind: type[Files], name: str | None = None, benchmark: Benchmark | None = None
) -> Files:
    """The ``kind`` (:class:`SplitFiles` or a subclass) of ``directory``, in the benchmark's
    layout or a recognised WikiText/PTB one."""
    if benchmark is not None:
        split_files = benchmark.split_files
    else:
        layout = next(
            (
                layout
                for layout in _DIRECTORY_LAYOUTS
                if _stored_file(directory, layout["train"]) or _stored_file(directory, layout["test"])
            ),
            None,
        )
        if layout is None:
            raise DatasetError(
                f"{directory}: no split files found (expected wiki.{{train,valid,test}}.tokens, "
                "wiki.*.raw or ptb.*.txt)"
            )
        split_files = layout
    return kind(
        name or directory.resolve().name,
        directory,
        split_files,
        _known_checksums(directory, benchmark),
        canonical=benchmark is not None,
    )


def search_roots(data_dir: str | os.PathLike | None) -> list[tuple[str, Path]]:
    """Where benchmarks are looked for, in order: ``--data-dir``, ``$HARNESS_DATA_DIR``, the
    copies shipped in the package (PTB and WikiText-2), then the download cache."""
    roots = []
    if data_dir is not None:
        if not Path(data_dir).is_dir():
            raise DatasetError(f"--data-dir {data_dir}: no such directory")
        roots.append(("--data-dir", Path(data_dir)))
    if os.environ.get("HARNESS_DATA_DIR"):
        roots.append(("HARNESS_DATA_DIR", Path(os.environ["HARNESS_DATA_DIR"])))
    roots.append(("packaged", PACKAGED_DATA))
    roots.append(("cache", user_cache_dir() / "data"))
    return roots


def locate_benchmark(name: str, data_dir: str | os.PathLike | None = None) -> Path | None:
    """The first directory of the search roots that holds the benchmark's files, if any."""
    benchmark = BENCHMARKS[name]
    for _, root in search_roots(data_dir):
        directory = root / name
        if any(_stored_file(directory, filename) for filename in benchmark.split_files.values()):
            return directory
    return None


def find_dataset(
    name_or_path: str, kind: type[Files], data_dir: str | os.PathLike | None = None, download: bool = True
) -> Files:
    """Resolve a benchmark name or a directory to its split files, as a ``kind``
    (:class:`SplitFiles` or a subclass, such as the harness's ``Dataset``).

    Benchmarks are looked for in ``data_dir``, then ``$HARNESS_DATA_DIR``, then the user cache;
    when absent everywhere they are downloaded into the cache (checksums verified) unless
    ``download`` is false.
    """
    benchmark = BENCHMARKS.get(name_or_path)
    if benchmark is None:
        path = Path(name_or_path)
        if not path.is_dir():
            raise DatasetError(
                f"unknown dataset {name_or_path!r}: neither a benchmark "
                f"({', '.join(BENCHMARKS)}) nor a directory"
            )
        return dataset_from_directory(path, kind)
    directory = locate_benchmark(benchmark.name, data_dir)
    if directory is None:
        searched = ", ".join(f"{label} {root / benchmark.name}" for label, root in search_roots(data_dir))
        if not download:
            raise DatasetError(f"{benchmark.name}: not found (searched {searched})")
        from wikitext_toolkit_core.download import download_benchmark

        directory = download_benchmark(benchmark, user_cache_dir() / "data")
    return dataset_from_directory(directory, kind, benchmark.name, benchmark)
