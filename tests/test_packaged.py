"""What a fresh install carries: PTB and WikiText-2 inside the package, the trained baseline
checkpoints, and the offline path from `harness eval` to them (no network, no data directory)."""

from __future__ import annotations

import json
import lzma
import shutil
from pathlib import Path

import pytest
import torch

from baselines import checkpoint as checkpoints
from core.benchmarks import PACKAGED_DATA
from core.catalogue import BENCHMARKS
from core.files import DatasetError
from harness.cli import main as harness_main
from harness.datasets import load_dataset
from harness.results import SOURCE_ROOT, resolve_recorded_path

TABLE_1_TOKENS = {
    "ptb": {"train": 929_589, "valid": 73_760, "test": 82_430},
    "wikitext-2": {"train": 2_088_628, "valid": 217_646, "test": 245_569},
}
MAX_CHECKPOINT_BYTES = 8 * 1024 * 1024


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to download fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("the packaged data must be used without any download")

    monkeypatch.setattr("core.download.download_benchmark", refuse)


@pytest.mark.parametrize("name", ["ptb", "wikitext-2"])
def test_packaged_benchmarks_are_the_releases_and_need_no_network(name: str, offline: None) -> None:
    dataset = load_dataset(name)
    assert dataset.directory == PACKAGED_DATA / name
    for split, tokens in TABLE_1_TOKENS[name].items():
        assert dataset.path(split).name.endswith(".xz")
        assert dataset.is_verified(split)
        digest = dataset.verify(split)  # decompresses and checks the release sha256
        assert digest == BENCHMARKS[name].file_sha256[dataset.split_files[split]]
        assert len(dataset.tokens(split).ids) == tokens
    assert (PACKAGED_DATA / "README.md").read_text(encoding="utf-8").count("CC BY-SA") >= 1


def test_data_dir_takes_precedence_over_the_packaged_copy(
    tmp_path: Path, offline: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    for root in ("flag", "env"):
        shutil.copytree(PACKAGED_DATA / "ptb", tmp_path / root / "ptb")
    assert load_dataset("ptb", data_dir=tmp_path / "flag").directory == tmp_path / "flag" / "ptb"
    monkeypatch.setenv("HARNESS_DATA_DIR", str(tmp_path / "env"))
    assert load_dataset("ptb").directory == tmp_path / "env" / "ptb"


def test_a_tampered_compressed_split_is_refused(tmp_path: Path) -> None:
    shutil.copytree(PACKAGED_DATA / "ptb", tmp_path / "ptb")
    text = lzma.decompress((tmp_path / "ptb" / "ptb.test.txt.xz").read_bytes())
    (tmp_path / "ptb" / "ptb.test.txt.xz").write_bytes(lzma.compress(text.replace(b"the", b"a", 1)))
    (tmp_path / "ptb" / "ptb.valid.txt.xz").write_bytes(b"not xz at all")
    dataset = load_dataset("ptb", data_dir=tmp_path)
    with pytest.raises(DatasetError, match=r"ptb\.test\.txt\.xz: sha256 mismatch"):
        dataset.tokens("test")
    with pytest.raises(DatasetError, match=r"ptb\.valid\.txt\.xz: not a valid xz file"):
        dataset.tokens("valid")


def _packaged_files() -> list[str]:
    lines = checkpoints.PACKAGED_SUMS.read_text(encoding="utf-8").splitlines()
    return [line.split(maxsplit=1)[1] for line in lines if line.strip()]


def test_every_packaged_checkpoint_is_listed_checked_small_and_half_precision() -> None:
    listed = _packaged_files()
    shipped = sorted(
        path.relative_to(checkpoints.PACKAGED).as_posix() for path in checkpoints.PACKAGED.glob("*/*.pt")
    )
    assert shipped and listed == shipped
    ptb = load_dataset("ptb")
    for name in listed:
        path = checkpoints.PACKAGED / name
        checkpoints.verify_packaged(path)
        assert path.stat().st_size <= MAX_CHECKPOINT_BYTES
        payload = checkpoints.load(path)
        floats = [tensor for tensor in payload["model"].values() if tensor.is_floating_point()]
        assert floats and all(tensor.dtype == torch.float16 for tensor in floats)
        if payload["dataset"] == "ptb":
            model, _ = checkpoints.load_model(path, ptb.vocab, kind=payload["kind"])
            assert all(torch.isfinite(p).all() for p in model.parameters())


def test_a_damaged_packaged_checkpoint_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "trained"
    shutil.copytree(checkpoints.PACKAGED, copy)
    monkeypatch.setattr(checkpoints, "PACKAGED", copy)
    monkeypatch.setattr(checkpoints, "PACKAGED_SUMS", copy / "SHA256SUMS")
    path = copy / _packaged_files()[0]
    data = bytearray(path.read_bytes())
    data[-100] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(checkpoints.CheckpointError, match="sha256 mismatch.*reinstall"):
        checkpoints.verify_packaged(path)


@pytest.fixture
def short_ptb(tmp_path: Path) -> Path:
    """A directory named ``ptb`` with the real train split (so the vocabulary is PTB's) and the
    first lines of test: the packaged checkpoints serve it, and it scores in a second."""
    directory = tmp_path / "ptb"
    directory.mkdir()
    shutil.copy(PACKAGED_DATA / "ptb" / "ptb.train.txt.xz", directory)
    test = lzma.decompress((PACKAGED_DATA / "ptb" / "ptb.test.txt.xz").read_bytes())
    (directory / "ptb.test.txt").write_bytes(b"\n".join(test.split(b"\n")[:40]) + b"\n")
    return directory


@pytest.mark.parametrize(
    "plugin", ["baselines.zoneout_lstm", "baselines.pointer_sentinel", "baselines.neural_cache"]
)
def test_plugins_fall_back_to_the_packaged_checkpoint_and_name_it(
    plugin: str, short_ptb: Path, tmp_path: Path, offline: None, capsys: pytest.CaptureFixture
) -> None:
    kind = "pointer_sentinel" if plugin.endswith("pointer_sentinel") else "zoneout_lstm"
    packaged = checkpoints.packaged_checkpoint(kind, "ptb")
    if packaged is None:
        pytest.fail(f"no packaged {kind} for ptb")
    output = tmp_path / "result.json"
    assert (
        harness_main(
            ["eval", plugin, "--dataset", str(short_ptb), "--split", "test", "--output", str(output)]
        )
        == 0
    )
    assert "using the packaged ptb checkpoint" in capsys.readouterr().err
    record = json.loads(output.read_text(encoding="utf-8"))
    assert record["checkpoint"] == f"<repo>/{packaged.relative_to(SOURCE_ROOT).as_posix()}"
    assert resolve_recorded_path(record["checkpoint"]) == packaged
    assert record["perplexity"] < 1000
