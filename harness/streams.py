"""The stream layout of an evaluation: a split's predictions as ``B`` streams cut into chunks.

The ``N`` tokens of a split are predicted exactly once each, whatever the batch size ``B`` and
chunk length ``T``: the prediction sequence (inputs ``<eos>, x_1 .. x_{N-1}``, targets
``x_1 .. x_N``) is cut into ``B`` contiguous streams whose lengths differ by at most one, the
streams are laid side by side and cut into chunks of ``T`` positions, and the ragged ends are
padded and masked. Nothing is trimmed.

With ``B = 1`` (the papers' test protocol) every prediction sees the whole preceding text; with
``B > 1`` each stream after the first starts without the text before it.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from harness.plugin import Chunk


def stream_bounds(num_tokens: int, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Starts and lengths (int64 ``[B]``) of ``B`` contiguous streams covering ``N`` positions;
    lengths differ by at most one, longest first."""
    if batch_size < 1:
        raise ValueError(f"batch size must be >= 1, got {batch_size}")
    base, extra = divmod(num_tokens, batch_size)
    lengths = np.full(batch_size, base, dtype=np.int64)
    lengths[:extra] += 1
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    return starts, lengths


@dataclasses.dataclass(frozen=True)
class StreamGrid:
    """A split laid out as ``B`` contiguous streams side by side (``W`` = longest stream).

    Attributes:
        starts: int64 ``[B]``, index of each stream's first prediction in the split.
        inputs, targets: int64 ``[B, W]``; padding holds ``<eos>``.
        mask: bool ``[B, W]``, true at real predictions.
    """

    starts: np.ndarray
    inputs: np.ndarray
    targets: np.ndarray
    mask: np.ndarray

    def chunks(self, bptt: int) -> list[Block]:
        """The grid cut into chunks of ``T = bptt`` columns of all the streams, in order (views
        ``[B, T]`` of the grid's arrays; the last chunk may be narrower; no
        ``distribution_mask``)."""
        if bptt < 1:
            raise ValueError(f"bptt must be >= 1, got {bptt}")
        every_row = slice(0, self.mask.shape[0])
        return [self._block(every_row, begin, begin + bptt) for begin in range(0, self.mask.shape[1], bptt)]

    def streams(self) -> list[Block]:
        """Each stream whole, in order: blocks of one row (``[1, L]``, its real positions only)."""
        lengths = self.mask.sum(axis=1)
        return [self._block(slice(row, row + 1), 0, int(length)) for row, length in enumerate(lengths)]

    def _block(self, rows: slice, begin: int, end: int) -> Block:
        columns = slice(begin, end)
        chunk = Chunk(self.inputs[rows, columns], self.targets[rows, columns], self.mask[rows, columns])
        return Block(rows, begin, chunk)


@dataclasses.dataclass(frozen=True)
class Block:
    """A piece of a :class:`StreamGrid` scored in one call: the rows ``rows`` from column
    ``begin``, as a :class:`Chunk` (views ``[b, t]`` of the grid's arrays)."""

    rows: slice
    begin: int
    chunk: Chunk

    @property
    def columns(self) -> slice:
        return slice(self.begin, self.begin + self.chunk.mask.shape[1])

    @property
    def place(self) -> tuple[slice, slice]:
        """Index of the block in a ``[B, W]`` array laid out like the grid."""
        return self.rows, self.columns


def stream_grid(
    ids: np.ndarray, *, eos_id: int, batch_size: int = 1, bounds: tuple[np.ndarray, np.ndarray] | None = None
) -> StreamGrid:
    """Lay out the predictions of ``ids`` (int64 ``[N]``, inputs ``<eos>, x_1 .. x_{N-1}``) as
    ``batch_size`` even streams (:func:`stream_bounds`), or as the streams of ``bounds`` (starts
    and lengths, int64 ``[B]`` each, contiguous from 0 to ``N``: the documents of a split), each
    from the input ``<eos>``, as a split starts, whatever token precedes it."""
    num_tokens = len(ids)
    if num_tokens == 0:
        raise ValueError("nothing to evaluate: the token stream is empty")
    starts, lengths = stream_bounds(num_tokens, batch_size) if bounds is None else bounds
    offsets = np.arange(int(lengths.max()))
    mask = offsets[None, :] < lengths[:, None]
    positions = np.where(mask, starts[:, None] + offsets[None, :], 0)
    inputs = np.concatenate([[eos_id], ids[:-1]]).astype(np.int64)[positions]
    targets = np.asarray(ids, dtype=np.int64)[positions]
    inputs[~mask] = eos_id
    targets[~mask] = eos_id
    if bounds is not None:
        inputs[:, 0] = eos_id  # each document from <eos>, as a split starts
    return StreamGrid(starts, inputs, targets, mask)
