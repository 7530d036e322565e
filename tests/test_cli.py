from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, write_corpus

from harness import cli
from harness.cli import main
from wikitext_toolkit_core.benchmarks import PACKAGED_DATA
from wikitext_toolkit_core.catalogue import BENCHMARKS, Benchmark
from wikitext_toolkit_core.format import SPLITS

REQUIRED_FIELDS = {
    "model",
    "model_args",
    "checkpoint",
    "dataset",
    "split",
    "dataset_sha256",
    "tokens",
    "nll",
    "perplexity",
    "bits_per_token",
    "protocol",
    "num_parameters",
    "runtime_seconds",
    "tokens_per_second",
    "device",
    "torch_version",
    "package_version",
    "git_commit",
    "created",
}


def test_eval_writes_the_result_record_and_token_log_probs(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    output, log_probs = tmp_path / "r.json", tmp_path / "lp.npy"
    assert (
        main(
            [
                "eval",
                "kneser_ney",
                "--dataset",
                str(corpus),
                "--split",
                "test",
                "--model-args",
                "order=3",
                "--batch-size",
                "2",
                "--bptt",
                "4",
                "--output",
                str(output),
                "--save-token-logprobs",
                str(log_probs),
            ]
        )
        == 0
    )
    record = json.loads(output.read_text())
    assert REQUIRED_FIELDS <= record.keys()
    assert record["model"] == "baselines.kneser_ney" and record["model_args"] == {"order": 3}
    assert record["protocol"] == {"batch_size": 2, "bptt": 4, "name": "stream"}
    assert record["dataset"] == "toy" and record["split"] == "test" and record["audit"]["checked"] == 8
    saved = np.load(log_probs)
    assert len(saved) == record["tokens"] and -saved.mean() == pytest.approx(record["nll"])
    assert record["perplexity"] == pytest.approx(np.exp(record["nll"]))
    line = capsys.readouterr().out.strip()
    assert re.fullmatch(r"baselines\.kneser_ney on toy/test: perplexity [\d.]+ \(.* tokens/s\)", line)


def test_output_dir_holds_one_record_per_evaluation(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert (
        main(
            [
                "eval",
                "unigram",
                "--dataset",
                str(corpus),
                "--split",
                "valid",
                "test",
                "--output-dir",
                str(tmp_path / "out"),
            ]
        )
        == 0
    )
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == [
        "harness.plugins.unigram.toy.test.json",
        "harness.plugins.unigram.toy.test.logprobs.npy",
        "harness.plugins.unigram.toy.valid.json",
        "harness.plugins.unigram.toy.valid.logprobs.npy",
    ]
    table = capsys.readouterr().out
    assert "toy              valid" in table and "toy              test" in table
    # Runs with other model arguments get their own files instead of overwriting these.
    assert (
        main(
            [
                "eval",
                "kneser_ney",
                "--dataset",
                str(corpus),
                "--split",
                "valid",
                "--model-args",
                "order=3",
                "--output-dir",
                str(tmp_path / "out"),
            ]
        )
        == 0
    )
    assert (tmp_path / "out" / "baselines.kneser_ney+order=3.toy.valid.json").is_file()


def test_model_arguments_name_one_flat_file_in_the_output_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "any_args.py").write_text(
        "from harness.plugins import unigram\n\n\n"
        "def load_model(dataset, *, device, checkpoint, **model_args):\n"
        "    return unigram.load_model(dataset, device=device, checkpoint=checkpoint)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    corpus = write_corpus(tmp_path / "work" / "toy")
    out = tmp_path / "work" / "out"
    for value in ("x/../../escaped", "/models/gpt2", "..%2Fescaped%2Fgpt2"):
        arguments = ["--split", "valid", "--model-args", f"model={value}", "--output-dir", str(out)]
        assert main(["eval", "any_args", "--dataset", str(corpus), "--causality-audit", "0", *arguments]) == 0
    assert sorted(path.name for path in (tmp_path / "work").iterdir()) == ["out", "toy"]
    assert sorted(path.name for path in out.glob("*.json")) == [
        "any_args+model=%2Fmodels%2Fgpt2.toy.valid.json",
        "any_args+model=..%252Fescaped%252Fgpt2.toy.valid.json",
        "any_args+model=x%2F..%2F..%2Fescaped.toy.valid.json",
    ]
    assert all(path.is_file() for path in out.iterdir()) and len(list(out.iterdir())) == 6


@pytest.mark.parametrize(
    "arguments, message",
    [
        (
            ["--split", "valid", "test", "--output", "x.json"],
            "--output and --save-token-logprobs take one dataset",
        ),
        (
            ["--save-token-logprobs", "x.npy"],  # the default --split: valid and test
            "error: --output and --save-token-logprobs take one dataset and one split (the default "
            "--split is valid and test); name one with --split, or use --output-dir for several",
        ),
        (["--model-args", "order"], "'order' is not key=value"),
        (["--bptt", "0"], "argument --bptt: must be at least 1, got 0"),
    ],
)
def test_usage_errors_are_one_line(
    corpus: Path, capsys: pytest.CaptureFixture, arguments: list[str], message: str
) -> None:
    assert main(["eval", "unigram", "--dataset", str(corpus), *arguments]) == 2
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1


def test_the_default_splits_are_valid_then_test(corpus: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["eval", "unigram", "--dataset", str(corpus)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines[:2]] == [
        "harness.plugins.unigram on toy/valid",
        "harness.plugins.unigram on toy/test",
    ]
    assert [line.split()[:2] for line in lines[-2:]] == [["toy", "valid"], ["toy", "test"]]  # the table


def test_one_output_file_for_two_datasets_says_to_name_one(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    datasets = [str(write_corpus(tmp_path / name)) for name in ("toy-a", "toy-b")]
    output = ["--split", "test", "--output", str(tmp_path / "r.json")]
    assert main(["eval", "unigram", "--dataset", *datasets, *output]) == 2
    assert capsys.readouterr().err == (
        "error: --output and --save-token-logprobs take one dataset and one split (the default "
        "--split is valid and test); name one with --dataset, or use --output-dir for several\n"
    )


def test_without_dataset_every_servable_local_benchmark_is_evaluated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    for name in ("toy-a", "toy-b", "toy-missing"):
        monkeypatch.setitem(
            BENCHMARKS,
            name,
            Benchmark(name, {s: f"wiki.{s}.tokens" for s in SPLITS}, {}, (), "test"),
        )
    monkeypatch.setattr(cli, "PAPER_BENCHMARKS", ("toy-a", "toy-b", "toy-missing"))
    write_corpus(tmp_path / "data" / "toy-a")
    write_corpus(tmp_path / "data" / "toy-b")
    (tmp_path / "picky.py").write_text(
        "from harness import ModelUnavailable\n"
        "from harness.plugins.unigram import load_model as unigram\n"
        "def load_model(dataset, *, device, checkpoint):\n"
        "    if dataset.name == 'toy-b':\n"
        "        raise ModelUnavailable('no checkpoint; run `train toy-b` first')\n"
        "    return unigram(dataset, device=device, checkpoint=checkpoint)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["eval", "picky", "--split", "test", "--data-dir", str(tmp_path / "data")]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("picky on toy-a/test: perplexity")
    assert "toy-b: no checkpoint; run `train toy-b` first" in captured.err
    assert "toy-missing: not found locally; `python -m harness download toy-missing`" in captured.err


def test_each_dataset_is_encoded_just_before_its_model_is_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    # toy-b's empty test split is found when its turn comes, after toy-a was evaluated, not by
    # encoding every split of every dataset before the first model loads.
    write_corpus(tmp_path / "toy-a")
    write_corpus(tmp_path / "toy-b", test="")
    arguments = [
        "eval",
        "unigram",
        "--dataset",
        str(tmp_path / "toy-a"),
        str(tmp_path / "toy-b"),
        "--split",
        "test",
    ]
    assert main(arguments) == 2
    captured = capsys.readouterr()
    assert captured.out.startswith("harness.plugins.unigram on toy-a/test: perplexity")
    audited, error = captured.err.splitlines()  # toy-a's audits passed, then toy-b's error
    assert audited.startswith("toy-a/test: audited: ")
    assert error == (
        f"error: {tmp_path / 'toy-b' / 'wiki.test.tokens'}: the test split is empty (no tokens): "
        "nothing to score"
    )


def test_readme_example_plugin_runs_and_passes_the_audit(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    readme = (REPO / "README.md").read_text()
    code = re.search(r"<!-- example-plugin -->\n```python\n(.*?)```", readme, re.S).group(1)
    assert len(code.splitlines()) <= 36
    (tmp_path / "my_cache_model.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    output = tmp_path / "r.json"
    assert (
        main(
            [
                "eval",
                "my_cache_model",
                "--dataset",
                str(corpus),
                "--split",
                "test",
                "--model-args",
                "weight=0.2",
                "--batch-size",
                "3",
                "--bptt",
                "4",
                "--audit",
                "20",
                "--output",
                str(output),
            ]
        )
        == 0
    )
    record = json.loads(output.read_text())
    assert record["audit"]["checked"] == 20 and record["audit"]["max_sum_error"] < 1e-9


def test_readme_whole_stream_example_gives_the_chunk_examples_figures(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's two cache models are one model: the whole-stream one scores every stream
    as the chunk one does, and passes both audits."""
    readme = (REPO / "README.md").read_text()
    for name, marker in (("chunked_cache", "example-plugin"), ("whole_cache", "example-whole-stream-plugin")):
        code = re.search(rf"<!-- {marker} -->\n```python\n(.*?)```", readme, re.S).group(1)
        (tmp_path / f"{name}.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    records = {}
    for name in ("chunked_cache", "whole_cache"):
        output = tmp_path / f"{name}.json"
        arguments = [
            "eval",
            name,
            "--dataset",
            str(corpus),
            "--split",
            "test",
            "--model-args",
            "weight=0.2,window=5",
        ]
        assert main([*arguments, "--batch-size", "2", "--audit", "20", "--output", str(output)]) == 0
        records[name] = json.loads(output.read_text())
    chunked, whole = records["chunked_cache"], records["whole_cache"]
    assert whole["perplexity"] == pytest.approx(chunked["perplexity"], rel=1e-12)
    assert whole["audited"] and whole["audit"]["checked"] == 20 and whole["causality_audit"]["passed"]


def test_list_shows_datasets_and_plugins(capsys: pytest.CaptureFixture) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "wikitext-103      downloadable (about 181 MB)" in out
    assert "cite: Merity et al. 2016, Pointer Sentinel Mixture Models" in out
    assert "cite: Mikolov et al. 2010" in out
    assert "kneser_ney        baselines.kneser_ney" in out


def test_must_show_command_kn5_on_ptb(tmp_path: Path) -> None:
    """The issue's acceptance command, run as a user would (on the packaged PTB)."""
    output = tmp_path / "kn5.json"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "eval",
            "baselines.kneser_ney",
            "--dataset",
            "ptb",
            "--split",
            "test",
            "--output",
            str(output),
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    record = json.loads(output.read_text())
    assert record["tokens"] == 82_430 and record["dataset_verified"]
    assert abs(record["perplexity"] - 141.2) / 141.2 < 0.02
    assert f"perplexity {record['perplexity']:.2f}" in completed.stdout


def test_download_command_verifies_present_benchmarks(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    for split in SPLITS:
        (tmp_path / "ptb").mkdir(exist_ok=True)
        (tmp_path / "ptb" / f"ptb.{split}.txt").write_text(" not the real ptb \n")
    assert main(["download", "ptb", "--data-dir", str(tmp_path)]) == 2
    assert "ptb.train.txt: sha256 mismatch" in capsys.readouterr().err
    assert main(["download", "nope"]) == 2
    assert "unknown benchmark 'nope'" in capsys.readouterr().err


def test_download_command_verifies_the_packaged_benchmarks(capsys: pytest.CaptureFixture) -> None:
    assert main(["download", "ptb", "wikitext-2"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{name}: {PACKAGED_DATA / name} (checksums verified)" for name in ("ptb", "wikitext-2")
    ]


@pytest.mark.parametrize("mode", [[], ["--in-process"]], ids=["worker process", "in process"])
@pytest.mark.parametrize(
    "model_args, message",
    [
        ("order=0", "kneser_ney: order must be a positive integer, got 0"),
        ("order=five", "kneser_ney: order must be a positive integer, got 'five'"),
        ("order=3,smoothing=0.5", "kneser_ney: unknown model arg(s) smoothing (known: order)"),
    ],
)
def test_declared_model_args_are_one_line_errors_wherever_the_plugin_runs(
    corpus: Path, capsys: pytest.CaptureFixture, mode: list[str], model_args: str, message: str
) -> None:
    command = ["eval", "kneser_ney", "--dataset", str(corpus), "--model-args", model_args, *mode]
    assert main(command) == 2
    assert capsys.readouterr().err == f"error: {message}\n"
