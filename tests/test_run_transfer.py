"""``baselines pack-run`` / ``unpack-run``: a run directory moved between machines in pieces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import write_corpus
from test_baselines_training import REPEATED, epoch_records, train, weights

from baselines import checkpoint as checkpoints
from baselines import transfer
from baselines.cli import _rounded_weights_note
from baselines.cli import main as baselines_main

SIZES = "embedding_size=32,hidden_size=32"


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    directory = write_corpus(tmp_path / "toy")
    (directory / "wiki.train.tokens").write_text(REPEATED * 6, encoding="utf-8")
    return directory


def train_steps(toy: Path, run: Path, steps: int, kind: str = "zoneout_lstm") -> None:
    assert train(toy, run, "--model-args", SIZES, "--max-steps", str(steps), kind=kind) == 0


def measured(run: Path) -> list[dict]:
    """The run's log records without their timings."""
    timings = ("tokens_per_second", "seconds", "total_seconds")
    return [{k: v for k, v in record.items() if k not in timings} for record in epoch_records(run)]


def pieces_bytes(manifest: Path) -> int:
    return sum(piece["bytes"] for piece in json.loads(manifest.read_text())["pieces"])


@pytest.mark.parametrize("kind", ["zoneout_lstm", "pointer_sentinel"])
def test_an_unpacked_run_resumes_exactly_like_the_run_left_in_place(toy, tmp_path, kind, capsys):
    train_steps(toy, tmp_path / "here", 5, kind)
    assert baselines_main(["pack-run", str(tmp_path / "here"), str(tmp_path / "wire"), "--name", "run"]) == 0
    manifest = tmp_path / "wire" / "run.manifest.json"
    capsys.readouterr()
    assert baselines_main(["unpack-run", str(manifest), str(tmp_path / "there")]) == 0
    assert "rounded" not in capsys.readouterr().err  # float32 is exact: nothing to check
    for name in (checkpoints.RESUME, checkpoints.BEST):
        here, there = checkpoints.load(tmp_path / "here" / name), checkpoints.load(tmp_path / "there" / name)
        assert here.keys() == there.keys()
        assert all(torch.equal(here["model"][key], there["model"][key]) for key in here["model"])
    train_steps(toy, tmp_path / "here", 14, kind)
    train_steps(toy, tmp_path / "there", 14, kind)
    here, there = weights(tmp_path / "here" / "checkpoint.pt"), weights(tmp_path / "there" / "checkpoint.pt")
    assert all(torch.equal(here[key], there[key]) for key in here)
    assert measured(tmp_path / "here") == measured(tmp_path / "there")


def test_float16_halves_the_tensors_keeps_them_close_and_keeps_shared_storage_shared(
    toy, tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(transfer, "SMALL_TENSOR", 1)  # every tensor travels as data
    train_steps(toy, tmp_path / "run", 5)
    full = transfer.pack_run(tmp_path / "run", tmp_path / "wire", "full")
    half = transfer.pack_run(tmp_path / "run", tmp_path / "wire", "half", precision="float16")
    assert pieces_bytes(half) < 0.7 * pieces_bytes(full)
    capsys.readouterr()
    assert baselines_main(["unpack-run", str(half), str(tmp_path / "rounded")]) == 0
    recorded = checkpoints.load(tmp_path / "run" / "best.pt")["valid_perplexity"]
    best = tmp_path / "rounded" / "best.pt"
    assert capsys.readouterr().err.splitlines()[-1] == (
        "note: the weights were packed in float16, so they are rounded; before resuming, check that its "
        f"best weights still score about the {recorded:.2f} the run recorded on valid (under its own "
        "autocast setting): python -m harness eval baselines.zoneout_lstm --dataset "
        f"DIRECTORY/{toy.name} --split valid --batch-size 10 --causality-audit 0 --checkpoint {best}"
    )
    original = checkpoints.load(tmp_path / "run" / "checkpoint.pt")["model"]
    rounded = checkpoints.load(tmp_path / "rounded" / "checkpoint.pt")["model"]
    for key in original:
        assert rounded[key].dtype == original[key].dtype
        torch.testing.assert_close(rounded[key], original[key], rtol=2**-11, atol=1e-7, msg=key)
    tied = ("core.embedding.weight", "core.decoder.weight")
    assert original[tied[0]].data_ptr() == original[tied[1]].data_ptr()
    assert rounded[tied[0]].data_ptr() == rounded[tied[1]].data_ptr()
    assert epoch_records(tmp_path / "rounded") == epoch_records(tmp_path / "run")


def test_pieces_are_bounded_and_a_damaged_piece_is_refused_before_anything_is_written(toy, tmp_path, capsys):
    train_steps(toy, tmp_path / "run", 3)
    wire = tmp_path / "wire"
    assert baselines_main(["pack-run", str(tmp_path / "run"), str(wire), "--piece-bytes", "5000"]) == 0
    manifest = json.loads((wire / "run.manifest.json").read_text())
    assert len(manifest["pieces"]) > 2
    assert all((wire / piece["file"]).stat().st_size <= 5000 for piece in manifest["pieces"])
    damaged = wire / manifest["pieces"][1]["file"]
    data = bytearray(damaged.read_bytes())
    data[17] ^= 1
    damaged.write_bytes(bytes(data))
    capsys.readouterr()
    assert baselines_main(["unpack-run", str(wire / "run.manifest.json"), str(tmp_path / "there")]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and "SHA-256" in error and damaged.name in error
    assert not (tmp_path / "there" / checkpoints.RESUME).exists()


def test_unpacking_onto_a_run_and_packing_over_a_manifest_are_refused(toy, tmp_path, capsys):
    train_steps(toy, tmp_path / "run", 3)
    wire = str(tmp_path / "wire")
    assert baselines_main(["pack-run", str(tmp_path / "run"), wire]) == 0
    capsys.readouterr()
    assert baselines_main(["pack-run", str(tmp_path / "run"), wire]) == 2
    assert "exists" in capsys.readouterr().err
    before = (tmp_path / "run" / checkpoints.RESUME).read_bytes()
    assert (
        baselines_main(["unpack-run", str(tmp_path / "wire" / "run.manifest.json"), str(tmp_path / "run")])
        == 2
    )
    assert "already holds a run" in capsys.readouterr().err
    assert (tmp_path / "run" / checkpoints.RESUME).read_bytes() == before
    assert baselines_main(["pack-run", str(tmp_path / "wire"), str(tmp_path / "other")]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_the_rounded_weights_note_names_a_benchmark_as_it_is_and_falls_back_without_a_record(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    options = {"kind": "pointer_sentinel", "eval_batch_size": 10}
    (run / "config.json").write_text(json.dumps({"options": {"options": options}, "dataset": "wikitext-2"}))
    generic = f"that {run / 'best.pt'} still scores about the validation perplexity the run recorded"
    assert _rounded_weights_note(run, "float16").endswith(generic)  # no best.pt: no figure to quote
    checkpoints.save(run / "best.pt", {"format": checkpoints.FORMAT, "valid_perplexity": 79.3412})
    note = _rounded_weights_note(run, "float16")
    assert "about the 79.34 the run recorded on valid" in note
    assert "eval baselines.pointer_sentinel --dataset wikitext-2 --split valid --batch-size 10" in note
    (run / "config.json").write_text("{")
    assert _rounded_weights_note(run, "float16").endswith(generic)


def test_a_leg_without_best_writes_none_until_it_beats_the_run_and_takes_the_one_left_behind(
    toy, tmp_path, capsys
):
    train_steps(toy, tmp_path / "home", 5)
    home_best = (tmp_path / "home" / "best.pt").read_bytes()
    with_best = transfer.pack_run(tmp_path / "home", tmp_path / "wire", "with", precision="float16")
    without = transfer.pack_run(tmp_path / "home", tmp_path / "wire", "without", "float16", with_best=False)
    assert json.loads(without.read_text())["texts"] == json.loads(with_best.read_text())["texts"]
    capsys.readouterr()
    assert baselines_main(["unpack-run", str(without), str(tmp_path / "leg")]) == 0
    err = capsys.readouterr().err
    assert "carries no best.pt" in err and "--best-from" in err and "rounded" not in err
    assert not (tmp_path / "leg" / "best.pt").exists()
    recorded = checkpoints.load(tmp_path / "home" / "best.pt")["valid_perplexity"]
    leg = checkpoints.load(tmp_path / "leg" / "checkpoint.pt")["training"]["progress"]
    assert leg["best_file_valid"] == recorded

    # the leg comes back without a new best: the best left behind is taken, the rest is the leg's
    assert baselines_main(["pack-run", str(tmp_path / "leg"), str(tmp_path / "back"), "--without-best"]) == 0
    capsys.readouterr()
    manifest = str(tmp_path / "back" / "leg.manifest.json")
    assert (
        baselines_main(
            ["unpack-run", manifest, str(tmp_path / "landed"), "--best-from", str(tmp_path / "home")]
        )
        == 0
    )
    assert "taken from" in capsys.readouterr().err
    assert (tmp_path / "landed" / "best.pt").read_bytes() == home_best
    landed = checkpoints.load(tmp_path / "landed" / "checkpoint.pt")["model"]
    left = checkpoints.load(tmp_path / "leg" / "checkpoint.pt")["model"]
    assert all(torch.equal(landed[key], left[key]) for key in left)

    # another run's best.pt is refused, and nothing is written
    train_steps(toy, tmp_path / "other", 3)
    assert (
        baselines_main(
            ["unpack-run", manifest, str(tmp_path / "wrong"), "--best-from", str(tmp_path / "other")]
        )
        == 2
    )
    assert "not the best.pt of this run" in capsys.readouterr().err
    assert not (tmp_path / "wrong" / "checkpoint.pt").exists()


def test_a_leg_that_beats_the_run_brings_its_own_best_back(toy, tmp_path, capsys):
    train_steps(toy, tmp_path / "home", 3)
    best, resume = (checkpoints.load(tmp_path / "home" / name) for name in ("best.pt", "checkpoint.pt"))
    best["valid_perplexity"] = resume["training"]["progress"]["best_file_valid"] = 1e6  # the leg beats it
    checkpoints.save(tmp_path / "home" / "best.pt", best)
    checkpoints.save(tmp_path / "home" / "checkpoint.pt", resume)
    without = transfer.pack_run(tmp_path / "home", tmp_path / "wire", "out", with_best=False)
    transfer.unpack_run(without, tmp_path / "leg")
    train_steps(toy, tmp_path / "leg", 5)
    new_best = checkpoints.load(tmp_path / "leg" / "best.pt")["valid_perplexity"]
    assert new_best < 1e6
    back = transfer.pack_run(tmp_path / "leg", tmp_path / "back", "back")
    capsys.readouterr()
    assert (
        baselines_main(
            ["unpack-run", str(back), str(tmp_path / "landed"), "--best-from", str(tmp_path / "home")]
        )
        == 0
    )
    assert "a new best" in capsys.readouterr().err
    assert checkpoints.load(tmp_path / "landed" / "best.pt")["valid_perplexity"] == new_best


def test_leaving_best_behind_records_a_best_newer_than_the_checkpoint(toy, tmp_path):
    train_steps(toy, tmp_path / "run", 3)
    best = checkpoints.load(tmp_path / "run" / "best.pt")
    best["valid_perplexity"] = 1.5  # as if a kill fell between writing best.pt and the checkpoint
    checkpoints.save(tmp_path / "run" / "best.pt", best)
    transfer.unpack_run(
        transfer.pack_run(tmp_path / "run", tmp_path / "wire", "run", with_best=False), tmp_path / "leg"
    )
    assert (
        checkpoints.load(tmp_path / "leg" / "checkpoint.pt")["training"]["progress"]["best_file_valid"] == 1.5
    )
