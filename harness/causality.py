"""The causality audit: a second pass over the split that a plugin cannot tell from the evaluation.

A plugin that reads the token it is scoring (``chunk.targets``, or a later input) gets a figure
far better than any honest model's. An audit that scores short made-up stretches after a reset
can be told apart from the evaluation, and a plugin that cheats only deep in its streams passes
it. So the audit is a whole second pass, with everything the plugin can see as in the
evaluation: ``reset(B)`` with the same ``B``, the same streams from the same starts, the same
chunks of ``T``, to the same depth, and full distributions asked for at the same positions. The
one difference is ``m`` substituted tokens: at ``m`` positions drawn at random the target is
another token, and so is the next input. Each substitute is drawn, given that it is not the real
token, from a trigram model of the split itself (:mod:`harness.substitutes`) given the two tokens
before it in the audit's text, so that it looks like the words that follow there: a plugin that
cheats only where the shown token is plausible (frequent, a likely bigram, among its own top
choices) cheats at the substitutes about as often as at real tokens. Whether the audit pass comes
before or after the evaluation is drawn too, the draws come from a seed drawn afresh for each
evaluation (recorded with the audit), and a plugin named on the command line runs each pass in a
fresh worker process (:mod:`harness.worker`), so a plugin that knows this code still cannot know
which pass counts or where the substitutions are.

Three checks, each exact for an honest model:

1. **Nothing depends on later tokens.** Before its first substitution, each stream of the audit
   pass reads exactly what the evaluation read, so every log-probability there must be the same
   in both passes, and so must the full distribution at the first substitution itself, which may
   not depend on the target it is asked at. Distributions are asked for, in both passes, at the
   first substitutions and at as many decoys per stream drawn by the same law
   (:data:`DECOYS`), beside the probability audit's positions: no requested position marks where
   check 1 stops comparing.
2. **The substituted tokens form one distribution with the real one.** At each stream's first
   substitution ``p`` both passes share the history, so ``p(real) + p(drawn) <= 1``.
3. **Substitutes get no more probability than chance gives them.** Write ``Q`` for the trigram's
   distribution at a substitution, ``r`` for the real token and ``Q_r(c) = Q(c) / (1 - Q(r))``,
   ``c != r``, for the law the substitute ``c`` is drawn from. For any normalized model whose
   distribution ``p`` there does not depend on ``c`` (a causal one: it depends on the history,
   earlier substitutions included, and not on the target), ``X = p(c) / Q_r(c)`` has expectation
   ``sum_{c != r} p(c) = 1 - p(r) <= 1`` given everything before it, whatever ``p`` and ``Q`` are.
   So for each ``lambda`` in ``(0, 1]`` the product of ``1 + lambda (X_i - 1)`` over the
   substitutions (stream by stream, in order) is a nonnegative supermartingale starting at 1, and
   so is the mean of those products over a grid of ``lambda`` (:data:`BETS`): by Ville's
   inequality it ever reaches ``1 / FALSE_ALARM`` with probability at most
   :data:`FALSE_ALARM`. The audit fails when the log of that mean, the *evidence*, exceeds
   ``log(1 / FALSE_ALARM)`` (13.8 nats). No bound on ``X`` and no variance enters: the test is
   exact for any honest model and any draw law. A plugin that adds mass ``w`` to whatever target
   it is shown makes ``X`` about ``w / Q_r(c)`` at each substitution it cheats at, a mean above 1,
   and the evidence then grows about linearly with the substitutions it cheats at (the grid's
   smaller bets take over where an honest model's ``X`` is heavy-tailed).

What it cannot catch: a plugin that holds the split's real text (read from the benchmark's files,
or memorised in training: contamination, which :mod:`harness.contamination` measures), or that
remembers an earlier pass on disk and can tell which of two passes holds the real text; a cheat
too small or too rare to move the evidence past its bound (on a split of a few thousand tokens,
or at a few dozen of the ``m`` substitutions); and reading the context after the target without
the target itself, except where check 1 sees it (each stream's stretch before its first
substitution). Its cost is one more pass over the split.
"""

from __future__ import annotations

import dataclasses
import math
import secrets
from collections.abc import Sequence
from typing import Any

import numpy as np

from harness.plugin import PluginError
from harness.substitutes import SubstituteModel
from wikitext_toolkit_core.audit_defaults import (
    ACCELERATOR_TOLERANCE,
    MAX_SUBSTITUTED_SHARE,
)
from wikitext_toolkit_core.audit_defaults import (
    SUBSTITUTIONS as SUBSTITUTIONS,  # re-exported: the default of --causality-audit
)

#: Probability that an honest model's evidence (check 3) ever exceeds its bound.
FALSE_ALARM = 1e-6
#: The bets ``lambda`` whose wealths check 3 averages.
BETS = tuple(2.0**-k for k in range(1, 9))
#: Decoys per stream: positions drawn as its first substitution is, where distributions are asked
#: for in both passes too.
DECOYS = 3
#: Tolerance of check 2 and of the probability audit alike.
MASS_TOLERANCE = 1e-4


@dataclasses.dataclass(frozen=True)
class CausalityAudit:
    """What the causality audit checked.

    Attributes:
        points: substituted positions (0: the audit was off).
        seed: the seed of the audit's draws (the positions, the tokens, the order of the passes).
        audit_pass: ``"first"`` or ``"second"``: when the audit pass ran, before or after the
            evaluation (``"none"`` when off).
        substitutes: what the substitutes were drawn from (:data:`SUBSTITUTES`; ``"none"`` when
            off).
        compared: ``"targets and distributions"``, or ``"targets"`` for a model that gives no
            distributions (check 1), or ``"none"`` when off.
        compared_positions: positions compared between the passes (check 1).
        max_difference: largest change of a log-probability or distribution entry between them.
        max_pair_mass: largest ``p(real) + p(drawn)`` at a stream's first substitution (check 2).
        evidence: check 3's evidence, in nats (the log of the mean wealth).
        evidence_bound: the largest evidence accepted, ``log(1 / FALSE_ALARM)``.
        tolerance: largest ``max_difference`` accepted.
        seconds: wall-clock time of the audit pass.
    """

    points: int
    seed: int
    audit_pass: str
    substitutes: str
    compared: str
    compared_positions: int
    max_difference: float
    max_pair_mass: float
    evidence: float
    evidence_bound: float
    tolerance: float
    seconds: float

    @property
    def passed(self) -> bool:
        """Whether any position was audited (a failed check raises instead)."""
        return self.points > 0

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "passed": self.passed}


#: What the substitutes are drawn from, as the record names it.
SUBSTITUTES = "trigram of the split"
#: The record of a causality audit that was switched off.
CAUSALITY_OFF = CausalityAudit(0, 0, "none", "none", "none", 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


@dataclasses.dataclass(frozen=True)
class AuditPlan:
    """The audit pass's text and where it differs from the evaluation's.

    Attributes:
        seed: the seed of every draw below.
        audit_first: whether the audit pass runs before the evaluation.
        inputs, targets: int64 ``[B, W]``, the evaluation's grid with the substitutions.
        substituted: bool ``[B, W]``, the ``m`` substituted positions.
        proposal: float64 ``[B, W]``, ``Q_r(c)``, the probability that the token ``c`` drawn there
            in place of ``r`` had (0 elsewhere).
        first: bool ``[B, W]``, each stream's first substitution (none in a stream without one).
        requested: bool ``[B, W]``, where distributions are asked for in both passes for this
            audit: the first substitutions and the decoys.
        compared: bool ``[B, W]``, the requested positions whose distributions check 1 compares:
            each first substitution and the decoys before it.
        mask: bool ``[B, W]``, the grid's real positions.
    """

    seed: int
    audit_first: bool
    inputs: np.ndarray
    targets: np.ndarray
    substituted: np.ndarray
    proposal: np.ndarray
    first: np.ndarray
    requested: np.ndarray
    compared: np.ndarray
    mask: np.ndarray


def plan_audit(
    inputs: np.ndarray,
    targets: np.ndarray,
    mask: np.ndarray,
    *,
    substitutes: SubstituteModel,
    eos_id: int,
    points: int,
    seed: int | None,
) -> AuditPlan:
    """Draw the audit of the evaluation grid ``inputs``, ``targets`` (int64 ``[B, W]``) and
    ``mask`` (bool ``[B, W]``, its real positions): ``points`` substituted positions (at most
    :data:`MAX_SUBSTITUTED_SHARE` of them, at least one), their tokens (from ``substitutes``,
    ``eos_id`` standing before each stream's first input), the decoys and the order of the
    passes, all from ``seed`` (None: a fresh secret one)."""
    seed = secrets.randbits(63) if seed is None else seed
    rng = np.random.default_rng(seed)
    substituted = _draw_positions(rng, mask, points)
    audit_inputs, audit_targets, proposal = _draw_substitutes(
        rng, inputs, targets, mask, substituted, substitutes, eos_id
    )
    first = _first_of_each_stream(substituted)
    decoys = np.zeros_like(mask)
    for _ in range(DECOYS):
        decoys |= _first_of_each_stream(_draw_positions(rng, mask, points))
    before_first = np.cumsum(first, axis=1) == 0  # [B, W]: true up to each first substitution
    audit_first = bool(rng.random() < 0.5)
    return AuditPlan(
        seed,
        audit_first,
        audit_inputs,
        audit_targets,
        substituted,
        proposal,
        first,
        requested=first | decoys,
        compared=first | (decoys & before_first),
        mask=mask,
    )


def most_substitutions(positions: int) -> int:
    """The most substitutions :func:`plan_audit` makes in ``positions`` real positions:
    :data:`MAX_SUBSTITUTED_SHARE` of them, rounded up."""
    return math.ceil(positions * MAX_SUBSTITUTED_SHARE)


def _draw_positions(rng: np.random.Generator, mask: np.ndarray, points: int) -> np.ndarray:
    """``points`` of the real positions of ``mask`` (bool ``[B, W]``) drawn without replacement
    (at most :data:`MAX_SUBSTITUTED_SHARE` of them, rounded up, so that streams audited apart
    reach the count of one grid of them all), as a bool ``[B, W]``."""
    rows, columns = np.nonzero(mask)
    count = min(points, most_substitutions(len(rows)))
    chosen = rng.choice(len(rows), count, replace=False)
    drawn = np.zeros_like(mask)
    drawn[rows[chosen], columns[chosen]] = True
    return drawn


def _first_of_each_stream(positions: np.ndarray) -> np.ndarray:
    """Each row's first true entry of ``positions`` (bool ``[B, W]``), as a bool ``[B, W]``."""
    first = np.zeros_like(positions)
    has_one = positions.any(axis=1)
    first[np.nonzero(has_one)[0], positions.argmax(axis=1)[has_one]] = True
    return first


def _draw_substitutes(
    rng: np.random.Generator,
    inputs: np.ndarray,
    targets: np.ndarray,
    mask: np.ndarray,
    substituted: np.ndarray,
    substitutes: SubstituteModel,
    eos_id: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The audit pass's inputs and targets (int64 ``[B, W]``): at each position of
    ``substituted`` (bool ``[B, W]``), stream by stream in order, a token drawn from
    ``substitutes`` given the two tokens before it in the audit's text (``eos_id`` before a
    stream's first input), given that it is not the real one; it is also the next input. Also
    returns ``Q_r(c)`` (float64 ``[B, W]``, 0 elsewhere) of each drawn token."""
    audit_inputs, audit_targets = inputs.copy(), targets.copy()
    proposal = np.zeros(mask.shape)
    for row, column in np.argwhere(substituted):  # row-major: each stream in order
        before = audit_inputs[row, column - 1] if column > 0 else eos_id
        law = substitutes.distribution(int(before), int(audit_inputs[row, column]))
        real = targets[row, column]
        law[real] = 0.0
        cumulative = np.cumsum(law)
        drawn = int(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right"))
        drawn = min(drawn, len(law) - 1)  # a draw at the very top of the last bin
        audit_targets[row, column] = drawn
        proposal[row, column] = law[drawn] / cumulative[-1]
        if column + 1 < mask.shape[1] and mask[row, column + 1]:
            audit_inputs[row, column + 1] = drawn
    return audit_inputs, audit_targets, proposal


@dataclasses.dataclass(frozen=True)
class PassScores:
    """What one pass over the grid returned.

    Attributes:
        log_probs: float64 ``[B, W]``, the target log-probabilities (0 at padding).
        rows: float64 ``[K, V]``, the distributions at the plan's ``compared`` positions, in
            row-major order, or None when the model gave none there.
        on_accelerator: whether the scores came back as tensors on an accelerator.
        seconds: wall-clock time of the pass.
    """

    log_probs: np.ndarray
    rows: np.ndarray | None
    on_accelerator: bool
    seconds: float


@dataclasses.dataclass(frozen=True)
class AuditedStreams:
    """Streams scored side by side from one ``reset`` (the split's, or a batch of its documents
    under the documents protocol) and what the causality audit has of them.

    Attributes:
        plan: their audit's plan (:func:`plan_audit`).
        evaluation, audit: the two passes' scores of them.
        starts: int64 ``[B]``, each stream's first token in the split, for messages.
    """

    plan: AuditPlan
    evaluation: PassScores
    audit: PassScores
    starts: np.ndarray


def check_audit(sections: Sequence[AuditedStreams], *, tolerance: float | None, name: str) -> CausalityAudit:
    """The three checks of the module docstring on ``sections`` (at least one): checks 1 and 2 of
    each, check 3 of all their substitutions together (one bet, whose false alarms stay within
    :data:`FALSE_ALARM` however many sections); raises :class:`PluginError` with one line naming
    a token where one fails."""
    if tolerance is None:
        on_accelerator = any(part.evaluation.on_accelerator or part.audit.on_accelerator for part in sections)
        tolerance = ACCELERATOR_TOLERANCE if on_accelerator else 0.0
    differences, compared, pair_masses, positions = [], set(), [], 0
    for part in sections:
        plan = part.plan
        before = (np.cumsum(plan.substituted, axis=1) == 0) & plan.mask  # [B, W]: before each first
        difference, what = _compare_history(
            plan, part.evaluation, part.audit, before, part.starts, tolerance, name
        )
        differences.append(difference)
        compared.add(what)
        pair_masses.append(_check_pairs(plan, part.evaluation, part.audit, part.starts, name))
        positions += int(before.sum() + plan.compared.sum())
    first = sections[0].plan
    return CausalityAudit(
        points=sum(int(part.plan.substituted.sum()) for part in sections),
        seed=first.seed,
        audit_pass="first" if first.audit_first else "second",
        substitutes=SUBSTITUTES,
        compared=compared.pop() if len(compared) == 1 else "targets",
        compared_positions=positions,
        max_difference=max(differences),
        max_pair_mass=max(pair_masses),
        evidence=_check_evidence(sections, name),
        evidence_bound=EVIDENCE_BOUND,
        tolerance=tolerance,
        seconds=sum(part.audit.seconds for part in sections),
    )


def _token(starts: np.ndarray, stream: int, column: int) -> int:
    return int(starts[stream]) + column


def _compare_history(
    plan: AuditPlan,
    evaluation: PassScores,
    audit: PassScores,
    before: np.ndarray,
    starts: np.ndarray,
    tolerance: float,
    name: str,
) -> tuple[float, str]:
    """Check 1: the log-probabilities before each stream's first substitution (``before``, bool
    ``[B, W]``) and the distributions at the plan's ``compared`` positions are the same in both
    passes. Returns the largest change and what was compared."""
    changes = _changes(evaluation.log_probs, audit.log_probs) * before
    stream, column = (int(i) for i in np.unravel_index(int(np.argmax(changes)), changes.shape))
    if changes[stream, column] > tolerance:
        token = _token(starts, stream, column)
        cause = (
            f"token {_token(starts, stream, int(plan.first[stream].argmax()))}, a later one, changes"
            if plan.first[stream].any()
            else "the same text is scored again (it is not deterministic, or reads other streams)"
        )
        raise PluginError(
            f"{name}: causality audit failed at token {token}: the log-probability of its target "
            f"changes (by {changes[stream, column]:.3g}) when {cause}"
        )
    largest = float(changes.max(initial=0.0))
    if evaluation.rows is None or audit.rows is None:
        return largest, "targets"
    row_changes = _changes(evaluation.rows, audit.rows).max(axis=1)  # [K]
    worst = int(np.argmax(row_changes))
    if row_changes[worst] > tolerance:
        stream, column = (int(i) for i in np.argwhere(plan.compared)[worst])
        token = _token(starts, stream, column)
        first = _token(starts, stream, int(plan.first[stream].argmax()))
        raise PluginError(
            f"{name}: causality audit failed at token {token}: the distribution at token {token} "
            f"changes (by {row_changes[worst]:.3g}) when token {first} or a later token changes"
        )
    return max(largest, float(row_changes.max(initial=0.0))), "targets and distributions"


def _check_pairs(
    plan: AuditPlan,
    evaluation: PassScores,
    audit: PassScores,
    starts: np.ndarray,
    name: str,
) -> float:
    """Check 2: at each stream's first substitution, ``p(real)`` (the evaluation's) plus
    ``p(drawn)`` (the audit pass's) is at most 1. Returns the largest such sum."""
    where = plan.first
    pairs = np.exp(evaluation.log_probs[where]) + np.exp(audit.log_probs[where])
    if pairs.size and pairs.max() > 1 + MASS_TOLERANCE:
        stream, column = (int(i) for i in np.argwhere(where)[int(np.argmax(pairs))])
        token = _token(starts, stream, column)
        raise PluginError(
            f"{name}: causality audit failed at token {token}: the probabilities it gives the real "
            f"token and another one there, after the same text, sum to {pairs.max():.4g} > 1: "
            f"{_reads_or_unnormalised(evaluation)}"
        )
    return float(pairs.max(initial=0.0))


#: The largest evidence (nats) check 3 accepts.
EVIDENCE_BOUND = math.log(1 / FALSE_ALARM)


def substitution_evidence(ratios: np.ndarray) -> float:
    """Check 3's evidence, in nats, from the ratios ``X_i = p(c_i) / Q_r(c_i)`` (float64 ``[m]``,
    in the order of the substitutions): the log of the mean over :data:`BETS` of the wealth
    ``prod_i (1 + lambda (X_i - 1))``. An honest model's evidence exceeds ``log(1 / a)`` with
    probability at most ``a`` (the module docstring)."""
    bets = np.asarray(BETS)[:, None]  # [L, 1]
    log_wealths = np.log1p(bets * (ratios[None, :] - 1.0)).sum(axis=1)  # [L]
    peak = log_wealths.max()
    return float(peak + np.log(np.mean(np.exp(log_wealths - peak))))


def _check_evidence(sections: Sequence[AuditedStreams], name: str) -> float:
    """Check 3: the evidence of the substitutes' probabilities (the audit pass's) against their
    draw law (:func:`substitution_evidence`), over the substitutions of all ``sections`` in
    order, is within :data:`EVIDENCE_BOUND`. Returns it."""
    ratios = np.concatenate(
        [
            np.exp(part.audit.log_probs[part.plan.substituted]) / part.plan.proposal[part.plan.substituted]
            for part in sections
        ]
    )  # each section's row-major
    evidence = substitution_evidence(ratios)
    if evidence > EVIDENCE_BOUND:
        part = next(part for part in sections if part.plan.first.any())
        first = _token(part.starts, *(int(i) for i in np.argwhere(part.plan.first)[0]))
        raise PluginError(
            f"{name}: causality audit failed: the {len(ratios)} tokens substituted in the text from "
            f"token {first} on get {ratios.mean():.3g} times the probability they were drawn with "
            f"on average, where an honest model's mean is at most 1 (evidence {evidence:.1f} nats "
            f"against it, above the bound {EVIDENCE_BOUND:.1f}): {_reads_or_unnormalised(part.audit)}"
        )
    return evidence


def _reads_or_unnormalised(scores: PassScores) -> str:
    """What excess probability means, from whether the model's distributions were checked (the
    probability audit then showed them normalised)."""
    if scores.rows is not None:
        return "it reads the token it predicts (its full distributions sum to 1 where asked)"
    return (
        "it reads the token it predicts, or its scores are not normalised (it gives no full "
        "distributions, so the audit cannot tell which)"
    )


def _changes(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``|a - b|`` elementwise, 0 where equal (infinities included), NaN counted as a change."""
    if np.array_equal(a, b):
        return np.zeros(a.shape)
    with np.errstate(invalid="ignore"):
        return np.where(a == b, 0.0, np.nan_to_num(np.abs(a - b), nan=np.inf))
