"""The audits' default settings: what ``harness eval`` applies when no option changes them, and
what the leaderboard requires of a result it ranks
(:func:`wikitext_toolkit_core.result_schema.audit_setting_reasons`)."""

from __future__ import annotations

#: Default number of positions the causality audit substitutes (``--causality-audit``).
SUBSTITUTIONS = 1000
#: Largest share of a split's positions the causality audit substitutes.
MAX_SUBSTITUTED_SHARE = 0.25
#: The causality audit's default tolerance for a model whose scores come back as tensors on an
#: accelerator, where kernels may reduce in another order from one pass to the next (on the CPU
#: a causal model's scores are exactly reproducible: the default there is 0).
ACCELERATOR_TOLERANCE = 1e-4
#: Default number of positions whose full distribution the probability audit checks (``--audit``).
AUDIT_POSITIONS = 8


def default_substitutions(tokens: int) -> int:
    """The substitutions the causality audit makes by default on a split of ``tokens`` positions:
    :data:`SUBSTITUTIONS`, at most :data:`MAX_SUBSTITUTED_SHARE` of them, at least one."""
    return min(SUBSTITUTIONS, max(1, int(tokens * MAX_SUBSTITUTED_SHARE)))


def default_audit_positions(tokens: int) -> int:
    """The positions the probability audit checks by default on a split of ``tokens`` positions."""
    return min(AUDIT_POSITIONS, tokens)


def default_tolerance(device: str | None) -> float:
    """The causality audit's default tolerance for scores computed on ``device`` (as a result
    records it, ``cpu (x86_64)``, ``cuda:0 (NVIDIA H100 80GB HBM3)``; None: not recorded, the
    CPU): 0 on the CPU, :data:`ACCELERATOR_TOLERANCE` elsewhere."""
    return 0.0 if device is None or device.startswith("cpu") else ACCELERATOR_TOLERANCE
