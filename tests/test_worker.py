"""Plugins run in worker processes (:mod:`harness.worker`): the same scores as in the harness's
process, a fresh process for each pass that never sees the audit, one line for every way a worker
can fail, and no process left behind."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from multiprocessing import resource_tracker
from pathlib import Path

import pytest
from conftest import TEST, assert_one_line_error, write_corpus

from harness.api import evaluate_model
from harness.cli import main as harness_main
from harness.datasets import Dataset, load_dataset
from harness.evaluate import Evaluation, evaluate
from harness.passes import ModelPasses
from harness.plugin import Model, PluginError
from harness.protocol import DEFAULT_PROTOCOL, EvaluationProtocol
from harness.worker import DEFAULT_LIMITS, DatasetFiles, PluginLoad, WorkerLimits, WorkerPlugin

#: A plugin that scores every token ``1/V`` with full distributions, and misbehaves as its
#: ``fault`` model argument says at its first ``score`` call; with a ``report`` file it appends
#: what it found of the harness in each pass (one JSON line: its pid, its parent's, torch's
#: threads, and whether it saw the audit's plan or pass), at its first ``score`` call after each
#: ``reset``, and a line for each ``result_metadata`` call. With ``torch_threads`` its factory
#: gives torch that many threads.
PLUGIN_SOURCE = '''
import gc, json, math, multiprocessing.connection, os, signal, sys, time
import numpy as np
from harness import ChunkScores, ModelUnavailable


def spied():
    """What of the harness this process shows: an ``AuditPlan`` among its objects, or the causality
    audit's pass among the frames that called the plugin."""
    plan = any(type(thing).__name__ == "AuditPlan" for thing in gc.get_objects())
    frame, frames = sys._getframe(), []
    while frame is not None:
        frames.append(frame.f_code.co_name)
        frame = frame.f_back
    torch = sys.modules.get("torch")
    threads = None if torch is None else torch.get_num_threads()
    return {"pid": os.getpid(), "ppid": os.getppid(), "threads": threads, "plan": plan,
            "audit_pass": "_causality_pass" in frames}


class Uniform:
    def __init__(self, vocab_size, fault, report):
        self.vocab_size, self.fault, self.report = vocab_size, fault, report
        self.fresh = True

    def reset(self, batch_size):
        self.fresh = True

    def score(self, chunk):
        if self.fresh and self.report:
            with open(self.report, "a") as report:
                report.write(json.dumps(spied()) + "\\n")
        self.fresh = False
        {"raise": self.raise_, "exit": self.exit, "sys_exit": lambda: sys.exit(4), "kill": self.kill,
         "hang": self.hang, "flood": self.flood, "refuse": self.refuse}.get(self.fault, lambda: None)()
        rows = int(chunk.distribution_mask.sum()) if chunk.distribution_mask is not None else 0
        width = self.vocab_size + 7 if self.fault == "other_vocabulary" else self.vocab_size
        targets = np.full(chunk.targets.shape, -math.log(self.vocab_size))
        if self.fault == "not_scores":
            return targets
        return ChunkScores(targets, np.full((rows, width), -math.log(width)))

    def result_metadata(self):
        if self.report:
            with open(self.report, "a") as report:
                report.write(json.dumps({"pid": os.getpid(), "asked": "result_metadata"}) + "\\n")
        return {}

    def raise_(self):
        raise KeyError(7)

    def exit(self):
        os._exit(3)

    def kill(self):
        os.kill(os.getpid(), signal.SIGKILL)

    def hang(self):
        time.sleep(600)

    def flood(self):  # a reply of its own, far larger than a chunk's scores, on the harness's connection
        for thing in gc.get_objects():
            if isinstance(thing, multiprocessing.connection.Connection):
                thing.send_bytes(b"x" * (8 << 20))

    def refuse(self):
        from harness.plugin import PluginError
        raise PluginError("uniform: refuses to score this chunk")


def load_model(dataset, *, device, checkpoint, fault="none", report="", torch_threads=""):
    if torch_threads:
        import torch
        torch.set_num_threads(int(torch_threads))
    if fault == "unavailable":
        raise ModelUnavailable("no uniform model for this dataset: train one first")
    return Uniform(len(dataset.vocab), fault, report)
'''


@pytest.fixture(autouse=True)
def no_process_left() -> Iterator[None]:
    """Every test leaves no child process behind but multiprocessing's resource tracker (which
    ``spawn`` starts once, for the life of this process)."""
    yield
    tracker = resource_tracker._resource_tracker._pid
    assert [pid for pid in _children() if pid != tracker] == [], "a worker process was left behind"


def _children() -> list[int]:
    """This process's child processes (from ``/proc``)."""
    children = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:  # gone meanwhile
            continue
        if f"\nPPid:\t{os.getpid()}\n" in text:
            children.append(int(status.parent.name))
    return children


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The module name of :data:`PLUGIN_SOURCE`, importable here and in worker processes."""
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "uniform_plugin.py").write_text(PLUGIN_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path / "plugins"))  # spawned workers take this sys.path
    return "uniform_plugin"


@pytest.fixture
def dataset(tmp_path: Path) -> Dataset:
    return load_dataset(str(write_corpus(tmp_path / "c", test=TEST * 4)))


def _worker_plugin(
    plugin: str,
    dataset: Dataset,
    limits: WorkerLimits = DEFAULT_LIMITS,
    threads: int | None = None,
    **model_args: str,
) -> WorkerPlugin:
    """The plugin loaded in worker processes for ``dataset``, with ``limits`` and ``threads``."""
    load = PluginLoad(
        plugin=plugin,
        dataset=DatasetFiles.of(dataset),
        device="cpu",
        checkpoint=None,
        model_args=model_args,
        threads=threads,
        retain_memory=False,
    )
    return WorkerPlugin(load, len(dataset.vocab), limits)


def _evaluate(
    model: Model | ModelPasses, dataset: Dataset, protocol: EvaluationProtocol = DEFAULT_PROTOCOL
) -> Evaluation:
    """The test split of ``dataset`` scored by ``model`` under ``protocol``, named ``u``."""
    stream = dataset.tokens("test")
    return evaluate(
        model,
        stream.ids,
        eos_id=dataset.vocab.eos_id,
        vocab_size=len(dataset.vocab),
        protocol=protocol,
        name="u",
        progress=False,
    )


def _load_model_here(plugin: str, dataset: Dataset, **model_args: str) -> Model:
    """The plugin's model made in this process."""
    return importlib.import_module(plugin).load_model(dataset, device="cpu", checkpoint=None, **model_args)


def test_a_worker_gives_the_scores_of_the_harnesss_own_process(corpus: Path) -> None:
    (worker,) = evaluate_model("unigram", corpus, splits="test", progress=False)
    (harness,) = evaluate_model("unigram", corpus, splits="test", progress=False, in_process=True)
    assert worker.token_log_probs.tobytes() == harness.token_log_probs.tobytes()
    assert worker.record.audit["checked"] == harness.record.audit["checked"] > 0
    assert worker.record.causality_audit["passed"] and harness.record.causality_audit["passed"]
    assert (worker.record.plugin_process, harness.record.plugin_process) == ("worker", "harness")
    assert worker.record.audited and not harness.record.audited


def test_an_evaluation_without_the_causality_audit_runs_in_the_harnesss_process(corpus: Path) -> None:
    (result,) = evaluate_model("unigram", corpus, splits="test", causality_audit=0, progress=False)
    assert result.record.plugin_process == "harness"


@pytest.mark.parametrize("forked", [True, False], ids=["forked from a template", "spawned"])
def test_each_pass_runs_in_a_fresh_worker_that_never_sees_the_audit(
    plugin: str, dataset: Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forked: bool
) -> None:
    report = tmp_path / "report.jsonl"
    monkeypatch.delitem(sys.modules, plugin, raising=False)
    factory_threads = {} if forked else {"torch_threads": "2"}  # a factory that sets them is not forked
    with _worker_plugin(plugin, dataset, report=str(report), **factory_threads) as passes:
        evaluation = _evaluate(passes, dataset)
    assert plugin not in sys.modules  # the harness never imports it
    lines = [json.loads(line) for line in report.read_text().splitlines()]
    seen = [line for line in lines if "asked" not in line]
    assert len({pass_["pid"] for pass_ in seen}) == 2 and os.getpid() not in {pass_["pid"] for pass_ in seen}
    parents = {pass_["ppid"] for pass_ in seen}
    assert (len(parents) == 1 and os.getpid() not in parents) if forked else parents == {os.getpid()}
    here = _evaluate(_load_model_here(plugin, dataset), dataset)
    assert evaluation.token_log_probs.tobytes() == here.token_log_probs.tobytes()
    assert not any(pass_["plan"] or pass_["audit_pass"] for pass_ in seen), seen
    asked = sorted(line["pid"] for line in lines if "asked" in line)
    assert asked == sorted(pass_["pid"] for pass_ in seen)  # metadata is asked of both passes alike

    report.unlink()  # in this process, the same plugin sees both
    _evaluate(_load_model_here(plugin, dataset, report=str(report)), dataset)
    seen = [json.loads(line) for line in report.read_text().splitlines() if "asked" not in line]
    assert {pass_["pid"] for pass_ in seen} == {os.getpid()}
    assert all(pass_["plan"] for pass_ in seen) and [pass_["audit_pass"] for pass_ in seen].count(True) == 1


def test_a_forked_pass_takes_the_threads_asked_for_while_its_template_loaded_on_one(
    plugin: str, dataset: Dataset, tmp_path: Path
) -> None:
    pytest.importorskip("torch")
    report = tmp_path / "report.jsonl"
    for threads in (2, None):
        with _worker_plugin(plugin, dataset, threads=threads, report=str(report)) as passes:
            _evaluate(passes, dataset)
    own_count = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    seen = [json.loads(line)["threads"] for line in report.read_text().splitlines() if "asked" not in line]
    assert seen == [2, 2] + [int(own_count)] * 2  # None: torch's own count


@pytest.mark.parametrize(
    "fault, reason",
    [
        ("exit", r"ended its worker process \(exit status 3\)"),
        ("sys_exit", r"called sys\.exit\(4\); a plugin returns its scores or raises"),
        ("kill", r"ended its worker process: killed by SIGKILL"),
        ("flood", r"sent a reply of over [\d,]+ bytes, more than this call can need"),
        ("hang", r"gave no answer within 1 s, the worker's limit for this call"),
    ],
)
@pytest.mark.parametrize("forked", [True, False], ids=["forked from a template", "spawned"])
def test_a_worker_that_exits_dies_hangs_or_floods_is_one_line(
    plugin: str, dataset: Dataset, fault: str, reason: str, forked: bool
) -> None:
    limits = WorkerLimits(call_seconds=1, seconds_per_position=0)
    factory_threads = {} if forked else {"torch_threads": "2"}  # a factory that sets them is not forked
    with (
        _worker_plugin(plugin, dataset, limits, fault=fault, **factory_threads) as passes,
        pytest.raises(PluginError) as error,
    ):
        _evaluate(passes, dataset)
    message = str(error.value)
    assert re.fullmatch(rf"u: score\(\) on tokens 0\.\.\d+( in the causality audit)? {reason}", message), (
        message
    )


def test_a_plugin_that_raises_in_a_worker_is_one_line_after_its_traceback(
    plugin: str, corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    arguments = ["eval", plugin, "--dataset", str(corpus), "--split", "test", "--model-args", "fault=raise"]
    assert harness_main(arguments) == 2
    lines = capsys.readouterr().err.splitlines()
    call = r"uniform_plugin toy/test: score\(\) on tokens 0\.\.24( in the causality audit)?"
    assert re.fullmatch(rf"{call} raised an exception \(traceback below\)", lines[0]), lines
    assert lines[1] == "Traceback (most recent call last):" and "KeyError: 7" in lines[-2]
    assert re.fullmatch(rf"error: {call} raised KeyError: 7 \(at .*uniform_plugin\.py:\d+\)", lines[-1])


@pytest.mark.parametrize(
    "fault, message",
    [
        ("refuse", "error: uniform: refuses to score this chunk"),
        ("unavailable", "error: no uniform model for this dataset: train one first"),
    ],
)
def test_a_plugins_own_one_line_error_is_raised_again_as_it_was(
    plugin: str, corpus: Path, capsys: pytest.CaptureFixture[str], fault: str, message: str
) -> None:
    arguments = [
        "eval",
        plugin,
        "--dataset",
        str(corpus),
        "--split",
        "test",
        "--model-args",
        f"fault={fault}",
    ]
    assert harness_main(arguments) == 2
    assert assert_one_line_error(capsys, message) == message + "\n"


@pytest.mark.parametrize(
    "fault, message",
    [
        ("not_scores", r"^u: score\(\) returned ndarray, not harness.ChunkScores$"),
        ("other_vocabulary", r"^u: distributions has shape .* \(a model of another vocabulary\?\)$"),
    ],
)
def test_scores_refused_in_a_worker_get_the_harnesss_message(
    plugin: str, dataset: Dataset, fault: str, message: str
) -> None:
    drawn_alike = EvaluationProtocol(causality_seed=7)  # the same positions asked for in both
    with pytest.raises(PluginError, match=message) as here:
        _evaluate(_load_model_here(plugin, dataset, fault=fault), dataset, drawn_alike)
    with _worker_plugin(plugin, dataset, fault=fault) as passes, pytest.raises(PluginError) as worker:
        _evaluate(passes, dataset, drawn_alike)
    assert str(worker.value) == str(here.value)
