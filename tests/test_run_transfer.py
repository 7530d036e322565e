"""``baselines pack-run`` / ``unpack-run``: a run directory moved between machines in pieces."""

from __future__ import annotations

import hashlib
import json
import shutil
import tracemalloc
import zlib
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
    transfer.pack_run(tmp_path / "run", wire, "run", piece_bytes=5000)  # below the command's least
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


# ---- refusals: inputs that are not what they claim, outputs that would lose work ------------------


def write_small_run(run: Path) -> None:
    """A run directory that packs in an instant: checkpoints of one tensor (no training)."""
    payload = {
        "format": checkpoints.FORMAT,
        "model": {"weight": torch.arange(3000, dtype=torch.float32)},
        "training": {"progress": {"best_file_valid": 5.0}},
    }
    for name in (checkpoints.RESUME, checkpoints.BEST):
        checkpoints.save(run / name, payload)
    (run / checkpoints.LOG).write_text('{"epoch": 1}\n', encoding="utf-8")
    (run / "config.json").write_text("{}", encoding="utf-8")


@pytest.fixture
def small_pack(tmp_path: Path) -> Path:
    """The manifest of a small run packed in pieces of 2000 bytes."""
    write_small_run(tmp_path / "run")
    return transfer.pack_run(tmp_path / "run", tmp_path / "wire", "run", piece_bytes=2000)


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line that ``baselines ARGV`` refuses with (exit status 2)."""
    capsys.readouterr()
    assert baselines_main(argv) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and error.count("\n") == 1, error
    return error


def _edit(change):
    """A case of :data:`MALFORMED`: the manifest's JSON object changed by ``change``."""

    def edit(manifest: dict) -> str:
        change(manifest)
        return json.dumps(manifest)

    return edit


def _tensor(key: str, value: object):
    return _edit(lambda manifest: manifest["tensors"][0].__setitem__(key, value))


def _piece(key: str, value: object):
    return _edit(lambda manifest: manifest["pieces"][0].__setitem__(key, value))


def _set(key: str, value: object):
    return _edit(lambda manifest: manifest.__setitem__(key, value))


#: Manifests that are not what ``pack-run`` writes: each the manifest's new text, from its object.
MALFORMED = {
    "not JSON": lambda manifest: "{",
    "not UTF-8": lambda manifest: b"\xff\xfe\xfa{".decode("latin-1"),
    "nested too deep": lambda manifest: "[" * 100_000,
    "not an object": lambda manifest: "[]",
    "a missing key": _edit(lambda manifest: manifest.pop("pieces")),
    "another format": _set("format", "wikitext-toolkit/run-transfer/2"),
    "an unknown precision": _set("precision", "float8"),
    "a negative size": _set("skeleton_bytes", -1),
    "a size as text": _set("skeleton_bytes", "12"),
    "a size as a boolean": _set("skeleton_bytes", True),
    "a non-finite size": _set("skeleton_bytes", float("nan")),
    "an infinite size": _set("skeleton_bytes", float("inf")),
    "a digest that is not hex": _set("sha256", "z" * 64),
    "a short digest": _set("sha256", "ab"),
    "tensors not a list": _set("tensors", {}),
    "a tensor not an object": _set("tensors", [1]),
    "an unknown dtype": _tensor("stored", "load"),
    "a dtype alias": _tensor("dtype", "float"),
    "a dtype stored as another": _tensor("stored", "int8"),
    "a negative dimension": _tensor("shape", [-1, 3]),
    "a fractional dimension": _tensor("shape", [2.5]),
    "a huge shape": _tensor("shape", [10**12, 10**12]),
    "aliases not a list": _set("aliases", None),
    "an alias out of range": _edit(lambda manifest: manifest["aliases"].append(len(manifest["tensors"]))),
    "a negative alias": _edit(lambda manifest: manifest["aliases"].append(-1)),
    "no pieces": _set("pieces", []),
    "a piece not an object": _set("pieces", ["run.part00"]),
    "a piece in another directory": _piece("file", "../wire/run.part00"),
    "an absolute piece": _piece("file", "/etc/passwd"),
    "a piece named ..": _piece("file", ".."),
    "a piece named by a number": _piece("file", 7),
    "a duplicate piece": _edit(lambda manifest: manifest["pieces"].append(manifest["pieces"][0])),
    "a negative piece size": _piece("bytes", -5),
    "a piece larger than stated": _piece("bytes", 1999),
    "a piece digest in capitals": _edit(
        lambda manifest: manifest["pieces"][0].__setitem__("sha256", manifest["pieces"][0]["sha256"].upper())
    ),
    "texts not an object": _set("texts", "log"),
    "a text outside the run": _edit(lambda manifest: manifest["texts"].__setitem__("../evil", "")),
    "a text missing": _edit(lambda manifest: manifest["texts"].pop("config.json")),
    "a text that is not text": _edit(lambda manifest: manifest["texts"].__setitem__("config.json", 1)),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_a_malformed_manifest_is_one_line_and_nothing_is_written(small_pack, tmp_path, case, capsys):
    manifest = json.loads(small_pack.read_text())
    small_pack.write_text(MALFORMED[case](manifest), encoding="latin-1")
    error = refused(["unpack-run", str(small_pack), str(tmp_path / "there")], capsys)
    assert str(small_pack.parent) in error  # the manifest, or the piece it misstates
    assert not (tmp_path / "there").exists() or not any((tmp_path / "there").iterdir())


def _refused_with_peak_memory(manifest, run_dir, capsys):
    """``unpack-run manifest run_dir``'s one-line error, and the peak of Python's allocations
    meanwhile (bytes)."""
    tracemalloc.start()
    try:
        error = refused(["unpack-run", str(manifest), str(run_dir)], capsys)
        return error, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_huge_manifest_is_refused_without_reading_it(small_pack, tmp_path, capsys):
    with small_pack.open("a") as handle:
        handle.truncate(64 * 2**20)  # a sparse file: its size, not its bytes
    error, peak = _refused_with_peak_memory(small_pack, tmp_path / "there", capsys)
    assert "bytes" in error and str(small_pack) in error
    assert peak < 32 * 2**20


def test_a_piece_that_inflates_past_its_stated_size_is_refused_within_that_size(small_pack, tmp_path, capsys):
    """A compression bomb: pieces that check out (their digests rewritten) but inflate to 64 MB
    more than the manifest states are refused, having inflated no more than it states."""
    manifest = json.loads(small_pack.read_text())
    wire = small_pack.parent
    blob = b"".join((wire / piece["file"]).read_bytes() for piece in manifest["pieces"])
    bomb = zlib.compress(zlib.decompress(blob) + bytes(64 * 2**20), 9)
    (wire / "run.part00").write_bytes(bomb)
    digest = hashlib.sha256(bomb).hexdigest()
    manifest["pieces"] = [{"file": "run.part00", "bytes": len(bomb), "sha256": digest}]
    manifest["sha256"] = digest
    small_pack.write_text(json.dumps(manifest))
    error, peak = _refused_with_peak_memory(small_pack, tmp_path / "there", capsys)
    assert "inflate" in error
    assert peak < 16 * 2**20
    assert not (tmp_path / "there" / checkpoints.RESUME).exists()


def test_unpacking_never_overwrites_a_log_but_resumes_an_interrupted_unpack(small_pack, tmp_path, capsys):
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / checkpoints.LOG).write_text('{"epoch": 7}\n')
    error = refused(["unpack-run", str(small_pack), str(lone)], capsys)
    assert str(lone / checkpoints.LOG) in error
    assert (lone / checkpoints.LOG).read_text() == '{"epoch": 7}\n'
    assert not (lone / checkpoints.RESUME).exists()
    # an unpack interrupted after its texts and best.pt: the same files again, then the checkpoint
    interrupted = tmp_path / "interrupted"
    interrupted.mkdir()
    for name in (checkpoints.LOG, "config.json", checkpoints.BEST):
        shutil.copyfile(tmp_path / "run" / name, interrupted / name)
    assert baselines_main(["unpack-run", str(small_pack), str(interrupted)]) == 0
    assert (interrupted / checkpoints.RESUME).is_file()
    # a best.pt without the pack's texts beside it is not an interrupted unpack's
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copyfile(tmp_path / "run" / checkpoints.BEST, alone / checkpoints.BEST)
    assert str(alone / checkpoints.BEST) in refused(["unpack-run", str(small_pack), str(alone)], capsys)


@pytest.mark.parametrize(
    "name",
    ["../x", "a/b", "..", ".", ".hidden", "-x", "with space", "", pytest.param("x" * 200, id="x * 200")],
)
def test_a_pack_name_that_is_not_a_plain_file_stem_is_refused(tmp_path, name, capsys):
    write_small_run(tmp_path / "run")
    error = refused(
        ["pack-run", str(tmp_path / "run"), str(tmp_path / "wire" / "in"), f"--name={name}"], capsys
    )
    assert "name" in error
    assert not list(tmp_path.rglob("*.manifest.json"))


def test_a_run_directory_named_oddly_needs_a_name(tmp_path, capsys):
    write_small_run(tmp_path / "my run")
    error = refused(["pack-run", str(tmp_path / "my run"), str(tmp_path / "wire")], capsys)
    assert "--name" in error
    assert (
        baselines_main(["pack-run", str(tmp_path / "my run"), str(tmp_path / "wire"), "--name", "my-run"])
        == 0
    )


@pytest.mark.parametrize("size", ["1", "999999", "0", "-1", "many"])
def test_pieces_too_small_to_be_sensible_are_refused_by_the_parser(tmp_path, size, capsys):
    write_small_run(tmp_path / "run")
    error = refused(
        ["pack-run", str(tmp_path / "run"), str(tmp_path / "wire"), "--piece-bytes", size], capsys
    )
    assert "--piece-bytes" in error
    assert not (tmp_path / "wire").exists()
