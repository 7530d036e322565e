"""Sliding windows: a subword sequence scored by a causal LM in windows of fixed length.

Positions are ``x_0`` (BOS) and ``x_p`` (subword ``p``, ``1 <= p <= M``). The first window reads
from ``x_0`` and scores ``s_1 .. s_max_context``; window ``j >= 1`` reads from ``x_{j*stride}``
and scores the next ``stride`` subwords, so every subword sees at least ``max_context - stride +
1`` earlier positions and never a later one, and where its context starts depends only on its
index, never on the text's length. Windows run ``window_batch`` at a time, always
``max_context`` long (the last one padded on the right, which a causal model ignores).

With ``full_last_window`` (lm-evaluation-harness's rolling windows, for ``detokenizer=lm-eval``)
the last window, when it is not the first, reads the ``max_context`` positions before the text's
last subword instead: its subwords see more context, and where it starts depends on the text's
length.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import numpy as np
import torch

#: A window: ``(input_start, first_target, end_target)``; it reads ``x[input_start :
#: end_target - 1]`` and scores the targets ``first_target .. end_target - 1``.
Window = tuple[int, int, int]


@dataclasses.dataclass(frozen=True)
class WindowSettings:
    """How a subword sequence is cut into windows (module docstring)."""

    max_context: int
    stride: int
    window_batch: int
    full_last_window: bool = False

    def plan(self, num_subwords: int) -> list[Window]:
        """The windows over positions ``0 .. M`` (``M = num_subwords``), in order."""
        plan = []
        first, end = 1, min(self.max_context, num_subwords) + 1
        start = 0
        while first < end:
            plan.append((start, first, end))
            start += self.stride
            first, end = end, min(start + self.max_context, num_subwords) + 1
        if self.full_last_window and len(plan) > 1:
            _, first, end = plan[-1]
            plan[-1] = (end - 1 - self.max_context, first, end)
        return plan

    def groups(self, num_subwords: int) -> list[list[Window]]:
        """The windows of :meth:`plan` in the batches they run in: up to ``window_batch``
        consecutive windows that need the same number of logits."""
        groups: list[list[Window]] = []
        for window in self.plan(num_subwords):
            if (
                groups
                and len(groups[-1]) < self.window_batch
                and self.logits_needed(groups[-1][0]) == self.logits_needed(window)
            ):
                groups[-1].append(window)
            else:
                groups.append([window])
        return groups

    def logits_needed(self, window: Window) -> int:
        """Logits kept for a window: all ``max_context`` for the first, ``stride`` for the
        others (fixed, so that the computation never depends on the text's length)."""
        return self.max_context if window[0] == 0 else self.stride


class WindowScorer:
    """A causal LM (``network``, a ``transformers`` model on ``device``) scoring subword
    sequences in the windows of ``settings``, each from the start token ``bos_id``."""

    def __init__(self, network: Any, settings: WindowSettings, *, bos_id: int, device: str) -> None:
        self.network = network
        self.settings = settings
        self.bos_id = bos_id
        self.device = device
        self._takes_logits_to_keep = "logits_to_keep" in inspect.signature(network.forward).parameters

    def score(self, subword_ids: np.ndarray) -> np.ndarray:
        """float64 ``[M]``: ``log p(s_p | x_a .. x_{p-1})`` of each subword (int ``[M]``)."""
        max_context = self.settings.max_context
        positions = np.concatenate([[self.bos_id], subword_ids]).astype(np.int64)
        padded = np.concatenate([positions, np.full(max_context, self.bos_id, np.int64)])
        scores = np.empty(len(subword_ids))
        with torch.inference_mode():
            for group in self.settings.groups(len(subword_ids)):
                windows = np.stack([padded[start : start + max_context] for start, _, _ in group])
                targets = np.concatenate([np.arange(first, end) for _, first, end in group])
                scores[targets - 1] = self._score_group(group, windows, positions[targets])
        return scores

    def _score_group(self, group: list[Window], windows: np.ndarray, target_ids: np.ndarray) -> np.ndarray:
        """The log-probabilities (float64 ``[K]``) of the ``K`` targets (``target_ids``, int64
        ``[K]``) of a batch of windows (``windows``: int64 ``[windows, max_context]``)."""
        max_context = self.settings.max_context
        keep = self.settings.logits_needed(group[0])
        inputs = torch.from_numpy(windows).to(self.device)
        if self._takes_logits_to_keep:
            logits = self.network(input_ids=inputs, logits_to_keep=keep).logits
        else:
            logits = self.network(input_ids=inputs).logits[:, max_context - keep :]
        logits = logits.float()  # [windows, keep, vocabulary]
        normalizers = torch.logsumexp(logits, dim=-1)  # [windows, keep]
        # Target x_p of a window starting at `start` is predicted at input index p - start - 1,
        # which is kept logit p - start - 1 - (max_context - keep).
        offset = 1 + max_context - keep
        rows = np.concatenate([np.full(end - first, row) for row, (_, first, end) in enumerate(group)])
        kept = np.concatenate([np.arange(first, end) - start - offset for start, first, end in group])
        rows_t, kept_t, ids_t = (torch.from_numpy(a).to(self.device) for a in (rows, kept, target_ids))
        log_probs = logits[rows_t, kept_t, ids_t] - normalizers[rows_t, kept_t]
        return log_probs.double().cpu().numpy()
