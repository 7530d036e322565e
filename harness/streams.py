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

    def chunks(self, bptt: int) -> list[tuple[int, Chunk]]:
        """The grid cut into chunks of ``T = bptt`` columns, in order: each chunk's first column
        and its inputs, targets and mask (views ``[B, T]`` of the grid's arrays; the last chunk
        may be narrower; no ``distribution_mask``)."""
        if bptt < 1:
            raise ValueError(f"bptt must be >= 1, got {bptt}")
        return [
            (
                begin,
                Chunk(
                    self.inputs[:, begin : begin + bptt],
                    self.targets[:, begin : begin + bptt],
                    self.mask[:, begin : begin + bptt],
                ),
            )
            for begin in range(0, self.mask.shape[1], bptt)
        ]


def stream_grid(ids: np.ndarray, *, eos_id: int, batch_size: int) -> StreamGrid:
    """Lay out the predictions of ``ids`` (int64 ``[N]``, inputs ``<eos>, x_1 .. x_{N-1}``)."""
    num_tokens = len(ids)
    if num_tokens == 0:
        raise ValueError("nothing to evaluate: the token stream is empty")
    starts, lengths = stream_bounds(num_tokens, batch_size)
    offsets = np.arange(int(lengths.max()))
    mask = offsets[None, :] < lengths[:, None]
    positions = np.where(mask, starts[:, None] + offsets[None, :], 0)
    inputs = np.concatenate([[eos_id], ids[:-1]]).astype(np.int64)[positions]
    targets = np.asarray(ids, dtype=np.int64)[positions]
    inputs[~mask] = eos_id
    targets[~mask] = eos_id
    return StreamGrid(starts, inputs, targets, mask)
