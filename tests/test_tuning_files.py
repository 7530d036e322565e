"""The tuning files (:mod:`baselines.tuning_files`): one versioned form for the neural cache's and
dynamic evaluation's, the earlier unversioned forms still read, one-line errors, and updates that
keep every entry when two tuners write one file at once."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import write_corpus

from baselines import checkpoint as checkpoints
from baselines import cli as baselines_cli
from baselines.cli import main as baselines_main
from baselines.models import ZoneoutLSTM
from baselines.models.recurrent import CoreConfig
from baselines.tuning_files import (
    DYNAMIC_EVAL,
    FORMAT,
    NEURAL_CACHE,
    VERSION,
    TuningKind,
    read_tuned,
    read_tuning_file,
    record_tuning,
)
from harness.datasets import load_dataset
from harness.plugin import ModelUnavailable, PluginError
from harness.results import SOURCE_ROOT
from wikitext_toolkit_core.files import file_sha256

#: Every tuning file the repository holds, and its kind.
COMMITTED = [
    *(
        (path, NEURAL_CACHE)
        for path in sorted((SOURCE_ROOT / "baselines" / "trained").glob("*/neural_cache.json"))
    ),
    *(
        (path, DYNAMIC_EVAL)
        for path in sorted((SOURCE_ROOT / "baselines" / "trained").glob("*/dynamic_eval.json"))
    ),
    *(
        (path, DYNAMIC_EVAL)
        for path in sorted((SOURCE_ROOT / "results").glob("*/tuning/dynamic_eval.*.json"))
    ),
    (SOURCE_ROOT / "results" / "ptb" / "training" / "zoneout_lstm-cpu.neural_cache.json", NEURAL_CACHE),
]
PACKAGED_LSTM = SOURCE_ROOT / "baselines" / "trained" / "ptb" / "zoneout_lstm.pt"


def write(path: Path, record: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record), encoding="utf-8")
    return path


def checkpoint(directory: Path) -> Path:
    """A tiny zoneout LSTM for ``directory`` (a corpus), saved as ``run/best.pt`` beside it."""
    dataset = load_dataset(str(directory))
    torch.manual_seed(0)
    model = ZoneoutLSTM(
        CoreConfig(vocab_size=len(dataset.vocab), embedding_size=8, hidden_size=8, num_layers=1)
    )
    path = directory.parent / "run" / "best.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    checkpoints.save(path, checkpoints.model_payload(model, dataset.vocab, dataset.name))
    return path


@pytest.mark.parametrize("path, kind", COMMITTED, ids=lambda value: getattr(value, "name", None))
def test_every_committed_tuning_file_is_of_this_version(path: Path, kind: TuningKind) -> None:
    """Migrated: each reads as version 1 and is written back byte for byte."""
    record = json.loads(path.read_text(encoding="utf-8"))
    assert (record["format"], record["version"], record["kind"]) == (FORMAT, VERSION, kind.name)
    tuning = read_tuning_file(path, kind)
    assert tuning is not None and tuning.best and sorted(tuning.searches) == sorted(tuning.best)
    assert tuning.to_json() == path.read_text(encoding="utf-8")


def test_the_packaged_tunings_give_the_plugins_the_documented_settings() -> None:
    """The settings baselines/trained/README.md lists, as both plugins read them."""
    cache = read_tuned(PACKAGED_LSTM, NEURAL_CACHE, ["tune"])
    assert {window: (entry["theta"], entry["interpolation"]) for window, entry in cache.items()} == {
        "100": (0.15, 0.05),
        "2000": (0.25, 0.1),
    }
    dynamic = read_tuned(PACKAGED_LSTM, DYNAMIC_EVAL, ["tune-dynamic"])
    assert {
        key: (entry["method"], entry["lr"], entry["decay"], entry["segment"])
        for key, entry in dynamic.items()
    } == {
        "zoneout_lstm/rms": ("rms", 0.0003, 0.003, 100),
        "zoneout_lstm/rms/cache2000": ("rms", 0.0003, 0.01, 100),
    }


def test_an_unversioned_cache_file_reads_with_its_runs_search_under_each_window(tmp_path: Path) -> None:
    """The form ``tune`` wrote before version 1: the run's search at the top level."""
    best = {
        "3": {"theta": 0.5, "interpolation": 0.2, "perplexity": 9.0},
        "7": {"theta": 0.1, "interpolation": 0.0},
    }
    record = {
        "thetas": [0.1, 0.5],
        "interpolations": [0.0, 0.2],
        "tokens": 40,
        "protocol": {"batch_size": 1, "bptt": 100},
        "grid": {"3": [[11.0, 10.0], [10.5, 9.0]]},
        "best": best,
        "checkpoint": "<repo>/run/best.pt",
        "checkpoint_sha256": "ab" * 32,
        "dataset": "toy",
        "split": "valid",
        "seconds": 2.5,
    }
    tuning = read_tuning_file(write(tmp_path / "neural_cache.json", record), NEURAL_CACHE)
    assert tuning is not None
    assert (tuning.checkpoint, tuning.checkpoint_sha256, tuning.dataset) == (
        "<repo>/run/best.pt",
        "ab" * 32,
        "toy",
    )
    assert tuning.best == best  # window 7 was tuned by an earlier run, whose search the file lost
    assert tuning.searches == {
        "3": {
            "thetas": [0.1, 0.5],
            "interpolations": [0.0, 0.2],
            "tokens": 40,
            "protocol": {"batch_size": 1, "bptt": 100},
            "split": "valid",
            "seconds": 2.5,
            "grid": [[11.0, 10.0], [10.5, 9.0]],
        }
    }


@pytest.mark.parametrize("first_form", [False, True])
def test_an_unversioned_dynamic_file_reads_as_it_was(tmp_path: Path, first_form: bool) -> None:
    """The forms ``tune-dynamic`` wrote before version 1: a search per entry, or (the first) the
    run's fields at the top level and each entry's grid alone under ``searches``."""
    entry = {"method": "rms", "lr": 0.0003, "decay": 0.003, "segment": 100, "perplexity": 102.7}
    points = [{"lr": 0.0003, "decay": 0.003, "segment": 100, "perplexity": 102.7}]
    run = {"method": "rms", "static_perplexity": 114.6, "tokens": 10, "split": "valid", "seconds": 9.0}
    record: dict[str, Any] = {
        "checkpoint": "<repo>/x.pt",
        "dataset": "ptb",
        "best": {"zoneout_lstm/rms": entry},
    }
    if first_form:
        record.update(run, searches={"zoneout_lstm/rms": points})
    else:
        record.update(checkpoint_sha256="cd" * 32, searches={"zoneout_lstm/rms": {**run, "grid": points}})
    tuning = read_tuning_file(write(tmp_path / "dynamic_eval.json", record), DYNAMIC_EVAL)
    assert tuning is not None and tuning.best == {"zoneout_lstm/rms": entry}
    assert tuning.searches == {"zoneout_lstm/rms": {**run, "grid": points}}
    assert tuning.checkpoint_sha256 == (None if first_form else "cd" * 32)


@pytest.mark.parametrize(
    "content, kind, problem",
    [
        ("{not json", NEURAL_CACHE, "not a neural-cache tuning file (Expecting property name"),
        ("[1, 2]", NEURAL_CACHE, "not a neural-cache tuning file (not a JSON object)"),
        ('{"best": [1]}', DYNAMIC_EVAL, "not a dynamic-evaluation tuning file (best is not a mapping)"),
        ('{"checkpoint": "x"}', DYNAMIC_EVAL, "not a dynamic-evaluation tuning file (no best)"),
        (
            '{"format": "baselines-tuning", "version": 2, "kind": "neural_cache", "best": {}}',
            NEURAL_CACHE,
            "not a neural-cache tuning file (version 2: this toolkit reads version 1)",
        ),
        (
            '{"format": "baselines-tuning", "version": 1, "kind": "dynamic_eval", "best": {}}',
            NEURAL_CACHE,
            "not a neural-cache tuning file (its kind is 'dynamic_eval')",
        ),
        (
            '{"format": "baselines-tuning", "version": 1, "kind": "neural_cache", "dataset": 3, "best": {}}',
            NEURAL_CACHE,
            "not a neural-cache tuning file (dataset is not a string)",
        ),
        ('{"best": {"zoneout_lstm/sgd": {"method": "sgd"}}}', DYNAMIC_EVAL, "entry zoneout_lstm/sgd: no lr"),
        (
            '{"best": {"zoneout_lstm/sgd": {"method": "sgd", "lr": 0.1, "decay": 2, "segment": null}}}',
            DYNAMIC_EVAL,
            "entry zoneout_lstm/sgd: decay must be in [0, 1], got 2",
        ),
        (
            '{"best": {"zoneout_lstm/sgd": {"method": "sgd", "lr": "a", "decay": 0, "segment": 5}}}',
            DYNAMIC_EVAL,
            "entry zoneout_lstm/sgd: not a tuned setting (",
        ),
        (
            '{"best": {"zoneout_lstm/sgd": 3}}',
            DYNAMIC_EVAL,
            "entry zoneout_lstm/sgd: not a mapping of method",
        ),
    ],
)
def test_a_malformed_tuning_file_is_one_line_naming_it(
    tmp_path: Path, content: str, kind: TuningKind, problem: str
) -> None:
    path = tmp_path / kind.file_name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(PluginError) as raised:
        read_tuning_file(path, kind)
    message = str(raised.value)
    assert message.startswith(f"{path}: {problem}") and "\n" not in message, message


def test_record_tuning_keeps_the_other_entries_of_the_same_checkpoint_only(tmp_path: Path) -> None:
    weights = tmp_path / "run" / "best.pt"
    weights.parent.mkdir()
    weights.write_bytes(b"weights")
    path = NEURAL_CACHE.path(weights)
    assert read_tuned(weights, NEURAL_CACHE, ["tune"]) == {}  # no file

    def tuned(window: str, theta: float) -> dict[str, Any]:
        return {
            "best": {window: {"theta": theta, "interpolation": 0.1, "perplexity": 5.0}},
            "searches": {window: {"grid": [[5.0]], "split": "valid"}},
        }

    record_tuning(path, NEURAL_CACHE, checkpoint=weights, dataset="toy", **tuned("3", 0.5))
    record_tuning(path, NEURAL_CACHE, checkpoint=weights, dataset="toy", **tuned("5", 0.7))
    record_tuning(path, NEURAL_CACHE, checkpoint=weights, dataset="toy", **tuned("3", 0.9))
    assert {
        window: entry["theta"] for window, entry in read_tuned(weights, NEURAL_CACHE, ["tune"]).items()
    } == {
        "3": 0.9,
        "5": 0.7,
    }
    weights.write_bytes(b"retrained")
    with pytest.raises(ModelUnavailable, match=r"tuned on another checkpoint than .*: run `tune again`"):
        read_tuned(weights, NEURAL_CACHE, ["tune", "again"])
    record_tuning(path, NEURAL_CACHE, checkpoint=weights, dataset="toy", **tuned("5", 0.2))
    tuning = read_tuning_file(path, NEURAL_CACHE)
    assert tuning is not None and list(tuning.best) == list(tuning.searches) == ["5"]
    assert not path.with_name(f".{path.name}.lock").exists()


def test_the_tuning_file_records_its_checkpoint_relative_to_the_repository(tmp_path: Path) -> None:
    path = tmp_path / "neural_cache.json"
    record_tuning(path, NEURAL_CACHE, checkpoint=PACKAGED_LSTM, dataset="ptb", best={}, searches={})
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["checkpoint"] == "<repo>/baselines/trained/ptb/zoneout_lstm.pt"
    assert record["checkpoint_sha256"] == file_sha256(PACKAGED_LSTM)


@pytest.mark.parametrize(
    "tuner, runs, grid, kind, entries",
    [
        (
            "tune",
            [["--windows", "3"], ["--windows", "5"]],
            ["--thetas", "0.5", "--interpolations", "0.2"],
            NEURAL_CACHE,
            ["3", "5"],
        ),
        (
            "tune-dynamic",
            [["--method", "sgd", "--lrs", "0.1"], ["--method", "rms", "--lrs", "0.001"]],
            ["--decays", "0", "--segments", "3", "--bptt", "6"],
            DYNAMIC_EVAL,
            ["zoneout_lstm/rms", "zoneout_lstm/sgd"],
        ),
    ],
    ids=["tune", "tune-dynamic"],
)
def test_two_tunings_writing_one_file_at_once_keep_both_entries(
    tmp_path: Path, monkeypatch, tuner: str, runs: list[list[str]], grid: list[str], kind: TuningKind, entries
) -> None:
    """Two runs of a tuner tuning other entries, both done tuning before either writes (each read
    the file before tuning): the file keeps both entries (``tune`` kept only the last writer's)."""
    toy = write_corpus(tmp_path / "toy")
    best = checkpoint(toy)
    both_tuned = threading.Barrier(2, timeout=120)
    search = getattr(baselines_cli, tuner.replace("-", "_"))  # tune, tune_dynamic

    def searched_together(*args: object, **kwargs: object) -> dict:
        results = search(*args, **kwargs)
        both_tuned.wait()
        return results

    monkeypatch.setattr(baselines_cli, tuner.replace("-", "_"), searched_together)
    statuses = []
    command = [
        tuner,
        "--dataset",
        str(toy),
        "--checkpoint",
        str(best),
        *grid,
        "--threads",
        "1",
        "--device",
        "cpu",
    ]
    tuners = [
        threading.Thread(target=lambda run=run: statuses.append(baselines_main([*command, *run])))
        for run in runs
    ]
    for thread in tuners:
        thread.start()
    for thread in tuners:
        thread.join(timeout=300)
    assert statuses == [0, 0]
    tuning = read_tuning_file(kind.path(best), kind)
    assert tuning is not None and sorted(tuning.best) == sorted(tuning.searches) == entries
    assert all(tuning.searches[entry]["split"] == "valid" for entry in entries)
