"""Every tool checks its output paths before any work, and its errors are one line (issue 17).

A read-only directory is made with ``chmod 555``. Root ignores permission bits, so under root
the fixture also makes ``os.access`` answer for that directory as it would for anyone else; the
tools ask ``os.access`` before they start, which is what these tests check.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import assert_one_line_error, write_corpus
from test_leaderboard import make_result

from baselines import checkpoint as checkpoints
from baselines.cli import main as baselines_main
from harness import scoring
from harness.cli import main as harness_main
from leaderboard.cli import main as leaderboard_main
from wikitext_builder.cli import main as builder_main
from wikitext_toolkit_core.cli import UsageError, check_output_dir, check_output_file

# ---- harness -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "option, name", [("--output", "r.json"), ("--save-token-logprobs", "lp.npy"), ("--output-dir", "out")]
)
def test_eval_refuses_a_read_only_output_before_scoring(
    corpus: Path, read_only: Path, option: str, name: str, capsys: pytest.CaptureFixture
) -> None:
    target = read_only / name
    assert (
        harness_main(["eval", "unigram", "--dataset", str(corpus), "--split", "test", option, str(target)])
        == 2
    )
    assert_one_line_error(capsys, f"{option} {target}: cannot write in {read_only} (permission denied)")
    assert not target.exists()


def test_eval_refuses_to_overwrite_its_input(corpus: Path, capsys: pytest.CaptureFixture) -> None:
    valid = corpus / "wiki.valid.tokens"
    before = valid.read_bytes()
    assert (
        harness_main(["eval", "unigram", "--dataset", str(corpus), "--split", "test", "--output", str(valid)])
        == 2
    )
    assert_one_line_error(
        capsys, f"--output {valid}: is an input of this command", "refusing to overwrite it"
    )
    assert valid.read_bytes() == before


def test_eval_refuses_one_file_for_the_record_and_the_log_probabilities(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    target = tmp_path / "out"
    arguments = [
        "--split",
        "test",
        "--output",
        str(target),
        "--save-token-logprobs",
        str(tmp_path / "." / "out"),
    ]
    assert harness_main(["eval", "unigram", "--dataset", str(corpus), *arguments]) == 2
    assert_one_line_error(capsys, "--output and --save-token-logprobs name the same file")
    assert not target.exists()


@pytest.mark.parametrize("option, name", [("--output", "r.json"), ("--save-token-logprobs", "lp.npy")])
def test_eval_refuses_a_single_file_output_with_an_output_dir(
    corpus: Path, tmp_path: Path, option: str, name: str, capsys: pytest.CaptureFixture
) -> None:
    arguments = ["--split", "test", "--output-dir", str(tmp_path / "out"), option, str(tmp_path / name)]
    assert harness_main(["eval", "unigram", "--dataset", str(corpus), *arguments]) == 2
    assert_one_line_error(capsys, f"--output-dir names its own files; it does not go with {option}")
    assert not (tmp_path / "out").exists() and not (tmp_path / name).exists()


def test_eval_refuses_two_datasets_an_output_dir_would_write_to_one_file(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    first, second = write_corpus(tmp_path / "a" / "corpus"), write_corpus(tmp_path / "b" / "corpus")
    out = tmp_path / "out"
    for datasets in ([first, second], [first, first]):
        arguments = ["--dataset", *map(str, datasets), "--split", "valid", "--output-dir", str(out)]
        assert harness_main(["eval", "unigram", *arguments]) == 2
        assert_one_line_error(
            capsys,
            f"--dataset {datasets[0]} and {datasets[1]} are both named corpus: both would be written to "
            f"{out / 'harness.plugins.unigram.corpus.valid.json'}",
        )
        assert not out.exists()


def test_eval_output_that_is_a_directory_is_refused_and_leaves_nothing(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    directory = tmp_path / "results"
    directory.mkdir()
    assert (
        harness_main(
            ["eval", "unigram", "--dataset", str(corpus), "--split", "test", "--output", str(directory)]
        )
        == 2
    )
    assert_one_line_error(capsys, f"--output {directory}: is a directory; name a file")
    assert not [path for path in tmp_path.rglob("*") if ".tmp" in path.name]
    assert list(directory.iterdir()) == []


def test_eval_prints_the_result_before_writing_it(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    def disk_full(path: Path, write: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(scoring, "write_atomically", disk_full)
    assert (
        harness_main(
            [
                "eval",
                "unigram",
                "--dataset",
                str(corpus),
                "--split",
                "test",
                "--output",
                str(tmp_path / "r.json"),
            ]
        )
        == 2
    )
    captured = capsys.readouterr()
    assert "harness.plugins.unigram on toy/test: perplexity" in captured.out
    assert captured.err.splitlines()[-1].startswith("error: No space left on device")


def test_empty_split_is_one_line_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    corpus = write_corpus(tmp_path / "empty-test", test="")
    assert harness_main(["eval", "unigram", "--dataset", str(corpus)]) == 2
    assert_one_line_error(capsys, f"{corpus / 'wiki.test.tokens'}: the test split is empty (no tokens)")


def test_tampered_builder_corpus_says_how_to_recover(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    corpus = write_corpus(tmp_path / "built")
    builder_sums = "".join(f"{'0' * 64}  wiki.{split}.tokens\n" for split in ("train", "valid", "test"))
    (corpus / "SHA256SUMS").write_text(builder_sums)
    assert harness_main(["eval", "unigram", "--dataset", str(corpus)]) == 2
    error = assert_one_line_error(capsys, "sha256 mismatch", "SHA256SUMS", "wikitext_builder")
    assert "download" not in error


def test_read_only_cache_is_one_line(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    not_a_directory = tmp_path / "cache-file"
    not_a_directory.write_text("")
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(not_a_directory))
    assert harness_main(["download", "wikitext-103"]) == 2
    assert_one_line_error(
        capsys, f"cannot write the download cache {not_a_directory / 'data'}", "HARNESS_CACHE_DIR"
    )
    # Evaluating still works: the token cache is only an optimisation.
    assert harness_main(["eval", "unigram", "--dataset", str(corpus)]) == 0
    assert "perplexity" in capsys.readouterr().out


# ---- baselines -----------------------------------------------------------------------------------


def test_train_refuses_a_read_only_run_directory(
    corpus: Path, read_only: Path, capsys: pytest.CaptureFixture
) -> None:
    run = read_only / "run"
    assert (
        baselines_main(
            [
                "train",
                "zoneout_lstm",
                "--dataset",
                str(corpus),
                "--preset",
                "tiny",
                "--max-steps",
                "1",
                "--device",
                "cpu",
                "--output-dir",
                str(run),
            ]
        )
        == 2
    )
    assert_one_line_error(capsys, f"--output-dir {run}: cannot write in {read_only}")


@pytest.mark.parametrize("option", ["--save-gates", "--save-attention"])
def test_analyze_refuses_a_read_only_output_first(
    corpus: Path, read_only: Path, option: str, capsys: pytest.CaptureFixture
) -> None:
    target = read_only / "out"
    assert (
        baselines_main(
            ["analyze", "pointer_sentinel", "--dataset", str(corpus), "--device", "cpu", option, str(target)]
        )
        == 2
    )
    assert_one_line_error(capsys, f"{option} {target}: cannot write in {read_only}")


def test_tune_refuses_a_read_only_output_first(
    corpus: Path, read_only: Path, capsys: pytest.CaptureFixture
) -> None:
    target = read_only / "tuned.json"
    assert baselines_main(["tune", "--dataset", str(corpus), "--device", "cpu", "--output", str(target)]) == 2
    assert_one_line_error(capsys, f"--output {target}: cannot write in {read_only}")


def test_package_refuses_a_read_only_package_directory(
    tmp_path: Path, read_only: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(checkpoints, "PACKAGED", read_only)
    checkpoint = tmp_path / "best.pt"
    checkpoint.write_bytes(b"not read before the outputs are checked")
    assert baselines_main(["package", str(checkpoint), "--dataset", "ptb"]) == 2
    assert_one_line_error(capsys, f"cannot write in {read_only}")


# ---- leaderboard ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["build", "RESULTS", "--output-dir", "OUT"],
        ["regenerate", "--results", "RESULTS", "--output-dir", "OUT"],
        ["plot", "bars", "RESULTS", "--dataset", "ptb", "--output", "OUT"],
    ],
)
def test_leaderboard_refuses_a_read_only_output_first(
    tmp_path: Path, read_only: Path, command: list[str], capsys: pytest.CaptureFixture
) -> None:
    make_result(tmp_path / "results", "m.test", ppl=100.0)
    target = read_only / "out"
    arguments = [{"RESULTS": str(tmp_path / "results"), "OUT": str(target)}.get(a, a) for a in command]
    assert leaderboard_main(arguments) == 2
    assert_one_line_error(capsys, f"{target}: cannot write in {read_only}")


def test_regenerate_says_unchanged_when_nothing_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.chdir(tmp_path)
    make_result(tmp_path / "results", "m.test", ppl=100.0)
    readme = tmp_path / "README.md"
    readme.write_text("<!-- leaderboard:ptb:begin -->\nold\n<!-- leaderboard:ptb:end -->\n")
    assert leaderboard_main(["regenerate", "--readme", "README.md"]) == 0
    first = capsys.readouterr().out
    assert "README.md: updated ptb" in first and "unchanged" not in first.splitlines()[-1]
    written = readme.stat().st_mtime_ns
    assert leaderboard_main(["regenerate", "--readme", "README.md"]) == 0
    second = capsys.readouterr().out
    assert "all unchanged" in second and "README.md: unchanged ptb" in second
    assert "updated" not in second and readme.stat().st_mtime_ns == written


def test_regenerate_reads_only_the_tables_it_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.chdir(tmp_path)
    make_result(tmp_path / "results", "m.test", ppl=100.0)
    tables = tmp_path / "leaderboard" / "tables"
    tables.mkdir(parents=True)
    (tables / "notes.bin").write_bytes(b"not a table")
    read: list[Path] = []
    real_read_bytes = Path.read_bytes

    def read_bytes(path: Path) -> bytes:
        read.append(path)
        return real_read_bytes(path)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    assert leaderboard_main(["regenerate"]) == 0
    assert "changed" in capsys.readouterr().out
    assert read and all(path.suffix in (".csv", ".md") for path in read)
    read.clear()
    assert leaderboard_main(["build", "results", "--output-dir", str(tables)]) == 0
    assert read == []  # build reports no changes, so it reads nothing back


def test_a_malformed_packaged_reported_csv_is_not_blamed_on_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from leaderboard import table

    bad = tmp_path / "reported.csv"
    bad.write_text("dataset,model\nptb,x\n")
    make_result(tmp_path / "results", "m.test", ppl=100.0)
    monkeypatch.setattr(table, "REPORTED_CSV", bad)
    arguments = ["--results", str(tmp_path / "results"), "--output-dir", str(tmp_path / "out")]
    assert leaderboard_main(["regenerate", *arguments]) == 2
    error = assert_one_line_error(capsys, str(bad))
    assert "--reported" not in error
    arguments = [str(tmp_path / "results"), "--output-dir", str(tmp_path / "out"), "--reported", str(bad)]
    assert leaderboard_main(["build", *arguments]) == 2
    assert_one_line_error(capsys, f"--reported: {bad}")


@pytest.mark.parametrize("figure", ["bars", "gates", "curves", "zipf", "frequency"])
def test_plots_refuse_an_output_format_matplotlib_cannot_write(
    tmp_path: Path, figure: str, capsys: pytest.CaptureFixture
) -> None:
    inputs = {
        "bars": ["R"],
        "gates": ["g.npy"],
        "curves": ["log.jsonl"],
        "zipf": ["ptb"],
        "frequency": ["a", "b"],
    }
    target = tmp_path / "x.foo"
    assert leaderboard_main(["plot", figure, *inputs[figure], "--output", str(target)]) == 2
    assert_one_line_error(
        capsys, f"argument --output: {target}: matplotlib cannot write .foo figures", ".png"
    )
    assert not target.exists()


def test_compare_needs_enough_samples_for_its_interval(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    paths = []
    for name, shift in (("a", 0.0), ("b", 0.1)):
        values = np.random.default_rng(0).normal(-4.0 - shift, 1.0, 500)
        paths.append(
            make_result(
                tmp_path / "results",
                f"{name}.test",
                model=f"model.{name}",
                ppl=float(np.exp(-values.mean())),
                tokens=len(values),
            )
        )
        np.save(tmp_path / "results" / f"{name}.test.logprobs.npy", values)
    a, b = map(str, paths)
    assert leaderboard_main(["compare", a, b, "--samples", "1"]) == 2
    assert_one_line_error(capsys, "--samples 1 is too few for a 95% interval: at least 200")
    assert leaderboard_main(["compare", a, b, "--samples", "500", "--confidence", "0.99"]) == 2
    assert_one_line_error(capsys, "at least 1,000")
    assert leaderboard_main(["compare", a, b, "--samples", "200"]) == 0
    capsys.readouterr()
    assert leaderboard_main(["compare", a, b, "--samples", "200", "--block-length", "501"]) == 2
    assert_one_line_error(capsys, "block length must be between 1 and the number of tokens (500)")


def test_zipf_does_not_ask_for_the_data_dir_it_was_given(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    assert (
        leaderboard_main(
            ["plot", "zipf", "wikitext-103", "--data-dir", str(data), "--output", str(tmp_path / "z.png")]
        )
        == 2
    )
    error = assert_one_line_error(capsys, "wikitext-103: not found")
    assert "pass --data-dir" not in error
    assert leaderboard_main(["plot", "zipf", "wikitext-103", "--output", str(tmp_path / "z.png")]) == 2
    assert_one_line_error(capsys, "(pass --data-dir DIR)")


# ---- builder -------------------------------------------------------------------------------------


def test_builder_refuses_a_read_only_output_directory(
    tmp_path: Path, read_only: Path, capsys: pytest.CaptureFixture
) -> None:
    folder = tmp_path / "articles"
    folder.mkdir()
    for name in ("Alpha", "Beta", "Gamma"):
        (folder / f"{name}.wikitext").write_text(f"'''{name}''' is a town. It has a river.\n")
    out = read_only / "corpus"
    assert (
        builder_main(
            [
                "--folder",
                str(folder),
                "--output-dir",
                str(out),
                "--quiet",
                "--valid-articles",
                "1",
                "--test-articles",
                "1",
            ]
        )
        == 2
    )
    assert_one_line_error(capsys, f"--output-dir {out}: cannot write in {read_only} (permission denied)")


# ---- the shared checks ---------------------------------------------------------------------------


def test_output_checks(tmp_path: Path, read_only: Path) -> None:
    assert (
        check_output_file(tmp_path / "new" / "deeper" / "r.json", "--output")
        == tmp_path / "new" / "deeper" / "r.json"
    )
    assert check_output_dir(tmp_path / "new-dir", "--output-dir") == tmp_path / "new-dir"
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="is a file; name a directory"):
        check_output_dir(tmp_path / "file", "--output-dir")
    with pytest.raises(UsageError, match=f"{tmp_path / 'file'} is not a directory"):
        check_output_file(tmp_path / "file" / "r.json", "--output")
    with pytest.raises(UsageError, match="cannot write in"):
        check_output_file(read_only / "a" / "b.json", "--output")
