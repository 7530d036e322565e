"""Test helper: :func:`harness.evaluate.evaluate`'s keyword arguments from one flat dict."""

from __future__ import annotations

import dataclasses
from typing import Any

from harness.protocol import EvaluationProtocol

_FIELDS = {field.name for field in dataclasses.fields(EvaluationProtocol)}


def protocol_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with the protocol's fields (``batch_size``, ``bptt``, ...) gathered into
    ``protocol=EvaluationProtocol(...)``; the others as they are."""
    protocol = {key: value for key, value in options.items() if key in _FIELDS}
    rest = {key: value for key, value in options.items() if key not in _FIELDS}
    return {**rest, "protocol": EvaluationProtocol(**protocol)}
