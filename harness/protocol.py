"""How a split is scored: the settings every layer of an evaluation shares."""

from __future__ import annotations

import dataclasses

from wikitext_toolkit_core.audit_defaults import AUDIT_POSITIONS, SUBSTITUTIONS
from wikitext_toolkit_core.result_schema import PROTOCOL_NAMES


@dataclasses.dataclass(frozen=True)
class EvaluationProtocol:
    """How a split is scored (see :func:`harness.evaluate.evaluate`); the defaults are those of
    ``python -m harness eval`` and :func:`harness.api.evaluate_model`: one stream (the papers'
    test protocol), chunks of 100, 8 audited distributions, the full causality audit.

    Attributes:
        name: ``stream`` (the split as ``batch_size`` contiguous streams) or ``documents``
            (each article of the split from a fresh state, one stream each: :mod:`harness.documents`).
        batch_size: ``B``, the number of contiguous streams scored side by side (``stream`` only).
        bptt: ``T``, positions per chunk (a model that scores whole streams gets them whole).
        audit_positions: positions (drawn with a fixed seed) at which the full distribution is
            requested and checked; 0 disables the probability audit.
        causality_points: positions substituted by the causality audit's pass
            (:mod:`harness.causality`); 0 disables it (so does a vocabulary of one word).
        causality_tolerance: largest change of a log-probability the causality audit accepts;
            None: 0, or :data:`harness.causality.ACCELERATOR_TOLERANCE` for scores on an
            accelerator.
        causality_seed: the seed of the causality audit's draws; None (the command line's and
            :func:`harness.api.evaluate_model`'s): a fresh secret one for each evaluation, so
            that a plugin cannot learn where the substitutions fall. A fixed seed repeats them
            (for tests).
    """

    name: str = "stream"
    batch_size: int = 1
    bptt: int = 100
    audit_positions: int = AUDIT_POSITIONS
    causality_points: int = SUBSTITUTIONS
    causality_tolerance: float | None = None
    causality_seed: int | None = None

    def __post_init__(self) -> None:
        if self.name not in PROTOCOL_NAMES:
            raise ValueError(f"protocol {self.name!r} is not one of {', '.join(PROTOCOL_NAMES)}")
        if self.name == "documents" and self.batch_size != 1:
            raise ValueError("the documents protocol scores one stream per document: it takes no batch size")


#: The protocol when no option sets it.
DEFAULT_PROTOCOL = EvaluationProtocol()

#: The splits scored when none are named, in order: the papers report both.
DEFAULT_SPLITS = ("valid", "test")
