"""What a fresh install carries: PTB and WikiText-2 inside the package, the trained baseline
checkpoints, and the offline path from `harness eval` to them (no network, no data directory)."""

from __future__ import annotations

import json
import lzma
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from baselines import checkpoint as checkpoints
from baselines.tuning import read_tuning
from harness.cli import main as harness_main
from harness.datasets import load_dataset
from harness.results import SOURCE_ROOT, resolve_recorded_path
from wikitext_toolkit_core.benchmarks import PACKAGED_DATA
from wikitext_toolkit_core.catalogue import BENCHMARKS
from wikitext_toolkit_core.files import DatasetError, file_sha256

TABLE_1_TOKENS = {
    "ptb": {"train": 929_589, "valid": 73_760, "test": 82_430},
    "wikitext-2": {"train": 2_088_628, "valid": 217_646, "test": 245_569},
}
#: What a shipped checkpoint may weigh (issue 23: WikiText-2's 33,278-word embedding dominates).
MAX_CHECKPOINT_BYTES = 16 * 1024 * 1024
#: The benchmarks the package ships trained models for, and the cache windows tuned for each.
SHIPPED_MODELS = ("ptb", "wikitext-2")
TUNED_WINDOWS = (100, 2000)


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to download fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("the packaged data must be used without any download")

    monkeypatch.setattr("wikitext_toolkit_core.download.download_benchmark", refuse)


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


def test_every_packaged_checkpoint_is_listed_checked_small_and_in_a_shipped_precision() -> None:
    """float16 weights, or (``package --precision int8``) int8 matrices with a float32 scale per
    row and float16 vectors."""
    listed = _packaged_files()
    shipped = sorted(
        path.relative_to(checkpoints.PACKAGED).as_posix() for path in checkpoints.PACKAGED.glob("*/*.pt")
    )
    assert listed == shipped
    assert {name.split("/")[0] for name in listed} == set(SHIPPED_MODELS)
    for name in listed:
        path = checkpoints.PACKAGED / name
        checkpoints.verify_packaged(path)
        assert path.stat().st_size <= MAX_CHECKPOINT_BYTES
        payload = checkpoints.load(path)
        stored, scales = payload["model"], payload.get(checkpoints.INT8_SCALES, {})
        for weight, scale in scales.items():
            assert stored[weight].dtype == torch.int8 and scale.dtype == torch.float32
        floats = [
            tensor for weight, tensor in stored.items() if weight not in scales and tensor.is_floating_point()
        ]
        assert floats and all(tensor.dtype == torch.float16 for tensor in floats)
        assert name == f"{payload['dataset']}/{payload['kind']}.pt"
        model, _ = checkpoints.load_model(path, load_dataset(payload["dataset"]).vocab, kind=payload["kind"])
        assert all(torch.isfinite(p).all() for p in model.parameters())


@pytest.mark.parametrize("dataset", SHIPPED_MODELS)
def test_every_shipped_model_has_both_kinds_and_the_cache_tuned_for_both_windows(dataset: str) -> None:
    lstm = checkpoints.packaged_checkpoint("zoneout_lstm", dataset)
    assert lstm is not None and checkpoints.packaged_checkpoint("pointer_sentinel", dataset) is not None
    for window in TUNED_WINDOWS:
        tuned = read_tuning(lstm, window, retune=["tune"])
        assert tuned is not None, f"{dataset}: the cache is not tuned for window {window}"
        assert tuned["theta"] > 0 and 0 < tuned["interpolation"] < 1


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


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: on the CPU no tensor moves")
def test_a_checkpoint_written_from_a_gpu_stores_tied_weights_once() -> None:
    vocab = load_dataset("ptb").vocab
    model = checkpoints.build_model(
        "zoneout_lstm", {"vocab_size": len(vocab), "embedding_size": 16, "hidden_size": 16}
    ).cuda()

    stored = checkpoints.model_payload(model, vocab, "ptb")["model"]

    assert stored["core.embedding.weight"].device.type == "cpu"
    assert stored["core.embedding.weight"] is stored["core.decoder.weight"]


@pytest.mark.parametrize("precision", checkpoints.PRECISIONS)
def test_package_round_trips_the_weights_within_the_precision_and_keeps_tied_weights_one_tensor(
    precision: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoints, "PACKAGED", tmp_path / "trained")
    monkeypatch.setattr(checkpoints, "PACKAGED_SUMS", tmp_path / "trained" / "SHA256SUMS")
    vocab = load_dataset("ptb").vocab
    model = checkpoints.build_model(
        "zoneout_lstm", {"vocab_size": len(vocab), "embedding_size": 16, "hidden_size": 16}
    )
    source = tmp_path / "best.pt"
    checkpoints.save(source, checkpoints.model_payload(model, vocab, "ptb"))

    target = checkpoints.package(source, "ptb", precision)

    checkpoints.verify_packaged(target)
    stored = checkpoints.load(target)["model"]
    original = model.state_dict()
    matrix_type = torch.int8 if precision == "int8" else torch.float16
    for name, tensor in original.items():
        assert stored[name].dtype == (matrix_type if tensor.dim() >= 2 else torch.float16), name
    embedding, decoder = stored["core.embedding.weight"], stored["core.decoder.weight"]
    assert embedding.untyped_storage().data_ptr() == decoder.untyped_storage().data_ptr()
    loaded = checkpoints.load_model(target, vocab, kind="zoneout_lstm")[0].state_dict()
    for name, tensor in original.items():
        if precision == "int8" and tensor.dim() >= 2:
            half_step = tensor.abs().flatten(1).amax(dim=1).view(-1, *[1] * (tensor.dim() - 1)) / 254
        else:
            half_step = tensor.abs() * 2**-11  # float16's rounding
        assert ((loaded[name] - tensor).abs() <= half_step + 1e-7).all(), name


def test_int8_rows_are_within_half_a_step_and_a_zero_row_stays_zero() -> None:
    matrix = torch.randn(5, 7, 3)
    matrix[2] = 0.0
    values, scales = checkpoints.quantize_rows(matrix)
    assert values.dtype == torch.int8 and values.shape == matrix.shape and scales.shape == (5, 1, 1)
    assert (values[2] == 0).all()
    assert ((values.float() * scales - matrix).abs() <= scales / 2 + 1e-7).all()
    assert values.abs().amax(dim=(1, 2)).tolist() == [127, 127, 0, 127, 127]


def short_copy(name: str, directory: Path) -> Path:
    """A directory named after benchmark ``name`` with its real train split (so the vocabulary is
    the benchmark's) and the first 40 lines of test: the packaged checkpoints serve it, and it
    scores in seconds."""
    directory /= name
    directory.mkdir()
    files = BENCHMARKS[name].split_files
    shutil.copy(PACKAGED_DATA / name / f"{files['train']}.xz", directory)
    test = lzma.decompress((PACKAGED_DATA / name / f"{files['test']}.xz").read_bytes())
    (directory / files["test"]).write_bytes(b"\n".join(test.split(b"\n")[:40]) + b"\n")
    return directory


@pytest.mark.parametrize("dataset", SHIPPED_MODELS)
@pytest.mark.parametrize(
    "plugin", ["baselines.zoneout_lstm", "baselines.pointer_sentinel", "baselines.neural_cache"]
)
def test_plugins_fall_back_to_the_packaged_checkpoint_and_name_it(
    plugin: str, dataset: str, tmp_path: Path, offline: None, capfd: pytest.CaptureFixture
) -> None:
    """The note comes from the plugin's worker process: ``capfd`` reads its stderr."""
    kind = "pointer_sentinel" if plugin.endswith("pointer_sentinel") else "zoneout_lstm"
    packaged = checkpoints.packaged_checkpoint(kind, dataset)
    if packaged is None:
        pytest.fail(f"no packaged {kind} for {dataset}")
    output = tmp_path / "result.json"
    directory = short_copy(dataset, tmp_path)
    argv = ["eval", plugin, "--dataset", str(directory), "--split", "test", "--output", str(output)]
    assert harness_main(argv) == 0
    assert f"using the packaged {dataset} checkpoint" in capfd.readouterr().err
    record = json.loads(output.read_text(encoding="utf-8"))
    assert record["checkpoint"] == f"<repo>/{packaged.relative_to(SOURCE_ROOT).as_posix()}"
    assert resolve_recorded_path(record["checkpoint"]) == packaged
    assert record["perplexity"] < 1000


def _packaged_results() -> list[Path]:
    """The committed result files of the neural plugins scored on a packaged checkpoint."""
    records = {
        path: json.loads(path.read_text(encoding="utf-8")) for path in SOURCE_ROOT.glob("results/*/*.json")
    }
    return sorted(
        path
        for path, record in records.items()
        if (record.get("plugin_metadata") or {}).get("checkpoint_packaged")
    )


def _rescoring(result: Path) -> Any:
    """``result`` as a test parameter: slow where rescoring it takes minutes (dynamic evaluation
    first collects its gradient statistic on 20,000 training tokens)."""
    record = json.loads(result.read_text(encoding="utf-8"))
    marks = [pytest.mark.slow] if "dynamic_evaluation" in record["plugin_metadata"] else []
    return pytest.param(result, marks=marks, id=f"{result.parent.name}/{result.stem}")


def test_every_committed_result_names_the_packaged_file_it_scored() -> None:
    """A package replaced without scoring its results again fails here, slow tests or not."""
    assert _packaged_results()
    for result in _packaged_results():
        record = json.loads(result.read_text(encoding="utf-8"))
        packaged = resolve_recorded_path(record["checkpoint"])
        assert packaged is not None and packaged.is_file(), record["checkpoint"]
        assert record["plugin_metadata"]["checkpoint_sha256"] == file_sha256(packaged), result


@pytest.mark.parametrize(
    "result", [_rescoring(path) for path in _packaged_results() if path.stem.endswith(".test")]
)
def test_the_committed_results_are_the_packaged_models_scores(
    result: Path, tmp_path: Path, offline: None
) -> None:
    """The packaged file rescores each committed test result's first tokens to its figures
    (which file it scored, by sha256, is checked above)."""
    record = json.loads(result.read_text(encoding="utf-8"))
    args = ",".join(f"{key}={value}" for key, value in record["model_args"].items())
    rescored = tmp_path / "logprobs.npy"
    argv = [
        "eval",
        record["model"],
        "--dataset",
        str(short_copy(record["dataset"], tmp_path)),
        "--split",
        "test",
    ]
    argv += ["--audit", "0", "--causality-audit", "0", "--save-token-logprobs", str(rescored)]
    assert harness_main(argv + (["--model-args", args] if args else [])) == 0
    first = np.load(rescored)
    committed = np.load(result.with_name(record["token_log_probs_file"]))[: len(first)]
    assert len(first) > 500
    np.testing.assert_allclose(first, committed, rtol=0, atol=1e-4)
