"""The causality audit: a second pass over the split that a plugin cannot tell from the evaluation.

A plugin that reads the token it is scoring (``chunk.targets``, or a later input) gets a figure
far better than any honest model's. An audit that scores short made-up stretches after a reset
can be told apart from the evaluation, and a plugin that cheats only deep in its streams passes
it. So the audit is a whole second pass, with everything the plugin can see as in the
evaluation: ``reset(B)`` with the same ``B``, the same streams from the same starts, the same
chunks of ``T``, to the same depth, and full distributions asked for at the same positions. The
one difference is ``m`` substituted tokens: at ``m`` positions drawn at random the target is
another token, drawn from ``Q`` (half uniform over the vocabulary, half the split's unigram)
given that it is not the real one, and so is the next input. Whether the audit pass comes before
or after the evaluation is drawn too, and the draws come from a seed drawn afresh for each
evaluation (recorded with the audit), so a plugin that knows this code still cannot know which
pass counts or where the substitutions are.

Three checks, each exact for an honest model:

1. **Nothing depends on later tokens.** Before its first substitution, each stream of the audit
   pass reads exactly what the evaluation read, so every log-probability there must be the same
   in both passes, and so must the full distribution at the first substitution itself (asked for
   in both passes), which may not depend on the target it is asked at.
2. **The substituted tokens form one distribution with the real one.** At each stream's first
   substitution ``p`` both passes share the history, so ``p(real) + p(drawn) <= 1``.
3. **Tokens drawn at random get the probability chance gives them.** For any normalized model,
   any history ``h`` and real token ``r``, ``E[p(c | h) / (V Q_r(c))] = (1 - p(r | h)) / V <= 1/V``
   over ``c`` drawn from ``Q_r(c) = Q(c) / (1 - Q(r))``, ``c != r``: the sum ``S`` of this ratio
   over the ``m`` substitutions has mean at most ``m/V``, and as each term lies in ``[0, 2]``,
   Freedman's inequality bounds it: ``S`` exceeds ``m/V + t`` with probability below
   :data:`FALSE_ALARM`. A plugin that adds mass ``e`` to whatever target it is shown adds about
   ``e`` to ``S`` per substitution it cheats at: ``S`` grows with ``m`` where the bound grows with
   its square root, so cheating at a fraction ``f`` of positions fails once ``e f m`` is well
   above ``t`` (about 19 at ``m`` = 1,000).

What it cannot catch: a plugin that remembers the text of an earlier pass and can tell which of
two passes holds the real text (that is what it would need to skip cheating at the substituted
positions); a cheat too small or too rare for ``e f m`` to clear the bound (on a split of a few
thousand tokens, or a shift of under about 2% of probability at ``m`` = 1,000); and reading the
context after the target without the target itself, except where check 1 sees it (the stretch
of each stream before its first substitution). Its cost is one more pass over the split.
"""

from __future__ import annotations

import dataclasses
import math
import secrets
from typing import Any

import numpy as np

from harness.plugin import PluginError

#: Default number of substituted positions.
SUBSTITUTIONS = 1000
#: Largest share of a split's positions substituted.
MAX_SUBSTITUTED_SHARE = 0.25
#: Probability that an honest model's ``S`` (check 3) exceeds its bound.
FALSE_ALARM = 1e-6
#: Tolerance of check 2 and of the probability audit alike.
MASS_TOLERANCE = 1e-4
#: The audit's default tolerance of check 1 for a model whose scores come back as tensors on an
#: accelerator, where kernels may reduce in another order from one pass to the next (on the CPU
#: a causal model's scores are exactly reproducible: the default there is 0).
ACCELERATOR_TOLERANCE = 1e-4


@dataclasses.dataclass(frozen=True)
class CausalityAudit:
    """What the causality audit checked.

    Attributes:
        points: substituted positions (0: the audit was off).
        seed: the seed of the audit's draws (the positions, the tokens, the order of the passes).
        audit_pass: ``"first"`` or ``"second"``: when the audit pass ran, before or after the
            evaluation (``"none"`` when off).
        compared: ``"targets and distributions"``, or ``"targets"`` for a model that gives no
            distributions (check 1), or ``"none"`` when off.
        compared_positions: positions compared between the passes (check 1).
        max_difference: largest change of a log-probability or distribution entry between them.
        max_pair_mass: largest ``p(real) + p(drawn)`` at a stream's first substitution (check 2).
        random_mass: ``S`` of check 3.
        random_mass_bound: the largest ``S`` accepted.
        tolerance: largest ``max_difference`` accepted.
        seconds: wall-clock time of the audit pass.
    """

    points: int
    seed: int
    audit_pass: str
    compared: str
    compared_positions: int
    max_difference: float
    max_pair_mass: float
    random_mass: float
    random_mass_bound: float
    tolerance: float
    seconds: float

    @property
    def passed(self) -> bool:
        """Whether any position was audited (a failed check raises instead)."""
        return self.points > 0

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "passed": self.passed}


#: The record of a causality audit that was switched off.
CAUSALITY_OFF = CausalityAudit(0, 0, "none", "none", 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


@dataclasses.dataclass(frozen=True)
class AuditPlan:
    """The audit pass's text and where it differs from the evaluation's.

    Attributes:
        seed: the seed of every draw below.
        audit_first: whether the audit pass runs before the evaluation.
        inputs, targets: int64 ``[B, W]``, the evaluation's grid with the substitutions.
        substituted: bool ``[B, W]``, the ``m`` substituted positions.
        proposal: float64 ``[B, W]``, ``V Q_r(c)`` of the token ``c`` drawn there in place of
            ``r`` (0 elsewhere).
        mask: bool ``[B, W]``, the grid's real positions.
        first: bool ``[B, W]``, each stream's first substitution (none in a stream without one).
    """

    seed: int
    audit_first: bool
    inputs: np.ndarray
    targets: np.ndarray
    substituted: np.ndarray
    proposal: np.ndarray
    first: np.ndarray
    mask: np.ndarray


def plan_audit(
    inputs: np.ndarray,
    targets: np.ndarray,
    mask: np.ndarray,
    *,
    vocab_size: int,
    points: int,
    seed: int | None,
) -> AuditPlan:
    """Draw the audit of the evaluation grid ``inputs``, ``targets`` (int64 ``[B, W]``) and
    ``mask`` (bool ``[B, W]``, its real positions): ``points`` substituted positions (at most
    :data:`MAX_SUBSTITUTED_SHARE` of them, at least one), their tokens and the order of the
    passes, all from ``seed`` (None: a fresh secret one)."""
    seed = secrets.randbits(63) if seed is None else seed
    rng = np.random.default_rng(seed)
    rows, columns = np.nonzero(mask)  # stream by stream, each in order
    count = min(points, max(1, int(len(rows) * MAX_SUBSTITUTED_SHARE)))
    chosen = rng.choice(len(rows), count, replace=False)
    rows, columns = rows[chosen], columns[chosen]
    real = targets[rows, columns]
    proposal_of = 0.5 / vocab_size + 0.5 * np.bincount(targets[mask], minlength=vocab_size) / mask.sum()
    drawn = _draw_other_tokens(rng, real, proposal_of)
    substituted = np.zeros_like(mask)
    substituted[rows, columns] = True
    proposal = np.zeros(mask.shape)
    proposal[rows, columns] = vocab_size * proposal_of[drawn] / (1 - proposal_of[real])
    audit_targets, audit_inputs = targets.copy(), inputs.copy()
    audit_targets[rows, columns] = drawn
    following = columns + 1
    follows = following < mask.shape[1]
    follows[follows] = mask[rows[follows], following[follows]]  # a next position that is real
    audit_inputs[rows[follows], following[follows]] = drawn[follows]
    first = np.zeros_like(mask)
    has_one = substituted.any(axis=1)
    first[np.nonzero(has_one)[0], substituted.argmax(axis=1)[has_one]] = True
    audit_first = bool(rng.random() < 0.5)
    return AuditPlan(seed, audit_first, audit_inputs, audit_targets, substituted, proposal, first, mask)


def _draw_other_tokens(rng: np.random.Generator, real: np.ndarray, proposal_of: np.ndarray) -> np.ndarray:
    """For each of the real tokens ``real`` (int64 ``[m]``), a token drawn from the proposal
    ``proposal_of`` (float64 ``[V]``) given that it is another one: ``Q(c) / (1 - Q(real))``."""
    drawn = rng.choice(len(proposal_of), len(real), p=proposal_of)
    while (again := drawn == real).any():
        drawn[again] = rng.choice(len(proposal_of), int(again.sum()), p=proposal_of)
    return drawn


@dataclasses.dataclass(frozen=True)
class PassScores:
    """What one pass over the grid returned.

    Attributes:
        log_probs: float64 ``[B, W]``, the target log-probabilities (0 at padding).
        rows: float64 ``[K, V]``, the distributions at the plan's ``first`` positions, in row-major
            order, or None when the model gave none there.
        on_accelerator: whether the scores came back as tensors on an accelerator.
        seconds: wall-clock time of the pass.
    """

    log_probs: np.ndarray
    rows: np.ndarray | None
    on_accelerator: bool
    seconds: float


def check_audit(
    plan: AuditPlan,
    evaluation: PassScores,
    audit: PassScores,
    *,
    starts: np.ndarray,
    vocab_size: int,
    tolerance: float | None,
    name: str,
) -> CausalityAudit:
    """The three checks of the module docstring on the two passes of ``plan`` (``starts``: int64
    ``[B]``, each stream's first token in the split, for messages); raises :class:`PluginError`
    with one line naming a token where one fails."""
    if tolerance is None:
        on_accelerator = evaluation.on_accelerator or audit.on_accelerator
        tolerance = ACCELERATOR_TOLERANCE if on_accelerator else 0.0
    before = (np.cumsum(plan.substituted, axis=1) == 0) & plan.mask  # [B, W]: before each first
    difference, compared = _compare_history(plan, evaluation, audit, before, starts, tolerance, name)
    pair_mass = _check_pairs(plan, evaluation, audit, starts, name)
    random_mass, bound = _check_random_mass(plan, audit, vocab_size, starts, name)
    return CausalityAudit(
        points=int(plan.substituted.sum()),
        seed=plan.seed,
        audit_pass="first" if plan.audit_first else "second",
        compared=compared,
        compared_positions=int(before.sum() + plan.first.sum()),
        max_difference=difference,
        max_pair_mass=pair_mass,
        random_mass=random_mass,
        random_mass_bound=bound,
        tolerance=tolerance,
        seconds=audit.seconds,
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
    ``[B, W]``) and the distributions at it are the same in both passes. Returns the largest
    change and what was compared."""
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
        stream, column = (int(i) for i in np.argwhere(plan.first)[worst])
        token = _token(starts, stream, column)
        raise PluginError(
            f"{name}: causality audit failed at token {token}: the distribution at token {token} "
            f"changes (by {row_changes[worst]:.3g}) when token {token} or a later token changes"
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


def _check_random_mass(
    plan: AuditPlan, audit: PassScores, vocab_size: int, starts: np.ndarray, name: str
) -> tuple[float, float]:
    """Check 3: ``S``, the sum over the substitutions of ``p(drawn) / (V Q(drawn))``, is within
    its bound. Returns both."""
    count = int(plan.substituted.sum())
    terms = np.exp(audit.log_probs[plan.substituted]) / plan.proposal[plan.substituted]
    total, bound = float(terms.sum()), random_mass_bound(count, vocab_size)
    if total > bound:
        raise PluginError(
            f"{name}: causality audit failed: it gives {count} tokens drawn at random, substituted "
            f"in the text from token {_token(starts, *(int(i) for i in np.argwhere(plan.first)[0]))} "
            f"on, probabilities that sum to {total:.4g} times what chance gives them, where an "
            f"honest model's sum stays below {bound:.4g} (expected {count / vocab_size:.3g}): "
            f"{_reads_or_unnormalised(audit)}"
        )
    return total, bound


def random_mass_bound(count: int, vocab_size: int, false_alarm: float = FALSE_ALARM) -> float:
    """The largest ``S`` (check 3) accepted over ``count`` substitutions: ``count / V + t`` with
    ``t`` from Freedman's inequality for terms in ``[0, 2]`` of mean ``1/V`` and variance at most
    ``2/V``, exceeded by an honest model with probability below ``false_alarm``."""
    log_odds = math.log(1 / false_alarm)
    variance = 2 * count / vocab_size
    linear = 2 * log_odds / 3
    return count / vocab_size + linear + math.sqrt(linear**2 + 2 * log_odds * variance)


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
