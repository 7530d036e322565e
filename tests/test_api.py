"""The in-process API, :func:`harness.api.evaluate_model`: the command line's figures, files and
errors, from a plugin name or a model object, without printing anything."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from harness import evaluate as evaluate_module
from harness.api import evaluate_model
from harness.causality import SUBSTITUTIONS
from harness.cli import main as harness_main
from harness.datasets import Dataset, load_dataset
from harness.plugin import Chunk, ChunkScores, PluginError
from harness.protocol import DEFAULT_PROTOCOL, DEFAULT_SPLITS, EvaluationProtocol
from wikitext_toolkit_core.cli import UsageError
from wikitext_toolkit_core.files import DatasetError

REPO = Path(__file__).resolve().parent.parent
#: Fields of a record that differ between two runs of one evaluation: when it ran, how fast, and
#: the audits' draws. The causality audit's are secret and fresh each time, and the probability
#: audit's largest errors cover the distributions it asks for too; the audits' sizes and outcomes
#: are compared (:func:`assert_same_evaluation`).
VOLATILE = ("created", "runtime_seconds", "tokens_per_second", "audit", "causality_audit")


class TinyTorchBigram:
    """An untrained ``nn.Embedding`` + ``nn.Linear`` bigram network (weights from a fixed seed)
    behind the plugin protocol; torch is imported when one is made (torch is an extra)."""

    def __init__(self, vocab_size: int, seed: int = 0) -> None:
        import torch

        self.torch = torch
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.net = torch.nn.Sequential(torch.nn.Embedding(vocab_size, 8), torch.nn.Linear(8, vocab_size))
        self.num_parameters = sum(parameter.numel() for parameter in self.net.parameters())

    def reset(self, batch_size: int) -> None:
        pass  # the previous token is all the context a bigram has

    def score(self, chunk: Chunk) -> ChunkScores:
        torch = self.torch
        with torch.no_grad():
            log_dists = torch.log_softmax(self.net(torch.from_numpy(chunk.inputs)), dim=-1)  # [B, T, V]
        targets = log_dists.gather(2, torch.from_numpy(chunk.targets)[..., None])[..., 0]
        wanted = chunk.distribution_mask
        return ChunkScores(targets, None if wanted is None else log_dists[torch.from_numpy(wanted)])


def load_tiny_bigram(dataset: Dataset, *, device: str, checkpoint: str | None) -> TinyTorchBigram:
    """The factory that serves :class:`TinyTorchBigram` to the command line."""
    return TinyTorchBigram(len(dataset.vocab))


def command_line_results(directory: Path, plugin: str, dataset: Path, *options: str) -> dict[str, Any]:
    """Run ``python -m harness eval PLUGIN --dataset DATASET --device cpu --output-dir DIRECTORY
    OPTIONS...``; returns ``{file name: parsed record}`` of what it wrote."""
    arguments = ["eval", plugin, "--dataset", str(dataset), "--device", "cpu", "--output-dir", str(directory)]
    assert harness_main([*arguments, *options]) == 0
    return {path.name: json.loads(path.read_text()) for path in sorted(directory.glob("*.json"))}


def assert_same_evaluation(record: dict[str, Any], expected: dict[str, Any], *differing: str) -> None:
    """Two records of one evaluation agree in every field but :data:`VOLATILE` and ``differing``,
    and their audits had the same sizes and outcomes."""
    skipped = {*VOLATILE, *differing}
    assert {key: value for key, value in record.items() if key not in skipped} == {
        key: value for key, value in expected.items() if key not in skipped
    }
    for audit, keys in (
        ("audit", ("requested", "checked", "passed")),
        ("causality_audit", ("points", "passed")),
    ):
        assert [record[audit][key] for key in keys] == [expected[audit][key] for key in keys]


def test_a_torch_model_object_gets_the_command_lines_figures(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    monkeypatch.syspath_prepend(str(Path(__file__).parent))  # the command line imports this module
    protocol = ("--batch-size", "2", "--bptt", "3", "--audit", "5")
    expected = command_line_results(  # in its process, as a model object is
        tmp_path / "cli",
        "test_api:load_tiny_bigram",
        corpus,
        "--split",
        "valid",
        "test",
        "--in-process",
        *protocol,
    )
    capsys.readouterr()
    dataset = load_dataset(str(corpus))
    results = evaluate_model(
        TinyTorchBigram(len(dataset.vocab)), dataset, splits=("valid", "test"), batch_size=2, bptt=3, audit=5
    )
    assert capsys.readouterr().out == ""
    assert [result.record.split for result in results] == ["valid", "test"]
    for result, (name, record) in zip(results, sorted(expected.items(), reverse=True)):  # valid, test
        assert name.endswith(f".{result.record.split}.json")
        assert result.record.model == "test_api:TinyTorchBigram"
        assert (result.perplexity, result.nll, result.tokens) == (
            record["perplexity"],
            record["nll"],
            record["tokens"],
        )
        assert result.record.audit["passed"] and result.record.causality_audit["passed"]  # both audits ran
        assert_same_evaluation(result.record.to_json(), record, "model", "token_log_probs_file")
        saved = np.load(tmp_path / "cli" / record["token_log_probs_file"])
        assert result.token_log_probs.dtype == np.float64
        assert np.array_equal(result.token_log_probs, saved)
        assert math.isclose(-result.token_log_probs.mean(), result.nll)


def test_a_plugin_name_writes_the_files_the_command_line_writes(corpus: Path, tmp_path: Path) -> None:
    expected = command_line_results(tmp_path / "cli", "unigram", corpus, "--split", "valid", "test")
    results = evaluate_model("unigram", corpus, output_dir=tmp_path / "api")
    written = {path.name: json.loads(path.read_text()) for path in sorted((tmp_path / "api").glob("*.json"))}
    names = ["harness.plugins.unigram.toy.test.json", "harness.plugins.unigram.toy.valid.json"]
    assert sorted(written) == sorted(expected) == names
    assert sorted(path.name for path in (tmp_path / "api").iterdir()) == sorted(
        path.name for path in (tmp_path / "cli").iterdir()
    )
    for result in results:
        name = f"harness.plugins.unigram.toy.{result.record.split}.json"
        assert result.record.to_json() == written[name]
        assert_same_evaluation(written[name], expected[name])
        for directory in ("api", "cli"):
            saved = np.load(tmp_path / directory / written[name]["token_log_probs_file"])
            assert np.array_equal(result.token_log_probs, saved)


def test_the_defaults_are_the_command_lines(corpus: Path, tmp_path: Path) -> None:
    expected = command_line_results(tmp_path, "unigram", corpus)  # no --split: valid, then test
    results = evaluate_model("unigram", str(corpus))
    assert [result.record.split for result in results] == list(DEFAULT_SPLITS) == ["valid", "test"]
    assert sorted(expected) == [f"harness.plugins.unigram.toy.{split}.json" for split in ("test", "valid")]
    for result in results:
        record = expected[f"harness.plugins.unigram.toy.{result.record.split}.json"]
        assert result.record.protocol.to_json() == record["protocol"]
        assert_same_evaluation(result.record.to_json(), record, "token_log_probs_file")
        assert result.record.token_log_probs_file is None  # no file without output_dir
    assert DEFAULT_PROTOCOL == EvaluationProtocol(  # as docs/harness.md states them
        batch_size=1, bptt=100, audit_positions=8, causality_points=SUBSTITUTIONS, causality_tolerance=None
    )


def test_a_dataset_object_is_reused_without_reading_its_files_again(
    corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = load_dataset(str(corpus))
    first = evaluate_model("unigram", dataset, splits=("valid", "test"))
    shutil.rmtree(corpus)  # what a second call needs is in the dataset object
    (again,) = evaluate_model("unigram", dataset, splits=["valid", "valid"], causality_audit=0)
    assert (again.nll, again.tokens) == (first[0].nll, first[0].tokens)
    assert np.array_equal(again.token_log_probs, first[0].token_log_probs)
    assert again.record.audit_gaps and not again.record.audited  # its causality audit was off
    assert capsys.readouterr() == ("", "")  # nothing printed, on stdout or stderr


@pytest.mark.parametrize("progress", [True, False])
def test_progress_is_shown_unless_turned_off(
    corpus: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], progress: bool
) -> None:
    from wikitext_toolkit_core import progress as progress_lines

    monkeypatch.setattr(progress_lines, "LOG_INTERVAL_SECONDS", 0)  # a line at once
    evaluate_model("unigram", str(corpus), splits="valid", progress=progress)
    lines = capsys.readouterr().err.splitlines()
    assert bool(lines) == progress and all("unigram" in line for line in lines)


def test_output_dir_refuses_a_result_of_other_code_unless_overwrite(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results"
    evaluate_model("unigram", corpus, splits="test", output_dir=out)
    evaluate_model("unigram", corpus, splits="test", output_dir=out)  # the same code: a rerun replaces it
    path = out / "harness.plugins.unigram.toy.test.json"
    record = json.loads(path.read_text())
    current = record["plugin_code"]["sha256"]
    record["plugin_code"]["sha256"] = "0" * 64  # as another version of the plugin wrote it
    path.write_text(json.dumps(record))
    before = path.read_bytes()
    message = f"{path}: holds a result of other plugin code (000000000000, now {current[:12]}); pass "
    with pytest.raises(
        UsageError, match=re.escape(message + "overwrite=True to replace it, or write elsewhere")
    ):
        evaluate_model("unigram", corpus, splits="test", output_dir=out)
    assert path.read_bytes() == before  # refused before scoring: nothing written
    capsys.readouterr()
    assert (
        harness_main(
            ["eval", "unigram", "--dataset", str(corpus), "--split", "test", "--output-dir", str(out)]
        )
        == 2
    )
    assert capsys.readouterr().err == f"error: {message}--overwrite to replace it, or write elsewhere\n"
    evaluate_model("unigram", corpus, splits="test", output_dir=out, overwrite=True)
    assert json.loads(path.read_text())["plugin_code"]["sha256"] == current


def test_output_dir_refuses_a_result_of_another_checkpoint_unless_overwrite(
    corpus: Path, tmp_path: Path
) -> None:
    dataset, out = load_dataset(str(corpus)), tmp_path / "results"
    model = WholeStreamUniform(len(dataset.vocab))
    options: dict[str, Any] = {"splits": "test", "output_dir": out}
    evaluate_model(model, dataset, checkpoint="a.pt", **options)
    evaluate_model(model, dataset, checkpoint="a.pt", **options)  # the same checkpoint: replaced
    path = out / "test_api-WholeStreamUniform.toy.test.json"
    before = path.read_bytes()
    with pytest.raises(
        UsageError, match=re.escape("holds a result of another checkpoint (a.pt); pass overwrite=True")
    ):
        evaluate_model(model, dataset, checkpoint="b.pt", **options)
    assert path.read_bytes() == before
    (result,) = evaluate_model(model, dataset, checkpoint="b.pt", overwrite=True, **options)
    saved = json.loads(path.read_text())
    assert saved["checkpoint"] == result.record.checkpoint == "b.pt"


@pytest.mark.parametrize(
    ("model", "dataset", "options", "error", "message"),
    [
        ("unigram", "toy", {"splits": ("dev",)}, DatasetError, "unknown split 'dev'"),
        ("unigram", "missing", {}, DatasetError, "missing"),
        ("no_such_plugin", "toy", {}, PluginError, "no plugin 'no_such_plugin'"),
        ("unigram", "toy", {"checkpoint": "x.pt"}, PluginError, "takes no --checkpoint"),
        (
            object(),
            "toy",
            {},
            PluginError,
            "no reset(batch_size) and score(chunk) methods, nor a score_stream(stream) method",
        ),
        ("unigram", "toy", {"model_args": {"epoch": math.nan}}, PluginError, "not recordable in JSON"),
        ("unigram", "toy", {"model_args": {"sizes": (1, 2)}}, PluginError, 'reads them as {"sizes": [1, 2]}'),
        ("unigram", "toy", {"splits": ()}, ValueError, "splits names no split"),
        ("unigram", "toy", {"bptt": 0}, ValueError, "bptt must be an integer of at least 1, got 0"),
        ("unigram", "toy", {"audit": -1}, ValueError, "audit must be an integer of at least 0"),
    ],
)
def test_errors_are_raised_as_the_harness_types_and_nothing_is_printed(
    corpus: Path,
    capsys: pytest.CaptureFixture[str],
    model: Any,
    dataset: str,
    options: dict[str, Any],
    error: type[Exception],
    message: str,
) -> None:
    with pytest.raises(error, match=re.escape(message)):
        evaluate_model(model, corpus.parent / dataset, **options)
    assert capsys.readouterr() == ("", "")


def test_readme_training_loop_example_runs(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    readme = (REPO / "README.md").read_text()
    code = re.search(r"<!-- example-training-loop -->\n```python\n(.*?)```", readme, re.S).group(1)
    assert code.count('load_dataset("ptb")') == 1  # trained and scored on the tiny corpus here, for speed
    code = code.replace('load_dataset("ptb")', f"load_dataset({str(corpus)!r})")
    exec(compile(code, "README.md", "exec"), {"__name__": "readme_example"})
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 2
    assert all(re.fullmatch(r"epoch \d: valid perplexity [\d.]+", line) for line in printed), printed


class WholeStreamUniform:
    """A model of the whole-stream seam only: no ``reset``, no ``score``."""

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size

    def score_stream(self, stream: Chunk) -> ChunkScores:
        log_prob = -math.log(self.vocab_size)
        wanted = stream.distribution_mask
        rows = None if wanted is None else np.full((int(wanted.sum()), self.vocab_size), log_prob)
        return ChunkScores(np.full(stream.targets.shape, log_prob), rows)


def test_a_whole_stream_model_object_is_evaluated_and_audited(corpus: Path) -> None:
    dataset = load_dataset(str(corpus))
    (result,) = evaluate_model(WholeStreamUniform(len(dataset.vocab)), dataset, splits="test")
    assert result.record.model == "test_api:WholeStreamUniform"
    assert result.perplexity == pytest.approx(len(dataset.vocab))
    assert result.record.audit["passed"] and result.record.causality_audit["passed"]
    assert result.record.plugin_process == "harness"  # a model object: scored in this process, not ranked


#: The fields (``outer.inner`` within an object) in which the result files of one request, made
#: once by the command line and once by :func:`evaluate_model`, may differ: when each was written
#: and how long its passes took. Everything else, the audits' draws and figures included (their
#: secret seed fixed for the test), is the same.
DIFFERING_FIELDS = ("created", "runtime_seconds", "tokens_per_second", "causality_audit.seconds")


def flattened(record: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``record``'s values by their dotted paths (``causality_audit.seconds``), objects opened."""
    values: dict[str, Any] = {}
    for key, value in record.items():
        if isinstance(value, dict):
            values.update(flattened(value, f"{prefix}{key}."))
        else:
            values[f"{prefix}{key}"] = value
    return values


@pytest.mark.parametrize(
    "options, keywords",
    [([], {}), (["--in-process"], {"in_process": True})],
    ids=["worker processes", "in process"],
)
def test_the_command_line_and_the_api_write_identical_results_for_one_request(
    corpus: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    options: list[str],
    keywords: dict[str, Any],
) -> None:
    monkeypatch.setattr(evaluate_module, "secrets", SimpleNamespace(randbits=lambda bits: 12345))
    protocol = ["--batch-size", "2", "--bptt", "5", "--audit", "4", "--causality-audit", "40"]
    arguments = ["--split", "valid", "test", "--model-args", "order=3", *protocol, *options]
    command_line_results(tmp_path / "cli", "kneser_ney", corpus, *arguments)
    evaluate_model(
        "kneser_ney",
        corpus,
        splits=("valid", "test"),
        model_args={"order": 3},
        batch_size=2,
        bptt=5,
        audit=4,
        causality_audit=40,
        output_dir=tmp_path / "api",
        **keywords,
    )
    names = sorted(path.name for path in (tmp_path / "cli").iterdir())
    assert names == sorted(path.name for path in (tmp_path / "api").iterdir())
    assert len(names) == 4  # a record and a per-token file for each split
    for name in names:
        cli, api = tmp_path / "cli" / name, tmp_path / "api" / name
        if name.endswith(".npy"):
            assert cli.read_bytes() == api.read_bytes()
            continue
        records = [flattened(json.loads(path.read_text())) for path in (cli, api)]
        assert list(records[0]) == list(records[1])  # the same fields, in the same order
        assert {field: value for field, value in records[0].items() if field not in DIFFERING_FIELDS} == {
            field: value for field, value in records[1].items() if field not in DIFFERING_FIELDS
        }
        assert records[0]["model_args.order"] == 3 and records[0]["causality_audit.passed"]
