"""``python -m leaderboard project``: the plateau fit, the projection from finished runs, the
backtest, and the refusals."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import pytest
from conftest import assert_one_line_error

from leaderboard.cli import main
from leaderboard.training_logs import (
    fit_plateau,
    hours_by_device,
    join_training_logs,
    last_epoch_pace,
    load_training_log,
    project_run,
)

REPO = Path(__file__).resolve().parents[1]
SPLITS = ("valid", "test")
#: The figures of a training-log record that the projection does not read.
UNREAD = {"train_ppl": 1.0, "tokens_per_second": 1.0}


def curve(plateau: float, scale: float, rate: float, epoch: int) -> float:
    """The perplexity of ``l(e) = log(plateau) + scale * exp(-rate * e)`` at ``epoch``."""
    return math.exp(math.log(plateau) + scale * math.exp(-rate * epoch))


def write_log(
    path: Path,
    plateau: float,
    epochs: int,
    *,
    rate: float = 0.3,
    halvings: Sequence[float] = (),
    device: str | None = "cpu",
) -> Path:
    """A training log whose first ``epochs`` epochs (learning rate 20) follow the curve exactly,
    then one epoch at each halved rate with the perplexity ``halvings`` gives."""
    records = []
    for epoch in range(1, epochs + 1):
        records.append((epoch, curve(plateau, 1.5, rate, epoch), 20.0))
    for number, value in enumerate(halvings, start=epochs + 1):
        records.append((number, value, 20.0 / 2 ** (number - epochs)))
    lines = []
    for epoch, value, learning_rate in records:
        record: dict[str, object] = {
            "epoch": epoch,
            "partial": False,
            **UNREAD,
            "valid_ppl": value,
            "learning_rate": learning_rate,
            "seconds": 3600,
            "total_seconds": 3600 * epoch,
            "best": True,
        }
        if device is not None:
            record["device"] = device
        lines.append(json.dumps(record) + "\n")
    path.write_text("".join(lines))
    return path


def test_the_fit_recovers_a_curve_it_was_drawn_from(tmp_path: Path) -> None:
    fit = fit_plateau(load_training_log(write_log(tmp_path / "a.jsonl", 90.0, 12, rate=0.25)), "a")
    assert fit.epochs == tuple(range(2, 13))  # floats equal to these
    assert fit.learning_rate == 20
    assert fit.plateau == pytest.approx(90.0, rel=1e-3)
    assert fit.rate == pytest.approx(0.25, rel=0.01)
    assert fit.rms_error < 1e-3


def test_the_fit_stops_at_the_first_learning_rate_and_skips_the_first_epoch(tmp_path: Path) -> None:
    log = write_log(tmp_path / "a.jsonl", 90.0, 8, halvings=[60.0, 55.0])
    frame = load_training_log(log)
    frame.loc[0, "valid_ppl"] = 5000.0  # a first epoch off the curve changes nothing
    fit = fit_plateau(frame, "a")
    assert fit.epochs == tuple(range(2, 9))
    assert fit.plateau == pytest.approx(90.0, rel=1e-3)
    assert fit_plateau(frame, "a", last_epoch=6).epochs == (2, 3, 4, 5, 6)


def test_a_warm_started_path_is_fitted_on_its_epochs_counted_on(tmp_path: Path) -> None:
    whole = load_training_log(write_log(tmp_path / "whole.jsonl", 90.0, 12))
    first, second = whole[whole["epoch"] <= 5], whole[whole["epoch"] > 5]
    second = second.assign(epoch=second["epoch"] - 5, epochs=second["epochs"] - 5)  # its own count
    joined = join_training_logs([first, second])
    assert fit_plateau(joined, "path") == fit_plateau(whole, "whole")


def test_the_projection_scales_the_plateau_by_each_reference_and_backtests_them(tmp_path: Path) -> None:
    run = load_training_log(write_log(tmp_path / "run.jsonl", 100.0, 10))
    first = load_training_log(write_log(tmp_path / "a.jsonl", 80.0, 14, halvings=[70.0, 64.0]))
    second = load_training_log(write_log(tmp_path / "b.jsonl", 90.0, 12, rate=0.2, halvings=[81.0]))
    projection = project_run(run, "run", {"a": first, "b": second})
    assert projection.fit.plateau == pytest.approx(100.0, rel=1e-3)
    by_name = {reference.name: reference for reference in projection.references}
    assert by_name["a"].best == 64.0 and by_name["b"].best == 81.0
    assert by_name["a"].fit.epochs == tuple(range(2, 11))  # the reference up to the run's epoch 10
    assert by_name["a"].run_fit == by_name["b"].run_fit == projection.fit  # both share all its epochs
    assert by_name["a"].projection == pytest.approx(100.0 * 64.0 / 80.0, rel=1e-3)
    assert by_name["b"].projection == pytest.approx(100.0 * 81.0 / 90.0, rel=1e-3)
    assert (by_name["a"].best_epoch, by_name["b"].best_epoch) == (16, 13)
    assert projection.epochs_trained == 10
    assert (projection.low, projection.high) == (by_name["a"].projection, by_name["b"].projection)
    (a_from_b, b_from_a) = projection.backtest
    assert (a_from_b.target, a_from_b.source) == ("a", "b")
    assert a_from_b.projection == pytest.approx(80.0 * 81.0 / 90.0, rel=1e-3)
    assert a_from_b.error == pytest.approx(80.0 * 0.9 / 64.0 - 1, rel=1e-3)
    assert b_from_a.projection == pytest.approx(90.0 * 0.8, rel=1e-3)


def test_records_with_and_without_their_version_read_line_by_line_in_one_log(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A log that a run resumed by newer code went on with: its first records as the trainer first
    wrote them (no ``schema_version``: version 1), the rest with their version. A line of a
    version this reader does not know, or that is no record, is one line naming file and line."""
    log = write_log(tmp_path / "a.jsonl", 90.0, 12)
    lines = log.read_text().splitlines(keepends=True)
    versioned = [json.dumps({"schema_version": 1, **json.loads(line)}) + "\n" for line in lines[6:]]
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("".join(lines[:6] + versioned))
    assert load_training_log(mixed).equals(load_training_log(log))
    first = json.loads(lines[0])
    mid_epoch = {**first, "partial": True, "step": 11, "steps_per_epoch": 10}
    cases = [
        ({**first, "schema_version": 2}, "schema_version 2 is not supported (this reader reads 1)"),
        ({"epoch": 7, "partial": False}, "missing keys train_ppl, valid_ppl, learning_rate"),
        ({**first, "seconds": "60"}, "seconds must be a number, got '60'"),
        ({**first, "best": 1}, "best must be true or false, got 1"),
        (mid_epoch, "step 11 is not within the epoch's steps_per_epoch 10"),
    ]
    damaged = tmp_path / "damaged.jsonl"
    for record, message in cases:
        damaged.write_text("".join(lines[:6]) + json.dumps(record) + "\n")
        assert main(["project", str(damaged), "--reference", str(log)]) == 2
        assert_one_line_error(capsys, f"{damaged}:7: not a training-log record ({message}")


def test_training_hours_by_device_count_each_record_from_the_one_before(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    records = [
        {
            "epoch": 1,
            "partial": False,
            **UNREAD,
            "valid_ppl": 300,
            "learning_rate": 20,
            "seconds": 60,
            "best": True,
            "total_seconds": 60,
            "device": "cuda",
        },
        {
            "epoch": 2,
            "partial": True,
            "step": 5,
            "steps_per_epoch": 10,
            **UNREAD,
            "valid_ppl": 250,
            "learning_rate": 20,
            "seconds": 60,
            "device": "cuda",
        },
        {
            "epoch": 2,
            "partial": False,
            **UNREAD,
            "valid_ppl": 200,
            "learning_rate": 20,
            "seconds": 3660,
            "best": True,
            "total_seconds": 3720,
            "device": "cpu",
        },
        {
            "epoch": 3,
            "partial": False,
            **UNREAD,
            "valid_ppl": 190,
            "learning_rate": 20,
            "seconds": 3600,
            "best": True,
            "total_seconds": 7320,
        },
    ]
    log.write_text("".join(json.dumps(record) + "\n" for record in records))
    frame = load_training_log(log)
    assert hours_by_device(frame) == pytest.approx({"cuda": 2 / 60, "cpu": 3600 / 3600, "unknown": 1.0})
    assert last_epoch_pace(frame) is None  # epoch 2 ran on two devices, epoch 3 on an unknown one
    frame.loc[3, "device"] = "cpu"
    assert last_epoch_pace(frame) == (1.0, "cpu")


def test_project_prints_the_projection_and_the_backtest(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    (tmp_path / "run").mkdir()
    run = write_log(tmp_path / "run" / "log.jsonl", 100.0, 10)
    first = write_log(tmp_path / "a.log.jsonl", 80.0, 14, halvings=[70.0, 64.0])
    second = write_log(tmp_path / "b.jsonl", 90.0, 12, rate=0.2, halvings=[81.0])
    assert main(["project", str(run), "--reference", str(first), "--reference", f"{second}=second"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("run: best validation perplexity so far ")
    assert "plateau at learning rate 20 100.0 (fitted on epochs 2-10" in out[0]
    assert out[1].startswith(
        "  from a: best 64.00, its plateau on epochs 2-10 80.0, best / plateau 0.800 -> 80.0"
    )
    assert out[2].endswith("best / plateau 0.900 -> 90.0")
    assert out[3] == "projected best validation perplexity: 80.0 - 90.0"
    assert out[4].startswith("  backtest: a from second: 72.0 against its 64.00 (+12.5%)")
    assert out[-2] == "training time so far (validation excluded): cpu 10.0 h"
    assert out[-1] == (
        "the references reached their best at epochs 13.0-16.0; the run has trained 10.0: 3.0-6.0 "
        "epochs more; at the run's last whole epoch's pace (1.00 h an epoch on cpu), 3-6 h more"
    )


def test_a_reference_that_left_its_first_rate_sooner_is_compared_on_the_epochs_they_share(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A reference halved after epoch 7, a run at its first rate to epoch 10: both plateaus come
    from epochs 2-7, where the run's later epochs (here off its curve) play no part; so does the
    backtest between that reference and one that shares all the run's epochs."""
    run_log = write_log(tmp_path / "run.jsonl", 100.0, 10)
    run = load_training_log(run_log)
    run.loc[run["epoch"] >= 8, "valid_ppl"] *= 0.9
    reference = load_training_log(write_log(tmp_path / "a.jsonl", 80.0, 7, halvings=[70.0, 64.0]))
    later = load_training_log(write_log(tmp_path / "b.jsonl", 90.0, 12, rate=0.2, halvings=[81.0]))
    later.loc[later["epoch"].between(8, 12), "valid_ppl"] *= 0.9  # off its curve after a's epoch 7
    projection = project_run(run, "run", {"a": reference, "b": later})
    shared, unshared = projection.references
    assert unshared.fit.epochs == tuple(range(2, 11)) and unshared.run_fit == projection.fit
    a_from_b, b_from_a = projection.backtest  # each on epochs 2-7, the ones a shares
    assert a_from_b.projection == pytest.approx(80.0 * 81.0 / 90.0, rel=1e-3)
    assert b_from_a.projection == pytest.approx(90.0 * 64.0 / 80.0, rel=1e-3)
    assert shared.fit.epochs == shared.run_fit.epochs == tuple(range(2, 8))
    assert projection.fit.epochs == tuple(range(2, 11)) and projection.fit.plateau < 99.0
    assert shared.run_fit.plateau == pytest.approx(100.0, rel=1e-3)
    assert shared.projection == pytest.approx(100.0 * 64.0 / 80.0, rel=1e-3)
    assert main(["project", str(run_log), "--reference", str(tmp_path / "a.jsonl")]) == 0
    assert capsys.readouterr().out.splitlines()[1] == (
        "  from a: best 64.00, its plateau on epochs 2-7 80.0, best / plateau 0.800; the run's plateau "
        "on those epochs 100.0 -> 80.0"
    )


def project_one_reference(tmp_path: Path) -> list[str]:
    """``leaderboard project`` arguments for a run (plateau 100) and one finished reference (80)."""
    run = write_log(tmp_path / "run.jsonl", 100.0, 10)
    reference = write_log(tmp_path / "a.jsonl", 80.0, 14, halvings=[70.0, 64.0])
    return ["project", str(run), "--reference", str(reference)]


def committed_results(model: str) -> dict[str, Path]:
    """The committed WikiText-2 result files of ``model``, by split."""
    return {
        split: REPO / "results" / "wikitext-2" / f"baselines.{model}.wikitext-2.{split}.json"
        for split in SPLITS
    }


def test_project_carries_the_projection_over_to_test_by_a_models_ratio(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    valid, test = committed_results("zoneout_lstm").values()
    valid_ppl, test_ppl = (json.loads(path.read_text())["perplexity"] for path in (valid, test))
    assert main([*project_one_reference(tmp_path), "--test-ratio", str(valid), str(test)]) == 0
    out = capsys.readouterr().out.splitlines()
    ratio = test_ppl / valid_ppl
    assert out[2] == "projected best validation perplexity: 80.0"
    assert out[3] == (
        f"projected test perplexity: {80.0 * ratio:.1f} (x {ratio:.3f}, the test / valid perplexity "
        f"of baselines.zoneout_lstm on wikitext-2: {test_ppl:.2f} / {valid_ppl:.2f})"
    )
    assert out[-1] == (
        "the references reached their best at epochs 16.0; the run has trained 10.0: 6.0 epochs "
        "more; at the run's last whole epoch's pace (1.00 h an epoch on cpu), 6 h more"
    )


def test_project_refuses_a_test_ratio_from_anything_but_one_models_valid_and_test(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    zoneout = {split: str(path) for split, path in committed_results("zoneout_lstm").items()}
    pointer_test = str(committed_results("pointer_sentinel")["test"])
    rescored_test = tmp_path / "rescored.test.json"
    record = json.loads(Path(zoneout["test"]).read_text())
    record["protocol"]["batch_size"] = 10
    rescored_test.write_text(json.dumps(record))
    cases = [
        ([zoneout["test"], zoneout["valid"]], "give a valid result, then a test result"),
        ([zoneout["valid"], pointer_test], "(they differ in model, checkpoint)"),
        ([zoneout["valid"], str(rescored_test)], "(they differ in protocol)"),
        ([zoneout["valid"], str(tmp_path / "missing.json")], "missing.json: no such file"),
    ]
    for paths, message in cases:
        assert main([*project_one_reference(tmp_path), "--test-ratio", *paths]) == 2
        assert_one_line_error(capsys, message)


def test_project_refuses_what_the_method_cannot_use(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run = write_log(tmp_path / "run.jsonl", 100.0, 10)
    unfinished = write_log(tmp_path / "unfinished.jsonl", 80.0, 14)
    early = write_log(tmp_path / "early.jsonl", 80.0, 4, halvings=[70.0])
    short = write_log(tmp_path / "short.jsonl", 100.0, 4)
    straight = tmp_path / "straight.jsonl"
    straight.write_text(
        "".join(
            json.dumps(
                {
                    "epoch": e,
                    "partial": False,
                    **UNREAD,
                    "valid_ppl": 300 - 10 * e,
                    "learning_rate": 20,
                    "seconds": 1,
                    "total_seconds": e,
                    "best": True,
                }
            )
            + "\n"
            for e in range(1, 10)
        )
    )
    finished = write_log(tmp_path / "finished.jsonl", 80.0, 14, halvings=[70.0])
    cases = [
        ([str(run), "--reference", str(unfinished)], "unfinished: never left its first learning rate"),
        (
            [str(run), "--reference", str(early)],
            "early: 3 epoch(s) at its first learning rate 20 from epoch 2 up to epoch 4; the plateau "
            "fit needs at least 4",
        ),
        (
            [str(short), "--reference", str(finished)],
            "short: 3 epoch(s) at its first learning rate 20 from epoch 2; the plateau fit needs at least 4",
        ),
        (
            [str(straight), "--reference", str(finished)],
            "straight: its curve over epochs 2-9 shows no plateau the fit can place",
        ),
        ([str(run), "--reference", f"{finished}=run"], "the label 'run' is taken"),
        ([str(tmp_path / "missing.jsonl"), "--reference", str(finished)], "missing.jsonl: cannot read"),
    ]
    for arguments, message in cases:
        assert main(["project", *arguments]) == 2
        assert_one_line_error(capsys, message)


def test_the_committed_ptb_runs_backtest_each_other_within_ten_percent(capsys: pytest.CaptureFixture) -> None:
    """The method on the project's own finished medium runs (results/ptb/training): each projected
    from the other, from their first 10 epochs (where the WikiText-2 runs stood when it was written)."""
    training = REPO / "results" / "ptb" / "training"
    zoneout = load_training_log(training / "zoneout_lstm-medium.log.jsonl")
    pointer = load_training_log(training / "pointer_sentinel-medium-scratch.log.jsonl")
    run = zoneout[zoneout["epoch"] <= 10]
    projection = project_run(run, "first 10 epochs", {"zoneout": zoneout, "pointer": pointer})
    assert {test.target for test in projection.backtest} == {"zoneout", "pointer"}
    assert all(abs(test.error) < 0.10 for test in projection.backtest)
