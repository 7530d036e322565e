"""``--threads N|auto`` (issue 45, item 4): ``auto`` leaves out the CPUs other processes keep busy,
every command that runs a model takes the option, and ``harness eval`` hands it to torch."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import assert_one_line_error

from baselines.cli import build_parser as baselines_parser
from baselines.cli import main as baselines_main
from harness.cli import build_parser as harness_parser
from harness.cli import main as harness_main
from wikitext_toolkit_core import threads
from wikitext_toolkit_core.threads import CpuReading, CpuTicks, ThreadChoice, busy_cpus, choose_threads

UNIGRAM = "harness.plugins.unigram"
#: The plugin in the harness's own process, whose torch the tests replace (a worker process
#: applies ``--threads`` to its own: :func:`test_a_worker_applies_the_threads_asked`).
IN_PROCESS = [UNIGRAM, "--in-process"]
#: Clock ticks of a CPU over the sampled window (0.2 s at 100 a second).
WINDOW = 20


def reading(busy: dict[int, int], own: int = 0, elapsed: int = 0) -> CpuReading:
    """Counters after ``elapsed`` ticks of each CPU, ``busy[cpu]`` of them working; ``own``
    ticks of this process. The aggregate line adds the CPUs' lines up."""
    cpus = {f"cpu{cpu}": CpuTicks(busy=ticks, total=elapsed) for cpu, ticks in busy.items()}
    cpus["cpu"] = CpuTicks(busy=sum(busy.values()), total=elapsed * len(busy))
    return CpuReading(cpus, own)


QUIET = reading({0: 0, 1: 0})


@pytest.mark.parametrize(
    "after, expected",
    [
        (reading({0: 1, 1: 2}, elapsed=WINDOW), 0),  # quiet: a tick here and there
        (reading({0: WINDOW, 1: 1}, elapsed=WINDOW), 1),  # one busy neighbour
        (reading({0: 11, 1: 10}, elapsed=WINDOW), 1),  # one neighbour, moved between the CPUs
        (reading({0: WINDOW, 1: WINDOW}, elapsed=WINDOW), 2),  # both CPUs busy
        (reading({0: WINDOW, 1: 1}, own=WINDOW, elapsed=WINDOW), 0),  # the busy one is this process
    ],
)
def test_busy_cpus_counts_the_work_of_other_processes(after, expected):
    assert busy_cpus(QUIET, after, {0, 1}) == expected


def test_only_the_cpus_this_process_may_use_count():
    after = reading({0: WINDOW, 1: 0, 2: WINDOW, 3: 0}, elapsed=WINDOW)
    before = reading({0: 0, 1: 0, 2: 0, 3: 0})
    assert busy_cpus(before, after, {1, 3}) == 0
    assert busy_cpus(before, after, {0, 1}) == 1


def test_without_lines_for_its_cpus_the_aggregate_line_is_read():
    after = reading({0: WINDOW, 1: 0}, elapsed=WINDOW)
    assert busy_cpus(QUIET, after, {4, 5}) == 1  # CPUs 4 and 5 as the affinity names them


def test_proc_stat_and_proc_self_stat_are_parsed():
    stat = "cpu  10 2 3 100 4 0 1 1 5 0\ncpu0 10 2 3 100 4 0 1 1 5 0\nintr 1 2\n\nctxt 7\n"
    assert threads.parse_proc_stat(stat) == {"cpu": CpuTicks(17, 121), "cpu0": CpuTicks(17, 121)}
    own = "1234 (a (strange) name) S 1 1234 1234 0 -1 4194304 90 0 0 0 25 7 0 0 20 0 1 0 99"
    assert threads.parse_own_ticks(own) == 32


def counters(*readings: CpuReading):
    """A reader of ``readings`` in turn, as ``choose_threads`` reads ``/proc``."""
    pending = list(readings)
    return lambda: pending.pop(0)


@pytest.mark.parametrize(
    "after, expected",
    [
        (reading({0: 0, 1: 1}, elapsed=WINDOW), ThreadChoice(cpus=2, busy=0)),
        (reading({0: WINDOW, 1: 0}, elapsed=WINDOW), ThreadChoice(cpus=2, busy=1)),
        (reading({0: WINDOW, 1: WINDOW}, elapsed=WINDOW), ThreadChoice(cpus=2, busy=2)),
    ],
)
def test_choose_threads_leaves_out_the_busy_cpus_and_keeps_one(after, expected):
    choice = choose_threads(read=counters(QUIET, after), sleep=lambda _: None, cpus=lambda: {0, 1})
    assert choice == expected
    assert choice.threads == max(1, 2 - expected.busy)


def test_unreadable_counters_leave_every_cpu_to_this_process():
    def unreadable() -> CpuReading:
        raise FileNotFoundError("/proc/stat")

    choice = choose_threads(read=unreadable, sleep=lambda _: None, cpus=lambda: {0, 1, 2})
    assert choice == ThreadChoice(cpus=3, busy=0) and choice.threads == 3


def test_one_allowed_cpu_needs_no_sample():
    def never() -> CpuReading:
        raise AssertionError("read /proc for one CPU")

    assert choose_threads(read=never, sleep=lambda _: None, cpus=lambda: {5}).threads == 1


def test_this_machines_counters_have_a_line_for_each_cpu_this_process_may_use():
    try:
        cpus = threads.read_cpu_counters().cpus
    except OSError:
        pytest.skip("no /proc here")
    assert {"cpu", *(f"cpu{cpu}" for cpu in threads.allowed_cpus())} <= set(cpus)


COMMANDS = [
    (harness_parser, ["eval", UNIGRAM]),
    (baselines_parser, ["train", "zoneout_lstm", "--dataset", "ptb"]),
    (baselines_parser, ["tune", "--dataset", "ptb"]),
    (baselines_parser, ["analyze", "pointer_sentinel", "--dataset", "ptb"]),
    (baselines_parser, ["calibrate", "model.pt", "--dataset", "ptb", "--output", "out.pt"]),
]


@pytest.mark.parametrize("parser, command", COMMANDS)
@pytest.mark.parametrize("value, expected", [(None, "auto"), ("auto", "auto"), ("1", 1)])
def test_every_command_that_runs_a_model_takes_threads(
    tmp_path, monkeypatch, parser, command, value, expected
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.pt").write_bytes(b"")  # calibrate's checkpoint must exist
    options = [] if value is None else ["--threads", value]
    assert parser().parse_args([*command, *options]).threads == expected


@pytest.mark.parametrize("main, command", [(harness_main, ["eval", UNIGRAM]), (baselines_main, ["tune"])])
@pytest.mark.parametrize("value, message", [("0", "must be at least 1"), ("abc", "neither a number")])
def test_a_bad_thread_count_is_one_line(corpus, capsys, main, command, value, message):
    assert main([*command, "--dataset", str(corpus), "--threads", value]) == 2
    assert_one_line_error(capsys, "--threads", message)


@pytest.fixture
def torch_calls(monkeypatch):
    """torch's thread count as 2 whatever the machine, and the counts set on it (not really set:
    the test process keeps its own)."""
    torch = pytest.importorskip("torch")
    calls: list[int] = []
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    return calls


def test_harness_eval_sets_the_threads_asked(corpus, capsys, torch_calls):
    assert harness_main(["eval", *IN_PROCESS, "--dataset", str(corpus), "--threads", "1"]) == 0
    assert torch_calls == [1]
    assert "busy" not in capsys.readouterr().err


@pytest.mark.parametrize("terminal", [True, False])
def test_harness_eval_auto_leaves_out_a_busy_cpu_and_tells_a_terminal(
    corpus, capsys, monkeypatch, torch_calls, terminal
):
    monkeypatch.setattr(threads, "choose_threads", lambda: ThreadChoice(cpus=2, busy=1))
    monkeypatch.setattr(sys.stderr, "isatty", lambda: terminal)
    assert harness_main(["eval", *IN_PROCESS, "--dataset", str(corpus)]) == 0
    assert torch_calls == [1]
    notes = [line for line in capsys.readouterr().err.splitlines() if "busy" in line]
    expected = "note: 1 of 2 CPUs busy with other work: using 1 torch thread (--threads to choose)"
    assert notes == ([expected] if terminal else [])


def test_harness_eval_auto_on_quiet_cores_keeps_torchs_choice(corpus, capsys, monkeypatch, torch_calls):
    monkeypatch.setattr(threads, "choose_threads", lambda: ThreadChoice(cpus=2, busy=0))
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert harness_main(["eval", *IN_PROCESS, "--dataset", str(corpus)]) == 0
    assert torch_calls == [2]
    assert "busy" not in capsys.readouterr().err


#: A plugin that uses torch and records the thread count torch has when it is scored.
TORCH_THREADS_PLUGIN = """
import torch
from harness.plugins import unigram

class Counted(unigram.UnigramModel):
    def result_metadata(self):
        return {"threads": torch.get_num_threads()}

def load_model(dataset, *, device, checkpoint):
    return Counted(unigram.load_model(dataset, device=device, checkpoint=checkpoint).log_probs)
"""


def test_a_worker_applies_the_threads_asked(corpus, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    (tmp_path / "torch_threads.py").write_text(TORCH_THREADS_PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    output = ["--split", "test", "--output", str(tmp_path / "r.json")]
    assert harness_main(["eval", "torch_threads", "--dataset", str(corpus), "--threads", "1", *output]) == 0
    record = json.loads((tmp_path / "r.json").read_text())
    assert record["plugin_process"] == "worker" and record["plugin_metadata"] == {"threads": 1}


def train_toy(corpus, run_dir, *options: str) -> int:
    """``baselines train`` of a toy zoneout LSTM on ``corpus`` into ``run_dir``."""
    toy = ["--preset", "tiny", "--model-args", "embedding_size=8,hidden_size=8", "--batch-size", "2"]
    command = ["train", "zoneout_lstm", "--dataset", str(corpus), *toy, "--bptt", "3", "--device", "cpu"]
    return baselines_main([*command, "--output-dir", str(run_dir), *options])


def test_baselines_train_sets_the_threads_and_resumes_whatever_they_were(
    corpus, tmp_path, capsys, monkeypatch, torch_calls
):
    monkeypatch.setattr(threads, "choose_threads", lambda: ThreadChoice(cpus=2, busy=1))
    assert train_toy(corpus, tmp_path / "run", "--threads", "2", "--max-steps", "1") == 0
    assert train_toy(corpus, tmp_path / "run", "--max-steps", "2") == 0  # auto: a session's choice
    assert torch_calls == [2, 1]
    assert "resuming epoch 1 step 1" in capsys.readouterr().err
