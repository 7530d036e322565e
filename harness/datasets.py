"""Benchmark datasets as the harness scores them: the vocabulary and each split's token stream.

Where a dataset's split files are found and how they are verified is :mod:`wikitext_toolkit_core.benchmarks`
(:class:`Dataset` extends its :class:`~wikitext_toolkit_core.benchmarks.SplitFiles`): a canonical benchmark
(``ptb``, ``wikitext-2``, ``wikitext-103`` and the ``-raw`` variants) or any directory in
WikiText layout (``wiki.{train,valid,test}.tokens``, as ``wikitext_builder`` writes it).

Token stream convention (the papers' Table 1): the whitespace-separated tokens of each line
followed by one ``<eos>``; a blank line contributes a lone ``<eos>``. The vocabulary is built
from the train split exactly as the files stand (no count threshold: the files already carry
their ``<unk>``), plus ``<eos>``, plus ``<unk>`` when train has none (the raw variants), so that
tokens of valid/test unseen in train can be mapped to it and counted.

Encoded splits and the vocabulary are cached by the files' checksums (:mod:`harness.token_cache`)
and memory-mapped on later runs; every run still reads each file it uses once, to checksum it.
An encoding pass checksums the bytes it encodes too, so a cache entry is always keyed by the
bytes it holds, even when the file is replaced (renamed over) between the two passes.

A UTF-8 byte-order mark at the start of a split file is an encoding marker, not text: it is
skipped, as Python's ``utf-8-sig`` codec does, so a corpus saved by an editor that adds one has
the same tokens as without it (the file's checksum stays that of its bytes, mark included).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import hashlib
import itertools
import logging
import multiprocessing
import os
import re
import signal
import sys
from collections.abc import Iterable, Iterator
from multiprocessing import reduction
from multiprocessing.connection import Connection
from pathlib import Path
from typing import IO, Any, Protocol

import numpy as np

from harness import token_cache
from wikitext_toolkit_core.benchmarks import (
    COMPRESSED_SUFFIX,
    READ_BLOCK_BYTES,
    SplitFiles,
    find_dataset,
    open_split,
    reading_errors,
    user_cache_dir,
)
from wikitext_toolkit_core.files import DatasetError
from wikitext_toolkit_core.format import EOS, UNK, UTF8_BOM

logger = logging.getLogger(__name__)

#: Split files at least this large get a note in the log while they are first encoded, and a
#: train file this large is encoded by two processes; the worker's share goes in pieces this large.
LARGE_FILE_BYTES = 50 << 20
WORKER_PIECE_BYTES = 32 << 20
#: ``prctl`` option (Linux) that has the kernel signal a process when its parent dies.
_PR_SET_PDEATHSIG = 1


@dataclasses.dataclass(frozen=True)
class Vocabulary:
    """Token types of a train split, most frequent first (ties in order of first occurrence)."""

    tokens: tuple[str, ...]
    _index: dict[str, int] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {token: i for i, token in enumerate(self.tokens)})
        for special in (EOS, UNK):
            if special not in self._index:
                raise DatasetError(f"vocabulary lacks the special token {special}")

    def __len__(self) -> int:
        return len(self.tokens)

    def __getitem__(self, token: str) -> int:
        return self._index[token]

    def __contains__(self, token: object) -> bool:
        return token in self._index

    def encode(self, tokens: Iterable[str]) -> tuple[np.ndarray, int]:
        """Ids (int32 ``[n]``) of ``tokens``, unknown ones mapped to ``<unk>``, and their number."""
        ids = np.fromiter(map(self._index.get, tokens, itertools.repeat(-1)), dtype=np.int32)
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
        ids: int32 array of shape ``[N]``, one ``<eos>`` closing each line; a read-only
            memory-map of the token cache (an in-memory array when the cache is not writable).
        path: the split file.
        sha256: checksum of the file's bytes.
        oov_tokens: tokens absent from the train vocabulary, mapped to ``<unk>``.
    """

    ids: np.ndarray
    path: Path
    sha256: str
    oov_tokens: int


class _TypeTable(dict):
    """UTF-8 token -> id, ids in order of first occurrence: looking up a new token appends it."""

    def __init__(self) -> None:
        super().__init__()
        self.order: list[bytes] = []

    def __missing__(self, token: bytes) -> int:
        self[token] = len(self.order)
        self.order.append(token)
        return self[token]

    def rollback(self, size: int) -> None:
        """Forget every token appended after the first ``size``."""
        for token in self.order[size:]:
            del self[token]
        del self.order[size:]


def _tokens(text: str, ends_file: bool) -> list[str]:
    """The tokens of ``text`` (whole lines; when it ``ends_file``, possibly a last line without
    its newline): each line's whitespace-separated tokens, then ``<eos>``. Lines end at ``\n``
    only, never at other Unicode line breaks."""
    tokens = text.replace("\n", f" {EOS} ").split()
    if ends_file and text and not text.endswith("\n"):
        tokens.append(EOS)
    return tokens


def _byte_tokens(data: bytes, ends_file: bool) -> list[bytes]:
    """:func:`_tokens` on UTF-8 bytes, splitting at ASCII whitespace only (twice as fast); the
    caller checks each new type with :func:`_is_one_token`."""
    tokens = data.replace(b"\n", b" " + EOS.encode() + b" ").split()
    if ends_file and data and not data.endswith(b"\n"):
        tokens.append(EOS.encode())
    return tokens


def _is_one_token(token: bytes) -> bool:
    """Whether a piece of :func:`_byte_tokens` is valid UTF-8 and one token for ``str.split``
    (which also splits at ``\x1c``-``\x1f`` and the Unicode spaces)."""
    try:
        return len(token.decode("utf-8").split()) == 1
    except UnicodeDecodeError:
        return False


def _decode(data: bytes, offset: int, path: Path) -> str:
    """``data`` (bytes ``offset`` .. of ``path``) as text; a one-line error at invalid UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DatasetError(f"{path}: not valid UTF-8 at byte {offset + error.start}") from None


def _line_blocks(
    handle: _Readable, start: int = 0, end: int | None = None
) -> Iterator[tuple[bytes, bool, int]]:
    """Bytes ``start .. end`` (``None``: to the end) of an open split file, positioned at
    ``start``, as ``(whole lines, is the last block, offset in the file)``, read
    ``READ_BLOCK_BYTES`` at a time. The last block may lack its final newline. From the start
    of the file, a leading :data:`UTF8_BOM` is left out."""
    carry, offset = b"", start  # bytes of an unfinished line; where carry starts in the file
    remaining = None if end is None else end - start
    at_start = start == 0
    while True:
        size = READ_BLOCK_BYTES if remaining is None else min(READ_BLOCK_BYTES, remaining)
        block = handle.read(size) if size else b""
        if remaining is not None:
            remaining -= len(block)
        data = carry + block
        if at_start and not (block and len(data) < len(UTF8_BOM) and UTF8_BOM.startswith(data)):
            at_start = False  # enough bytes to tell (a prefix of the mark holds no newline)
            if data.startswith(UTF8_BOM):
                data, offset = data[len(UTF8_BOM) :], offset + len(UTF8_BOM)
        cut = len(data) if not block else data.rfind(b"\n") + 1
        if cut or not block:
            yield data[:cut], not block, offset
            carry, offset = data[cut:], offset + cut
        else:
            carry = data
        if not block:
            return


def _checked_blocks(
    blocks: Iterator[tuple[bytes, bool, int]], path: Path
) -> Iterator[tuple[bytes, bool, int]]:
    """:func:`_line_blocks` of ``path``, refused at the first byte that is no text of the WikiText
    format: a NUL, or a carriage return not followed by ``\n`` (lines that end in CR alone would be
    read as one line, and their ``<eos>`` tokens lost)."""
    for data, last, offset in blocks:
        nul = data.find(b"\0")
        if nul >= 0:
            raise DatasetError(f"{path}: a NUL byte at byte {offset + nul}: not a text file")
        if b"\r" in data:
            lone = _LONE_CR.search(data)
            if lone is not None:
                raise DatasetError(
                    f"{path}: a carriage return not followed by a newline at byte {offset + lone.start()}: "
                    "lines must end in \\n (or \\r\\n); convert the file, e.g. tr '\\r' '\\n'"
                )
        yield data, last, offset


#: A carriage return that does not begin ``\r\n`` (one at a block's very end is followed by none).
_LONE_CR = re.compile(rb"\r(?!\n)")


class _Readable(Protocol):
    """What :func:`_line_blocks` reads from: a binary file, or one of the wrappers below."""

    def read(self, size: int, /) -> bytes: ...


class _Hashing:
    """A binary file whose reads are checksummed as they go: :attr:`sha256` is that of every
    byte read through it, in order (so the bytes encoded are the bytes checksummed)."""

    def __init__(self, handle: IO[bytes]) -> None:
        self.handle = handle
        self.sha256 = hashlib.sha256()

    def read(self, size: int, /) -> bytes:
        data = self.handle.read(size)
        self.sha256.update(data)
        return data

    def read_to_end(self) -> None:
        """Read (and checksum) the rest of the file."""
        for _ in iter(lambda: self.read(READ_BLOCK_BYTES), b""):
            pass


class _Positional:
    """Reads of an open file descriptor at explicit offsets (``os.pread``), from ``position``
    on: they leave the descriptor's own offset, shared with the process that handed it over,
    alone."""

    def __init__(self, descriptor: int, position: int) -> None:
        self.descriptor, self.position = descriptor, position

    def read(self, size: int, /) -> bytes:
        data = os.pread(self.descriptor, size, self.position)
        self.position += len(data)
        return data


def _first_occurrence_ids(
    table: _TypeTable, blocks: Iterable[tuple[bytes, bool, int]], path: Path
) -> list[np.ndarray]:
    """The ids (int32 ``[n_i]`` per block) of each block's tokens in ``table``, which gains
    the new types in order of first occurrence."""
    encoded = []
    for data, last, offset in blocks:
        size = len(table.order)
        tokens = _byte_tokens(data, last)
        ids = np.fromiter(map(table.__getitem__, tokens), dtype=np.int32, count=len(tokens))
        if not all(map(_is_one_token, table.order[size:])):
            # Invalid UTF-8, or Unicode spaces inside a piece: redo the block as text.
            table.rollback(size)
            tokens = [token.encode("utf-8") for token in _tokens(_decode(data, offset, path), last)]
            ids = np.fromiter(map(table.__getitem__, tokens), dtype=np.int32, count=len(tokens))
        encoded.append(ids)
    return encoded


class _InheritedFile:
    """An open file descriptor handed to a worker process: ``multiprocessing`` passes the
    descriptor itself, so the worker reads the very file the parent has open, whatever its path
    names by then."""

    def __init__(self, descriptor: int) -> None:
        self.descriptor = descriptor

    def __reduce__(self) -> tuple[object, tuple[object]]:
        return _inherited_file, (reduction.DupFd(self.descriptor),)


def _inherited_file(duplicate: Any) -> _InheritedFile:
    """The worker's side of :class:`_InheritedFile` (unpickling): ``duplicate`` is what
    ``multiprocessing.reduction.DupFd`` made of the descriptor."""
    return _InheritedFile(duplicate.detach())


def _encode_pieces_worker(
    parent: int,
    file: _InheritedFile,
    path: Path,
    scratch: Path,
    pieces: list[tuple[int, int]],
    report: Connection,
) -> None:
    """The worker process of :meth:`Dataset._first_occurrence_ids_in_two_processes`, started by
    process ``parent``: for each piece ``i`` (bytes ``start .. end`` of ``pieces[i]``, whole
    lines, of ``file``, the file the parent has open at ``path``), write its types in order of
    first occurrence (``scratch/i.types``, one per line) and their ids (``scratch/i.npy``,
    int32), then send ``i`` on ``report``; a failure is sent as its one-line message (a str).
    It ends when its parent does (:func:`end_with_parent`)."""
    end_with_parent(parent)
    try:
        with reading_errors(path.parent.name, path):
            for number, (start, end) in enumerate(pieces):
                table = _TypeTable()
                reader = _Positional(file.descriptor, start)
                blocks = _first_occurrence_ids(
                    table, _checked_blocks(_line_blocks(reader, start, end), path), path
                )
                np.save(scratch / f"{number}.npy", np.concatenate(blocks or [np.zeros(0, np.int32)]))
                (scratch / f"{number}.types").write_bytes(b"\n".join(table.order))
                report.send(number)
    except DatasetError as error:
        report.send(str(error))
    except Exception as error:  # one line for the parent, never a worker's traceback
        report.send(f"{path}: the encoding worker failed: {type(error).__name__}: {error}")


def _start_worker(
    file: IO[bytes], path: Path, scratch: Path, pieces: list[tuple[int, int]]
) -> tuple[multiprocessing.process.BaseProcess, Connection]:
    """Start :func:`_encode_pieces_worker` on ``pieces`` of the open ``file`` in a fresh
    interpreter (``spawn``: nothing of this process is inherited or re-run but its imports);
    returns the process and the end of the pipe it reports on."""
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    worker = context.Process(
        target=_encode_pieces_worker,
        args=(os.getpid(), _InheritedFile(file.fileno()), path, scratch, pieces, sender),
        daemon=True,
    )
    worker.start()
    sender.close()  # the worker's end: the pipe reads as closed once the worker has gone
    return worker, receiver


def end_with_parent(parent: int) -> None:
    """Keep this worker from outliving process ``parent``, which started it (a ``kill -9`` of the
    harness): on Linux the kernel kills it when the parent dies (``prctl(PR_SET_PDEATHSIG,
    SIGKILL)``), and it exits now if the parent died before it asked. Elsewhere its next report to
    the parent fails (a broken pipe), so it outlives the parent by at most one piece."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def _second_half_pieces(handle: IO[bytes]) -> list[tuple[int, int]]:
    """The second half of the open file ``handle`` as pieces ``(start, end)`` of whole lines,
    about ``WORKER_PIECE_BYTES`` each, from the first line start at or after the middle; the
    handle is left at the file's start."""
    size = os.fstat(handle.fileno()).st_size
    starts: list[int] = []
    for position in range(size // 2, size, WORKER_PIECE_BYTES):
        handle.seek(position)
        handle.readline()
        if not starts or handle.tell() > starts[-1]:
            starts.append(handle.tell())
    handle.seek(0)
    return list(zip(starts, starts[1:] + [size]))


def _cpus() -> int:
    """Processors this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _stamp(path: Path) -> tuple[int, int]:
    """What changes when a file is rewritten: size and modification time."""
    status = path.stat()
    return status.st_size, status.st_mtime_ns


class Dataset(SplitFiles):
    """A benchmark or WikiText-layout directory, read lazily and verified on read: its split
    files (:class:`wikitext_toolkit_core.benchmarks.SplitFiles`, whose arguments it takes), the train split's
    vocabulary and each split's token stream."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._streams: dict[str, TokenStream] = {}
        self._vocab: Vocabulary | None = None

    @contextlib.contextmanager
    def _reading_whole(self, path: Path) -> Iterator[None]:
        """Read split file ``path`` in full inside the block: a note in the log for a large file,
        and a one-line error when the file changed meanwhile."""
        stamp = _stamp(path)
        if stamp[0] >= LARGE_FILE_BYTES:
            logger.info("note: encoding %s into the token cache (once per file version)", path)
        yield
        if _stamp(path) != stamp:
            raise DatasetError(f"{path}: changed while being read; run again")

    def _encode(self, split: str, vocab: Vocabulary) -> tuple[list[np.ndarray], int]:
        """Tokenize the split and encode it with ``vocab``, in blocks: its id blocks (int32) and
        its out-of-vocabulary count."""
        path = self.path(split)
        blocks, oov = [], 0
        with self._reading_whole(path), reading_errors(self.name, path), open_split(path) as handle:
            reader = _Hashing(handle)
            for data, last, offset in _checked_blocks(_line_blocks(reader), path):
                ids, unknown = vocab.encode(_tokens(_decode(data, offset, path), last))
                blocks.append(ids)
                oov += unknown
        self._confirm_encoded(split, reader.sha256.hexdigest())
        return blocks, oov

    def _encode_train(self) -> tuple[list[np.ndarray], Vocabulary, np.ndarray]:
        """Tokenize the train split in blocks, building the vocabulary: its blocks of
        first-occurrence ids (int32), the vocabulary, and ``remap`` (int32 ``[types]``:
        first-occurrence id -> vocabulary id)."""
        path = self.path("train")
        table = _TypeTable()
        with self._reading_whole(path), reading_errors(self.name, path), open_split(path) as handle:
            reader = _Hashing(handle)
            large = path.stat().st_size >= LARGE_FILE_BYTES
            if large and _cpus() > 1 and not path.name.endswith(COMPRESSED_SUFFIX):
                blocks = self._first_occurrence_ids_in_two_processes(table, reader, path)
            else:
                blocks = _first_occurrence_ids(table, _checked_blocks(_line_blocks(reader), path), path)
        self._confirm_encoded("train", reader.sha256.hexdigest())
        counts = np.zeros(len(table.order), dtype=np.int64)
        for ids in blocks:
            counts += np.bincount(ids, minlength=len(table.order))
        # Most frequent first, ties in order of first occurrence (a stable sort).
        order = np.argsort(-counts, kind="stable")
        tokens = tuple(table.order[i].decode("utf-8") for i in order)
        tokens += () if UNK.encode() in table else (UNK,)
        if EOS not in tokens:  # not a single line
            raise DatasetError(f"{path}: the train split is empty, so there is no vocabulary")
        remap = np.empty(len(order), dtype=np.int32)
        remap[order] = np.arange(len(order), dtype=np.int32)
        return blocks, Vocabulary(tokens), remap

    def _first_occurrence_ids_in_two_processes(
        self, table: _TypeTable, reader: _Hashing, path: Path
    ) -> list[np.ndarray]:
        """:func:`_first_occurrence_ids` of the whole file open in ``reader`` (at its start, and
        read to its end, so checksummed whole), its second half encoded meanwhile by a worker
        process (:func:`_start_worker`) in pieces of about ``WORKER_PIECE_BYTES``, handed back as
        files in a scratch directory of the token cache; each piece's ids are then mapped into
        ``table``, in file order."""
        pieces = _second_half_pieces(reader.handle)
        with token_cache.scratch_directory(user_cache_dir()) as scratch:
            worker, report = _start_worker(reader.handle, path, scratch, pieces)
            try:
                blocks = _first_occurrence_ids(
                    table, _checked_blocks(_line_blocks(reader, 0, pieces[0][0]), path), path
                )
                reader.read_to_end()  # the checksum covers the worker's half too
                for _ in pieces:
                    message = report.recv()
                    if isinstance(message, str):
                        raise DatasetError(message)
                    piece = scratch / str(message)
                    types = piece.with_suffix(".types").read_bytes().split(b"\n")
                    mapping = np.fromiter(map(table.__getitem__, filter(None, types)), dtype=np.int32)
                    blocks.append(mapping[np.load(piece.with_suffix(".npy"))])
            except EOFError:
                worker.join()
                raise DatasetError(
                    f"{path}: the encoding worker failed: exit status {worker.exitcode}"
                ) from None
            finally:
                worker.kill()
                worker.join()
                report.close()
        return blocks

    def _cached_stream(
        self, split: str, vocab: Vocabulary, blocks: list[np.ndarray], oov: int, remap: np.ndarray | None
    ) -> TokenStream:
        """The split's stream from its encoded ``blocks`` (``remap``: first-occurrence ids of the
        train split that built ``vocab``, whose vocabulary is then cached too), stored in the
        token cache when it is writable."""
        train_sha256 = self.verify("train")
        cache = user_cache_dir()
        try:
            if remap is not None:  # the vocabulary was built from this (train) split
                token_cache.store_vocabulary(cache, train_sha256, vocab.tokens)
            ids = token_cache.store_ids(
                cache, train_sha256, self.verify(split), vocab.sha256(), blocks, oov, remap
            )
        except OSError as error:
            logger.warning(
                "note: cannot write the token cache in %s (%s); continuing without it", cache, error
            )
            ids = np.concatenate([block if remap is None else remap[block] for block in blocks])
        return TokenStream(ids, self.path(split), self.verify(split), oov)

    @property
    def vocab(self) -> Vocabulary:
        """The train split's vocabulary (from the token cache, else by encoding train)."""
        if self._vocab is None:
            token_cache.remove_leftovers(user_cache_dir())
            cached = token_cache.load_vocabulary(user_cache_dir(), self.verify("train"))
            if cached is None:
                blocks, vocab, remap = self._encode_train()
                self._streams["train"] = self._cached_stream("train", vocab, blocks, 0, remap)
                self._vocab = vocab
            else:
                self._vocab = Vocabulary(cached)
        return self._vocab

    def tokens(self, split: str) -> TokenStream:
        """The split's token stream, encoded with :attr:`vocab` (memory-mapped from the token
        cache when it holds this version of the files).

        Raises:
            DatasetError: the split is empty (no tokens), so there is nothing to score; the
                message names its file.
        """
        if split not in self._streams:
            vocab = self.vocab  # encodes train (keeping its stream) when no vocabulary is cached
            if split not in self._streams:
                cached = token_cache.load_ids(
                    user_cache_dir(), self.verify("train"), self.verify(split), vocab.sha256()
                )
                if cached is None:
                    blocks, oov = self._encode(split, vocab)
                    self._streams[split] = self._cached_stream(split, vocab, blocks, oov, None)
                else:
                    self._streams[split] = TokenStream(
                        cached[0], self.path(split), self.verify(split), cached[1]
                    )
        stream = self._streams[split]
        if len(stream.ids) == 0:
            raise DatasetError(f"{stream.path}: the {split} split is empty (no tokens): nothing to score")
        return stream


def load_dataset(
    name_or_path: str, data_dir: str | os.PathLike | None = None, download: bool = True
) -> Dataset:
    """:func:`wikitext_toolkit_core.benchmarks.find_dataset` as a :class:`Dataset`: a benchmark name or a
    directory, looked for in ``data_dir``, ``$HARNESS_DATA_DIR``, the packaged copies, then the
    user cache, and downloaded into the cache (checksums verified) unless ``download`` is false."""
    return find_dataset(name_or_path, Dataset, data_dir, download)
