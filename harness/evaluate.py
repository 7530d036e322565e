"""Exact streaming perplexity: every token of a split scored once, and audited.

The split is laid out as ``B`` contiguous streams (or, under the documents protocol, one stream
per article, in batches of articles of similar lengths, each from a reset of its own, so that the
padding stays below the tokens) cut into chunks of ``T`` positions (:mod:`harness.streams`), each
chunk scored by the plugin (each stream whole, for a model with ``score_stream``) and checked, and
the ``N`` log-probabilities summed in float64.

Two audits guard the number: the probability audit (full distributions at a few positions sum to
1 and agree with the reported target scores), here, and the causality audit (no log-probability
depends on the token it predicts or on a later one), a second pass that the plugin cannot tell
from the evaluation: :func:`_causality_pass` runs it, :mod:`harness.causality` draws its
substitutions and checks the two passes. Each pass scores with the model that
:class:`harness.passes.ModelPasses` opens for it: under ``harness eval``, a plugin loaded in a
fresh worker process (:mod:`harness.worker`), which never sees this process nor the plan.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import secrets
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
from tqdm import tqdm

from harness.causality import (
    CAUSALITY_OFF,
    AuditedStreams,
    AuditPlan,
    CausalityAudit,
    PassScores,
    check_audit,
    most_substitutions,
    plan_audit,
)
from harness.documents import document_batches
from harness.passes import CallFailed, ModelPasses, passes_of, scores_on_accelerator
from harness.plugin import (
    Chunk,
    ChunkScores,
    Model,
    ModelUnavailable,
    PluginError,
    plugin_metadata,
    scores_whole_streams,
)
from harness.protocol import DEFAULT_PROTOCOL, EvaluationProtocol
from harness.streams import Block, StreamGrid, stream_grid
from harness.substitutes import SubstituteModel
from wikitext_toolkit_core.audit_defaults import default_substitutions
from wikitext_toolkit_core.cli import UsageError
from wikitext_toolkit_core.files import DatasetError
from wikitext_toolkit_core.progress import progress_bar
from wikitext_toolkit_core.result_schema import MAX_LOG_PROB

#: Largest mean negative log-likelihood (nats per token) whose perplexity, ``e^nll``, is a finite
#: float (about 709.78).
MAX_NLL = math.log(sys.float_info.max)
#: Tolerance of the audit: |sum of probabilities - 1| and |log p(target) - reported|.
AUDIT_TOLERANCE = 1e-4


@dataclasses.dataclass(frozen=True)
class Audit:
    """What the probability audit checked.

    Attributes:
        requested: positions at which the full distribution was asked for.
        checked: positions whose distribution was checked (0 when the model gives none).
        max_sum_error: largest ``|sum_w p(w) - 1|`` seen.
        max_target_error: largest ``|log p(target) from the distribution - reported|`` seen.
    """

    requested: int
    checked: int
    max_sum_error: float
    max_target_error: float

    @property
    def passed(self) -> bool:
        """Whether at least one distribution was checked (a failed check raises instead)."""
        return self.checked > 0

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "passed": self.passed}


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """Result of scoring one token stream.

    Attributes:
        tokens: predictions counted (``N``).
        total_log_prob: float64 sum of the ``N`` target log-probabilities (nats).
        seconds: wall-clock time of the scoring loop (the causality audit not included).
        audit: the probability audit.
        token_log_probs: float64 ``[N]``, the target log-probabilities in stream order.
        causality: the causality audit.
        metadata: what the model's optional ``result_metadata()`` returned right after the
            evaluation's pass (:func:`harness.plugin.plugin_metadata`; None without one).
        plugin_process: where the plugin scored the passes (:class:`harness.passes.ModelPasses`):
            ``worker`` (each pass in a fresh worker process) or ``harness`` (in this process).
    """

    tokens: int
    total_log_prob: float
    seconds: float
    audit: Audit
    token_log_probs: np.ndarray
    causality: CausalityAudit = CAUSALITY_OFF
    metadata: dict[str, Any] | None = None
    plugin_process: str = "harness"

    @property
    def nll(self) -> float:
        """Mean negative log-likelihood, nats per token."""
        return -self.total_log_prob / self.tokens

    @property
    def perplexity(self) -> float:
        return math.exp(self.nll)

    @property
    def bits_per_token(self) -> float:
        return self.nll / math.log(2)


def _as_float64(values: Any, what: str) -> np.ndarray:
    """``values`` (an array-like or a torch tensor on any device) as a float64 array; a
    :class:`PluginError` for anything that is not real numbers (complex ones included, whose
    imaginary part a conversion would silently drop)."""
    if hasattr(values, "detach"):  # a torch tensor, on any device
        if getattr(values, "is_meta", False):
            raise PluginError(f"{what} is a tensor on the meta device, which holds no values")
        if values.is_complex():
            raise PluginError(f"{what} is a complex tensor ({values.dtype}), not real log-probabilities")
        values = values.detach().to("cpu").double().numpy()
    try:
        array = np.asarray(values)
        if np.iscomplexobj(array):
            raise PluginError(f"{what} is a complex array ({array.dtype}), not real log-probabilities")
        return array.astype(np.float64, copy=False)
    except (TypeError, ValueError):
        raise PluginError(f"{what} is a {type(values).__name__}, not an array of floats") from None


@contextlib.contextmanager
def _naming_the_plugin(name: str, call: str) -> Iterator[None]:
    """Around a call into the plugin: when it raises (anything but a one-line user error of its
    own), a line on stderr names the plugin and ``call`` (the call and the tokens it was given)
    before the traceback goes on up. A call into a worker process that failed
    (:class:`harness.passes.CallFailed`) is one line naming the call, after that line and the
    worker's traceback when the plugin raised."""
    try:
        yield
    except CallFailed as failure:
        if failure.traceback is not None:
            tqdm.write(f"{name}: {call} raised an exception (traceback below)", file=sys.stderr)
            tqdm.write(failure.traceback.rstrip("\n"), file=sys.stderr)
        raise PluginError(f"{name}: {call} {failure.reason}") from None
    except (PluginError, ModelUnavailable, DatasetError):
        raise
    except SystemExit as exit:  # else the evaluation would end with the plugin's status and no result
        raise PluginError(
            f"{name}: {call} called sys.exit({exit.code!r}); a plugin returns its scores or raises"
        ) from None
    except Exception:
        tqdm.write(f"{name}: {call} raised an exception (traceback below)", file=sys.stderr)
        raise


@dataclasses.dataclass(frozen=True)
class _Place:
    """Where a block of a stream grid lies in the split, for messages.

    Attributes:
        starts: int64 ``[B]``, each stream's first token in the split.
        block: the block.
    """

    starts: np.ndarray
    block: Block

    def span(self) -> str:
        """The block's tokens: ``tokens a..b`` for one stream, else its columns and streams."""
        begin, end = self.block.begin, self.block.columns.stop
        starts = self.starts[self.block.rows]
        if len(starts) == 1:
            return f"tokens {int(starts[0]) + begin}..{int(starts[0]) + end - 1}"
        firsts = ", ".join(str(int(start) + begin) for start in starts[:3])
        return f"positions {begin}..{end - 1} of {len(starts)} streams (starting at tokens {firsts}" + (
            ", ...)" if len(starts) > 3 else ")"
        )

    def position(self, row: int, column: int) -> str:
        """``token t (stream s, position p)`` of ``[row, column]`` of the block."""
        stream, position = self.block.rows.start + row, self.block.begin + column
        return f"token {int(self.starts[stream]) + position} (stream {stream}, position {position})"


def _log_sum_exp(rows: np.ndarray) -> np.ndarray:
    peak = rows.max(axis=1, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    return (peak + np.log(np.exp(rows - peak).sum(axis=1, keepdims=True)))[:, 0]


def _validated_scores(
    scores: object,
    mask: np.ndarray,
    distribution_mask: np.ndarray | None,
    *,
    vocab_size: int,
    place: _Place,
    name: str,
    method: str,
) -> tuple[np.ndarray, np.ndarray | None]:
    """What a plugin's ``score()`` or ``score_stream()`` (``method``) returned for a block, checked:
    a :class:`ChunkScores` whose target log-probabilities are real numbers, shaped like the
    block's ``mask`` (bool ``[B, T]``) and finite and not positive where it is true; and whose
    distributions, when asked for (at the ``K`` positions of ``distribution_mask``, bool
    ``[B, T]``; None: none asked for) and given, are real numbers shaped ``[K, V]`` with no NaN
    or +inf.

    Returns the target log-probabilities (float64 ``[B, T]``) and the distributions (float64
    ``[K, V]``; None when none were asked for or given). ``place`` places it for messages;
    ``method`` names the plugin's method that returned it.

    Raises:
        PluginError: one line naming the plugin and what is wrong.
    """
    if not isinstance(scores, ChunkScores):
        raise PluginError(f"{name}: {not_chunk_scores(scores, method)}")
    log_probs = _as_float64(scores.target_log_probs, f"{name}: target_log_probs")
    problem = target_shape_problem(log_probs.shape, mask.shape)
    if problem:
        raise PluginError(f"{name}: {problem}")
    _check_log_probs(log_probs, mask, place, name)
    if distribution_mask is None or scores.distributions is None:
        return log_probs, None
    rows = _as_float64(scores.distributions, f"{name}: distributions")
    problem = distribution_shape_problem(rows.shape, (int(distribution_mask.sum()), vocab_size))
    if problem:
        raise PluginError(f"{name}: {problem}")
    if np.isnan(rows).any() or np.isposinf(rows).any():
        raise PluginError(f"{name}: a full distribution contains NaN or +inf")
    return log_probs, rows


def not_chunk_scores(scores: object, method: str) -> str:
    """The message for ``scores``, what the plugin's ``method`` (``score`` or ``score_stream``)
    returned, when it is no :class:`ChunkScores`."""
    return f"{method}() returned {type(scores).__name__}, not harness.ChunkScores"


def target_shape_problem(shape: tuple[int, ...], expected: tuple[int, ...]) -> str | None:
    """Why target log-probabilities of ``shape`` do not fit a block of ``expected`` ``(B, T)``,
    for a message; None when they do."""
    if shape == expected:
        return None
    return f"target_log_probs has shape {shape}, expected {expected} (batch, positions)"


def distribution_shape_problem(shape: tuple[int, ...], expected: tuple[int, int]) -> str | None:
    """Why full distributions of ``shape`` do not fit the ``expected`` ``(K, V)`` (requested
    positions, vocabulary), for a message; None when they do."""
    if shape == expected:
        return None
    hint = ""
    if len(shape) == 2 and shape[0] == expected[0]:
        hint = (
            f": a distribution over {shape[1]:,} words, where the dataset's vocabulary has "
            f"{expected[1]:,} (a model of another vocabulary?)"
        )
    return f"distributions has shape {shape}, expected {expected} (requested positions, vocabulary){hint}"


def _check_log_probs(log_probs: np.ndarray, mask: np.ndarray, place: _Place, name: str) -> None:
    """Raise :class:`PluginError` at the first real position (``mask``, bool ``[B, T]``) whose
    log-probability (``log_probs``, float64 ``[B, T]``) is NaN, infinite or positive."""
    bad = mask & ~(np.isfinite(log_probs) & (log_probs <= MAX_LOG_PROB))
    if bad.any():
        row, column = (int(i) for i in np.argwhere(bad)[0])
        value = log_probs[row, column]
        what = "a positive log-probability" if value > 0 else "an invalid log-probability"
        hint = ""
        if np.all((log_probs[mask] >= 0) & (log_probs[mask] <= 1)):
            hint = "; all of the chunk's lie in [0, 1]: probabilities rather than their logarithms?"
        raise PluginError(f"{name}: {what} ({value}) for {place.position(row, column)}{hint}")


def evaluate(
    model: Model | ModelPasses,
    ids: np.ndarray,
    *,
    eos_id: int,
    vocab_size: int,
    protocol: EvaluationProtocol = DEFAULT_PROTOCOL,
    documents: tuple[np.ndarray, np.ndarray] | None = None,
    name: str = "model",
    progress: bool = True,
) -> Evaluation:
    """Score every token of ``ids`` (integer ``[N]``) with ``model`` under ``protocol``, and
    audit it; the result holds the ``N`` log-probabilities in stream order.

    ``model`` is a model object, which scores every pass, or :class:`harness.passes.ModelPasses`,
    which opens the model for each pass (:class:`harness.worker.WorkerPlugin`: a fresh worker
    process for each). A model with ``score_stream`` gets each stream whole; any other is fed
    chunks of ``protocol.bptt`` positions of all the streams (:mod:`harness.plugin`).

    Args:
        eos_id: id of ``<eos>``, the implicit input before the first token.
        vocab_size: ``V``, the width the audited distributions must have.
        protocol: the streams, chunks and audits, the causality audit's seed included
            (:class:`harness.protocol.EvaluationProtocol`).
        documents: with the ``documents`` protocol, the documents' starts and lengths (int64
            ``[D]`` each, :class:`harness.documents.Documents`): one stream each, scored in
            batches of similar lengths (:func:`harness.documents.document_batches`), each from a
            ``reset`` of its own.
        name: the plugin's name, for error messages.
        progress: show progress on stderr (a bar on a terminal, else a line a minute:
            ``wikitext_toolkit_core.progress``).

    Raises:
        PluginError: the model returned the wrong shape, a NaN/inf or positive log-probability,
            or a distribution that is unnormalized or disagrees with the reported target score;
            or it failed the causality audit; or its mean negative log-likelihood is above
            :data:`MAX_NLL`, where the perplexity overflows, or below 0 (log-probabilities
            within :data:`MAX_LOG_PROB` above 0 everywhere: no perplexity is below 1).
    """
    if protocol.bptt < 1:
        raise ValueError(f"bptt must be >= 1, got {protocol.bptt}")
    if protocol.batch_size > len(ids):  # else streams of no tokens, and arrays of B before any score
        raise UsageError(
            f"batch size {protocol.batch_size:,} is more streams than the {len(ids):,} tokens to score: "
            f"at most {len(ids):,} (--batch-size)"
        )
    if (documents is None) != (protocol.name == "stream"):
        raise ValueError(
            f"the {protocol.name} protocol {'takes' if documents is None else 'takes no'} documents"
        )
    grids = _grids(ids, eos_id, protocol.batch_size, documents)
    seed = secrets.randbits(63) if protocol.causality_seed is None else protocol.causality_seed
    audited = _audit_masks(grids, len(ids), protocol.audit_positions, np.random.default_rng([seed, 1]))
    plans = _causality_plans(grids, ids, eos_id, vocab_size, protocol.causality_points, seed)
    scoring = _Scoring(
        passes_of(model),
        sections=tuple(_Section(grid, mask, plan) for grid, mask, plan in zip(grids, audited, plans)),
        bptt=protocol.bptt,
        vocab_size=vocab_size,
        name=name,
        progress=progress,
    )
    tally = _Tally()
    evaluation_pass, metadata, causality = _scored_passes(scoring, tally, protocol.causality_tolerance)
    _check_nll(-tally.total_log_prob / tally.tokens, name)
    return Evaluation(
        tokens=tally.tokens,
        total_log_prob=tally.total_log_prob,
        seconds=sum(scores.seconds for scores in evaluation_pass),
        audit=Audit(tally.requested, tally.checked, tally.max_sum_error, tally.max_target_error),
        causality=causality,
        token_log_probs=_in_split_order(grids, evaluation_pass, len(ids)),
        metadata=metadata,
        plugin_process=scoring.passes.plugin_process,
    )


def _grids(
    ids: np.ndarray, eos_id: int, batch_size: int, documents: tuple[np.ndarray, np.ndarray] | None
) -> list[StreamGrid]:
    """The split ``ids`` laid out as ``batch_size`` streams, one grid; or, with ``documents``
    (starts and lengths), as one stream per document in the grids of
    :func:`harness.documents.document_batches`, each padded to its own longest document."""
    if documents is None:
        return [stream_grid(ids, eos_id=eos_id, batch_size=batch_size)]
    starts, lengths = documents
    return [
        stream_grid(ids, eos_id=eos_id, bounds=(starts[batch], lengths[batch]))
        for batch in document_batches(lengths)
    ]


def _in_split_order(grids: list[StreamGrid], passes: list[PassScores], num_tokens: int) -> np.ndarray:
    """The log-probabilities of a pass over ``grids`` (one :class:`PassScores` each) as float64
    ``[N]``, each at its token's place in the split."""
    log_probs = np.empty(num_tokens)
    for grid, scores in zip(grids, passes):
        rows, columns = np.nonzero(grid.mask)
        log_probs[grid.starts[rows] + columns] = scores.log_probs[rows, columns]
    return log_probs


def _check_nll(nll: float, name: str) -> None:
    """Raise :class:`PluginError` for a mean negative log-likelihood ``nll`` whose perplexity is no
    float, or below 1."""
    if nll > MAX_NLL:
        raise PluginError(
            f"{name}: mean negative log-likelihood {nll:.6g} nats per token; its perplexity, e^{nll:.6g}, "
            f"is too large for a float (at most {MAX_NLL:.2f} nats)"
        )
    if nll < 0:
        raise PluginError(
            f"{name}: mean negative log-likelihood {nll:.6g} nats per token, below 0: its "
            "log-probabilities are above 0 on average, so its perplexity would be below 1"
        )


@dataclasses.dataclass(frozen=True)
class _Section:
    """Streams scored side by side from one ``reset``: the split's ``B`` streams, or a batch of
    its documents (:func:`harness.documents.document_batches`), with what the audits ask there.

    Attributes:
        grid: the streams.
        audited: bool ``[B, W]``, like ``grid.mask``, the probability audit's positions
            (:func:`_audit_masks`): only these count in its figures.
        plan: the causality audit of the streams (:func:`_causality_plans`), or None without it.
    """

    grid: StreamGrid
    audited: np.ndarray
    plan: AuditPlan | None

    @functools.cached_property
    def rows_wanted(self) -> np.ndarray:
        """bool ``[B, W]``, where full distributions are asked for in each pass: the audited
        positions and the causality audit's requested ones (its first substitutions and decoys),
        asked for in both passes, so that a request tells the plugin nothing."""
        return self.audited if self.plan is None else self.audited | self.plan.requested

    @property
    def rows_kept(self) -> np.ndarray | None:
        """bool ``[B, W]``, where the distributions are kept for the causality audit's check 1
        (its ``compared`` positions), or None without that audit."""
        return None if self.plan is None else self.plan.compared


@dataclasses.dataclass(frozen=True)
class _Scoring:
    """What the passes of one :func:`evaluate` share: the model, the sections each pass scores in
    order, how their grids are chunked and where full distributions are asked for.

    Attributes:
        passes: opens the plugin's model for each pass; ``name``: its name, for messages.
        sections: the streams, in the order they are scored, each from a ``reset`` of a chunk
            model (a whole-stream model is reset once for all of them).
        bptt, vocab_size, progress: as given to :func:`evaluate`.
    """

    passes: ModelPasses
    sections: tuple[_Section, ...]
    bptt: int
    vocab_size: int
    name: str
    progress: bool

    @property
    def audited_positions(self) -> int:
        """The probability audit's positions in all the sections."""
        return sum(int(section.audited.sum()) for section in self.sections)


def _causality_plans(
    grids: list[StreamGrid], ids: np.ndarray, eos_id: int, vocab_size: int, points: int, seed: int
) -> list[AuditPlan | None]:
    """The causality audit of each of ``grids`` (:func:`harness.causality.plan_audit`: the
    ``points`` substitutions shared among them by :func:`_shared_points`, drawn from ``seed``
    (plus the grid's index), their tokens from a trigram model of the split ``ids``, integer
    ``[N]``); None for each when it is off (``points`` 0, or a vocabulary of one word, where
    nothing can be substituted)."""
    if points <= 0 or vocab_size <= 1:
        return [None] * len(grids)
    substitutes = SubstituteModel(ids, vocab_size=vocab_size, eos_id=eos_id)
    shares = _shared_points([int(grid.mask.sum()) for grid in grids], points)
    return [
        plan_audit(
            grid.inputs,
            grid.targets,
            grid.mask,
            substitutes=substitutes,
            eos_id=eos_id,
            points=share,
            seed=seed + index,
        )
        for index, (grid, share) in enumerate(zip(grids, shares))
    ]


def _shared_points(sizes: list[int], points: int) -> list[int]:
    """The causality audit's ``points`` substitutions shared among sections of ``sizes`` positions:
    as many as the leaderboard asks of the split (:func:`default_substitutions` of their
    positions, or fewer where ``points`` says), in proportion to the sizes, the largest
    remainders rounded up, and none beyond what :func:`harness.causality.plan_audit` takes of a
    section (:func:`harness.causality.most_substitutions`)."""
    total = min(points, default_substitutions(sum(sizes)))
    if len(sizes) == 1:
        return [total]
    exact = [total * size / sum(sizes) for size in sizes]
    shares = [int(value) for value in exact]  # within each section's most, as total is within all's
    for index in sorted(range(len(sizes)), key=lambda index: shares[index] - exact[index]):
        if sum(shares) < total and shares[index] < most_substitutions(sizes[index]):
            shares[index] += 1
    return shares


def _scored_passes(
    scoring: _Scoring, tally: _Tally, tolerance: float | None
) -> tuple[list[PassScores], dict[str, Any] | None, CausalityAudit]:
    """The evaluation's pass over the sections, adding to ``tally``, and with the causality audit
    its pass, before or after it as the first section's plan drew, and the audit's checks
    (``tolerance``: as :func:`evaluate`'s ``causality_tolerance``). Returns the evaluation's
    scores (one :class:`PassScores` per section), the model's metadata right after its pass, and
    the causality audit's record."""
    plan = scoring.sections[0].plan
    if plan is not None and plan.audit_first:
        audit_pass = _causality_pass(scoring)
    with scoring.passes.open_pass(scoring.name) as model:
        grids = [section.grid for section in scoring.sections]
        evaluation_pass = _score_pass(scoring, model, grids, tally, audit=False)
        metadata = _pass_metadata(scoring, model)  # now: the audit's pass may follow
    if plan is None:
        return evaluation_pass, metadata, CAUSALITY_OFF
    if not plan.audit_first:
        audit_pass = _causality_pass(scoring)
    return evaluation_pass, metadata, _checked_causality(scoring, evaluation_pass, audit_pass, tolerance)


def _causality_pass(scoring: _Scoring) -> list[PassScores]:
    """The causality audit's pass: the evaluation's grids with the plans' substituted tokens,
    scored as the evaluation is (from the same resets, the same chunks, distributions asked for
    at the same positions) into a tally of its own, which counts for nothing."""
    grids = [
        dataclasses.replace(section.grid, inputs=section.plan.inputs, targets=section.plan.targets)
        for section in scoring.sections
        if section.plan is not None
    ]
    with scoring.passes.open_pass(scoring.name) as model:
        audit_pass = _score_pass(scoring, model, grids, _Tally(), audit=True)
        _pass_metadata(scoring, model)  # asked, as of the evaluation's pass, and not recorded
    return audit_pass


def _checked_causality(
    scoring: _Scoring,
    evaluation_pass: list[PassScores],
    audit_pass: list[PassScores],
    tolerance: float | None,
) -> CausalityAudit:
    """The causality audit's checks (:func:`harness.causality.check_audit`) of the sections
    audited, and its record."""
    audited = [
        AuditedStreams(section.plan, evaluation, audit, section.grid.starts)
        for section, evaluation, audit in zip(scoring.sections, evaluation_pass, audit_pass)
        if section.plan is not None
    ]
    return check_audit(audited, tolerance=tolerance, name=scoring.name)


def _pass_metadata(scoring: _Scoring, model: Model) -> dict[str, Any] | None:
    """``model``'s metadata right after a pass (:func:`harness.plugin.plugin_metadata`). Both
    passes are asked for it, so that the call does not tell a plugin which pass it scored (a
    worker of the next pass could learn it from the last one's)."""
    with _naming_the_plugin(scoring.name, "result_metadata()"):
        return plugin_metadata(model, scoring.name)


@dataclasses.dataclass
class _Tally:
    """What a pass of :func:`evaluate` has added up so far.

    Attributes:
        total_log_prob, tokens: the sum of the log-probabilities scored, and their number.
        requested, checked, max_sum_error, max_target_error: the probability audit's figures
            (see :class:`Audit`).
        gives_distributions: False once the model gave no distributions where asked: none is
            asked for again in the pass.
    """

    total_log_prob: float = 0.0
    tokens: int = 0
    requested: int = 0
    checked: int = 0
    max_sum_error: float = 0.0
    max_target_error: float = 0.0
    gives_distributions: bool = True


def _score_pass(
    scoring: _Scoring, model: Model, grids: list[StreamGrid], tally: _Tally, *, audit: bool
) -> list[PassScores]:
    """Score every position of ``grids`` (the sections', or the audit's versions of them) with
    ``model`` (the pass's: :meth:`ModelPasses.open_pass`), section by section, adding to ``tally``;
    returns each section's scores. ``audit`` names the causality audit's pass in the progress bar
    and messages. A chunk model is reset for each section (``reset(B)``, its streams); a model
    that scores whole streams, once for all of them, when it has ``reset``."""
    method = "score_stream" if scores_whole_streams(model) else "score"
    what = " in the causality audit" if audit else ""
    streams = [len(grid.starts) for grid in grids]
    if method == "score_stream":  # reset once, if it has reset, for all its streams
        streams = [sum(streams)] + [0] * (len(grids) - 1)
    reset = getattr(model, "reset", None)
    desc = f"{scoring.name} causality audit" if audit else scoring.name
    total = sum(int(grid.mask.sum()) for grid in grids)
    scores = []
    with progress_bar(total=total, unit="tok", desc=desc, show=scoring.progress, unit_scale=True) as bar:
        for section, grid, batch_size in zip(scoring.sections, grids, streams):
            if callable(reset) and batch_size:  # a chunk model's always
                with _naming_the_plugin(scoring.name, f"reset({batch_size}){what}"):
                    reset(batch_size)
            scores.append(_score_section(scoring, model, section, grid, tally, bar, method, what))
    return scores


def _score_section(
    scoring: _Scoring,
    model: Model,
    section: _Section,
    grid: StreamGrid,
    tally: _Tally,
    bar: Any,
    method: str,
    what: str,
) -> PassScores:
    """Score ``grid`` (``section``'s, or the audit's version of it) with ``model``'s ``method``:
    ``score``, chunk by chunk, or ``score_stream``, stream by stream, adding to ``tally`` and
    ``bar`` (the pass's progress) and auditing the distributions asked for
    (``section.rows_wanted``, while the model gives them), and keep those at ``section.rows_kept``."""
    log_probs = np.zeros(grid.mask.shape)
    kept: dict[tuple[int, int], np.ndarray] = {}
    on_accelerator = False
    began = time.perf_counter()
    for block in grid.streams() if method == "score_stream" else grid.chunks(scoring.bptt):
        scores = _score_block(scoring, model, block, section, tally, method, what)
        log_probs[block.place] = scores.log_probs
        on_accelerator |= scores.on_accelerator
        if section.rows_kept is not None and scores.rows is not None:
            for (row, column), values in zip(np.argwhere(scores.requested), scores.rows):
                if section.rows_kept[block.rows.start + row, block.begin + column]:
                    kept[block.rows.start + int(row), block.begin + int(column)] = values
        bar.update(int(block.chunk.mask.sum()))
    rows = _kept_rows(kept, section.rows_kept)
    return PassScores(log_probs, rows, on_accelerator, time.perf_counter() - began)


def _kept_rows(kept: dict[tuple[int, int], np.ndarray], rows_kept: np.ndarray | None) -> np.ndarray | None:
    """The distributions ``kept`` (by stream and column) at every position of ``rows_kept`` (bool
    ``[B, W]``), stacked in row-major order (float64 ``[K, V]``); None when there are none to keep
    or the model did not give them all."""
    wanted = [] if rows_kept is None else [(int(b), int(j)) for b, j in np.argwhere(rows_kept)]
    return np.stack([kept[key] for key in wanted]) if wanted and all(key in kept for key in wanted) else None


def _audit_masks(
    grids: list[StreamGrid], num_tokens: int, audit_positions: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """Where (bool ``[B, W]`` for each of ``grids``, like its ``mask``) the probability audit asks
    for the full distribution: ``audit_positions`` of the split's ``num_tokens`` predictions
    drawn with ``rng`` (none when 0), seeded from the evaluation's secret seed, so that no position
    is known in advance."""
    chosen = np.zeros(0, dtype=np.int64)
    if audit_positions > 0:
        chosen = rng.choice(num_tokens, min(audit_positions, num_tokens), replace=False)
    masks = []
    for grid in grids:
        mask = np.zeros_like(grid.mask)
        stream = np.searchsorted(grid.starts, chosen, side="right") - 1
        column = chosen - grid.starts[stream]
        inside = (stream >= 0) & (column < grid.mask.sum(axis=1)[stream])
        mask[stream[inside], column[inside]] = True
        masks.append(mask)
    return masks


@dataclasses.dataclass(frozen=True)
class _ChunkResult:
    """What :func:`_score_block` got for a block: the log-probabilities (float64 ``[B, T]``), the
    positions whose distributions were asked for (bool ``[B, T]``) and the distributions given
    there (float64 ``[K, V]``, or None), and whether the scores came back on an accelerator."""

    log_probs: np.ndarray
    requested: np.ndarray
    rows: np.ndarray | None
    on_accelerator: bool


def _score_block(
    scoring: _Scoring,
    model: Model,
    block: Block,
    section: _Section,
    tally: _Tally,
    method: str,
    what: str,
) -> _ChunkResult:
    """Score ``block`` of ``section``'s grid (or the audit's version of it) with ``model``'s
    ``score`` (a chunk of all the streams) or ``score_stream`` (one whole stream) and add it to
    ``tally``, auditing the distributions asked for where ``section.rows_wanted`` is true while
    the model gives them (``tally.gives_distributions``), counting those of ``section.audited``
    in the tally. ``method``: the model's method to call (``score`` or ``score_stream``);
    ``what`` says which pass it is in messages."""
    name, view = scoring.name, block.chunk
    place = _Place(section.grid.starts, block)
    wanted = section.rows_wanted[block.place] & tally.gives_distributions
    requested = wanted if wanted.any() else None
    # Copies: whatever a plugin does to its chunk cannot reach the harness's arrays.
    chunk = Chunk(
        view.inputs.copy(),
        view.targets.copy(),
        view.mask.copy(),
        requested.copy() if requested is not None else None,
    )
    with _naming_the_plugin(name, f"{method}() on {place.span()}{what}"):
        scores = getattr(model, method)(chunk)
    log_probs, rows = _validated_scores(
        scores,
        view.mask,
        requested,
        vocab_size=scoring.vocab_size,
        place=place,
        name=name,
        method=method,
    )
    result = _ChunkResult(log_probs, wanted, rows, scores_on_accelerator(scores))
    tally.total_log_prob += float(log_probs[view.mask].sum())
    tally.tokens += int(view.mask.sum())
    if requested is None:
        return result
    counted = int((requested & section.audited[block.place]).sum())
    if rows is None:  # the model gives no distributions: every audited position counts as asked
        tally.requested = scoring.audited_positions  # for in vain, and none is asked for again
        tally.gives_distributions = False
        return result
    tally.requested += counted
    sum_error, target_error = _probability_audit(rows, requested, log_probs, view.targets, name, place=place)
    tally.checked += counted
    tally.max_sum_error = max(tally.max_sum_error, sum_error)
    tally.max_target_error = max(tally.max_target_error, target_error)
    return result


def _normalization_hint(rows: np.ndarray) -> str:
    """The likely mistake behind unnormalized distributions ``rows`` (float64 ``[K, V]`` of
    log-probabilities), for the audit's message; empty when none is recognised."""
    if np.all((rows >= 0) & (rows <= 1)) and np.allclose(rows.sum(axis=1), 1.0, atol=AUDIT_TOLERANCE):
        return "; each row sums to 1 as it is: probabilities rather than their logarithms?"
    if len(rows) > 1 and np.allclose(np.exp(rows).sum(axis=0), 1.0, atol=AUDIT_TOLERANCE):
        return "; each word's probabilities sum to 1 across the positions: a softmax over the wrong axis?"
    return ""


def _probability_audit(
    rows: np.ndarray,
    wanted: np.ndarray,
    log_probs: np.ndarray,
    targets: np.ndarray,
    name: str,
    *,
    place: _Place,
) -> tuple[float, float]:
    """Check the distributions ``rows`` (float64 ``[K, V]``, from :func:`_validated_scores`)
    asked for at the ``K`` positions of ``wanted`` (bool ``[b, t]``, the block at ``place``):
    each sums to 1 and gives its target
    (``targets``, int64 ``[B, T]``) the reported log-probability (``log_probs``, float64
    ``[B, T]``), within :data:`AUDIT_TOLERANCE`. Returns the largest errors of each."""
    sums = np.exp(_log_sum_exp(rows))
    sum_errors = np.abs(sums - 1.0)
    where = np.nonzero(wanted)
    if sum_errors.max() > AUDIT_TOLERANCE:
        worst = int(sum_errors.argmax())
        raise PluginError(
            f"{name}: unnormalized distribution at {place.position(where[0][worst], where[1][worst])}: "
            f"probabilities sum to {sums[worst]:.6g}, not 1 (tolerance {AUDIT_TOLERANCE})"
            f"{_normalization_hint(rows)}"
        )
    from_rows = rows[np.arange(len(rows)), targets[where]]
    target_errors = np.abs(from_rows - log_probs[where])
    if target_errors.max() > AUDIT_TOLERANCE:
        worst = int(target_errors.argmax())
        raise PluginError(
            f"{name}: reported log p(target) = {log_probs[where][worst]:.6g} but its "
            f"full distribution gives {from_rows[worst]:.6g}"
        )
    return float(sum_errors.max()), float(target_errors.max())
