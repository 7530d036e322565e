"""Test helper: :func:`harness.evaluate.evaluate`'s keyword arguments from one flat dict."""

from __future__ import annotations

import dataclasses
from typing import Any

from harness.protocol import EvaluationProtocol

#: The protocol's fields by their keys here: its ``name`` is ``protocol_name`` (``name`` is the
#: plugin's, an argument of ``evaluate`` itself).
_FIELDS = {
    ("protocol_name" if field.name == "name" else field.name): field.name
    for field in dataclasses.fields(EvaluationProtocol)
}


def protocol_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with the protocol's fields (``batch_size``, ``bptt``, ..., ``protocol_name``)
    gathered into ``protocol=EvaluationProtocol(...)``; the others as they are."""
    protocol = {_FIELDS[key]: value for key, value in options.items() if key in _FIELDS}
    rest = {key: value for key, value in options.items() if key not in _FIELDS}
    return {**rest, "protocol": EvaluationProtocol(**protocol)}
