"""The ``result_metadata()`` hook (added for the ``hf`` plugin): a model's own fields land under
``plugin_metadata`` in the result JSON; needs no transformers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main

PLUGIN = """
import numpy as np
from harness import ChunkScores


class Uniform:
    def __init__(self, size, metadata):
        self.size, self.metadata, self.scored = size, metadata, 0

    def reset(self, batch_size):
        self.scored = 0

    def score(self, chunk):
        self.scored += int(chunk.mask.sum())
        return ChunkScores(np.full(chunk.targets.shape, -np.log(self.size)), None)

    def result_metadata(self):
        return {"scored": self.scored} if self.metadata == "dict" else [self.scored]


def load_model(dataset, *, device, checkpoint, metadata="dict"):
    return Uniform(len(dataset.vocab), metadata)
"""


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "uniform_with_metadata.py").write_text(PLUGIN, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    return "uniform_with_metadata"


def test_result_metadata_is_written_under_plugin_metadata(corpus, plugin, tmp_path):
    output = tmp_path / "r.json"
    assert (
        main(
            [
                "eval",
                plugin,
                "--dataset",
                str(corpus),
                "--split",
                "test",
                "--causality-audit",
                "0",
                "--output",
                str(output),
            ]
        )
        == 0
    )
    record = json.loads(output.read_text())
    assert record["plugin_metadata"] == {"scored": record["tokens"]}


def test_a_plugin_without_the_hook_writes_null(corpus, tmp_path):
    output = tmp_path / "r.json"
    assert (
        main(["eval", "unigram", "--dataset", str(corpus), "--split", "test", "--output", str(output)]) == 0
    )
    assert json.loads(output.read_text())["plugin_metadata"] is None


def test_metadata_that_is_not_a_dict_is_a_one_line_error(corpus, plugin, capsys):
    assert (
        main(
            [
                "eval",
                plugin,
                "--dataset",
                str(corpus),
                "--split",
                "test",
                "--causality-audit",
                "0",
                "--model-args",
                "metadata=list",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert err == f"error: {plugin} {corpus.name}/test: result_metadata() returned list, not a dict"
