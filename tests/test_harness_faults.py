"""The harness under faults and bad inputs (issue 27): files replaced while read, leftovers of
killed runs, checksum files that are not the dataset's, plugins that cannot be loaded, input
quirks, and what the causality audit says and shows."""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import resource
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, TEST, TRAIN, assert_one_line_error, write_corpus
from evaluation_options import protocol_options

from harness import datasets
from harness.api import ArgumentTypeError, evaluate_model
from harness.cli import main as harness_main
from harness.datasets import load_dataset
from harness.evaluate import evaluate
from harness.plugin import Chunk, ChunkScores, PluginError
from wikitext_toolkit_core import benchmarks
from wikitext_toolkit_core.benchmarks import PACKAGED_DATA
from wikitext_toolkit_core.cli import UsageError
from wikitext_toolkit_core.files import DatasetError

UTF8_BOM = b"\xef\xbb\xbf"
#: Text of a train file that replaces the real one in the middle of a run.
OTHER_TRAIN = " zebra yak zebra \n yak gnu \n"


def _vocabulary_without_cache(directory: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple:
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "reference-cache"))
    tokens = load_dataset(str(directory)).vocab.tokens
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "user-cache"))
    return tokens


def _replacing_after_first_open(monkeypatch: pytest.MonkeyPatch, target: Path, text: str) -> None:
    """The first time ``target`` is opened for reading, replace it (write a new file, rename it
    over ``target``, as the builder writes) right after the open: the reader holds the old file."""
    original = benchmarks.open_split
    replaced = False

    def opening(path: Path):
        nonlocal replaced
        handle = original(path)
        if path == target and not replaced:
            replaced = True
            staged = target.with_name(".staged")
            staged.write_text(text, encoding="utf-8")
            os.replace(staged, target)
        return handle

    monkeypatch.setattr(benchmarks, "open_split", opening)  # the checksum pass
    monkeypatch.setattr(datasets, "open_split", opening)  # the encoding pass


def test_a_train_file_replaced_during_the_checksum_pass_never_poisons_the_cache(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    train = corpus / "wiki.train.tokens"
    expected = _vocabulary_without_cache(corpus, tmp_path, monkeypatch)
    _replacing_after_first_open(monkeypatch, train, OTHER_TRAIN)
    try:
        racing = load_dataset(str(corpus))
        stream = racing.tokens("train")
    except DatasetError as error:
        assert "changed while being read; run again" in str(error)
    else:  # whatever was scored is named by the checksum of what was scored
        scored = [racing.vocab.tokens[i] for i in stream.ids]
        assert scored == train.read_text().replace("\n", " <eos> ").split()  # the new file...
        digest = hashlib.sha256(train.read_bytes()).hexdigest()
        assert stream.sha256 == racing.verify("train") == digest  # ...and its checksum
    monkeypatch.undo()
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "user-cache"))
    train.write_text(TRAIN, encoding="utf-8")  # restored: a later (warm) run is right
    assert load_dataset(str(corpus)).vocab.tokens == expected


def test_a_split_replaced_during_the_checksum_pass_is_refused_not_cached(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    test = corpus / "wiki.test.tokens"
    load_dataset(str(corpus)).vocab  # the train entry is warm; the test split is not
    _replacing_after_first_open(monkeypatch, test, " the dog \n")
    with pytest.raises(DatasetError, match=r"wiki\.test\.tokens: changed while being read; run again"):
        load_dataset(str(corpus)).tokens("test")
    monkeypatch.undo()
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "user-cache"))
    test.write_text(TEST, encoding="utf-8")
    dataset = load_dataset(str(corpus))
    words = [dataset.vocab.tokens[i] for i in dataset.tokens("test").ids]
    assert words == " ".join(TEST.replace("\n", " <eos> ").split()).split()


def test_the_result_records_the_checksum_of_the_file_it_scored(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    train = corpus / "wiki.train.tokens"
    original = train.read_bytes()
    _replacing_after_first_open(monkeypatch, train, OTHER_TRAIN)
    output = tmp_path / "result.json"
    arguments = ["eval", "unigram", "--dataset", str(corpus), "--split", "test", "--output", str(output)]
    code = harness_main(arguments)
    if code == 0:  # then it scored one file throughout, and says which
        record = json.loads(output.read_text())
        assert record["train_sha256"] == hashlib.sha256(train.read_bytes()).hexdigest()
    else:
        assert_one_line_error(capsys, "changed while being read; run again")
    monkeypatch.undo()
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "user-cache"))
    train.write_bytes(original)
    assert harness_main([*arguments, "--overwrite"]) == 0  # a result of the other train file is in place
    record = json.loads(output.read_text())
    assert record["train_sha256"] == hashlib.sha256(original).hexdigest()
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "fresh-cache"))
    assert harness_main(arguments) == 0
    assert json.loads(output.read_text())["perplexity"] == record["perplexity"]


def test_a_two_process_encoding_reads_the_file_it_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker reads the parent's open file, not whatever the path names by then (here a
    file of the same size and modification time, which no stamp check tells apart)."""
    directory = write_corpus(tmp_path / "c")
    train = directory / "wiki.train.tokens"
    train.write_text(TRAIN * 60, encoding="utf-8")
    expected = _vocabulary_without_cache(directory, tmp_path, monkeypatch)
    monkeypatch.setattr(datasets, "LARGE_FILE_BYTES", 0)
    monkeypatch.setattr(datasets, "WORKER_PIECE_BYTES", 1000)
    monkeypatch.setattr(datasets, "_cpus", lambda: 2)
    other = (TRAIN * 60).replace("cat", "cow").replace("dog", "pig")
    real_start = datasets._start_worker

    def replacing_then_starting(*args, **kwargs):  # the parent has the file open by now
        staged = train.with_name(".staged")
        staged.write_text(other, encoding="utf-8")
        status = train.stat()
        os.utime(staged, ns=(status.st_atime_ns, status.st_mtime_ns))
        os.replace(staged, train)
        return real_start(*args, **kwargs)

    monkeypatch.setattr(datasets, "_start_worker", replacing_then_starting)
    dataset = load_dataset(str(directory))
    assert dataset.vocab.tokens == expected  # the file it opened and checksummed, whole
    assert "cow" not in dataset.vocab
    monkeypatch.undo()
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "user-cache"))
    train.write_text(TRAIN * 60, encoding="utf-8")
    assert load_dataset(str(directory)).vocab.tokens == expected


# ---- checksum files ------------------------------------------------------------------------------


def test_a_checksum_file_in_the_parent_directory_is_not_the_datasets(tmp_path: Path) -> None:
    directory = write_corpus(tmp_path / "root" / "corpus")
    # An unrelated BSD-style file (not the sha256sum format) beside the corpus directory.
    (tmp_path / "root" / "SHA256SUMS").write_text("SHA256 (corpus/wiki.test.tokens) = 00\n")
    dataset = load_dataset(str(directory))
    assert len(dataset.tokens("test").ids) > 0
    assert not dataset.is_verified("test")
    # Not even one in the sha256sum format naming the corpus's files is read.
    (tmp_path / "root" / "SHA256SUMS").write_text(f"{'0' * 64}  corpus/wiki.test.tokens\n")
    assert load_dataset(str(directory)).tokens("test").sha256 != "0" * 64


@pytest.mark.parametrize("where", ["dataset", "parent"])
def test_a_binary_checksum_file_is_one_line(
    tmp_path: Path, where: str, capsys: pytest.CaptureFixture
) -> None:
    directory = write_corpus(tmp_path / "root" / "corpus")
    checksums = (directory if where == "dataset" else directory.parent) / "SHA256SUMS"
    checksums.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    code = harness_main(["eval", "unigram", "--dataset", str(directory), "--causality-audit", "0"])
    if where == "dataset":
        assert code == 2
        assert_one_line_error(capsys, str(checksums), "not a checksum file")
    else:
        assert code == 0, capsys.readouterr().err


# ---- input quirks ---------------------------------------------------------------------------------


@pytest.mark.parametrize("block_bytes", [1, 2, 1 << 23])
def test_a_byte_order_mark_is_not_a_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block_bytes: int
) -> None:
    plain = write_corpus(tmp_path / "plain")
    marked = write_corpus(tmp_path / "marked")
    for split in ("train", "test"):
        file = marked / f"wiki.{split}.tokens"
        file.write_bytes(UTF8_BOM + file.read_bytes().lstrip())
        (plain / f"wiki.{split}.tokens").write_bytes(file.read_bytes()[3:])
    monkeypatch.setattr(datasets, "READ_BLOCK_BYTES", block_bytes)
    with_mark, without = load_dataset(str(marked)), load_dataset(str(plain))
    assert with_mark.vocab.tokens == without.vocab.tokens
    assert not any("\ufeff" in token for token in with_mark.vocab.tokens)
    np.testing.assert_array_equal(with_mark.tokens("test").ids, without.tokens("test").ids)
    assert with_mark.tokens("test").oov_tokens == 0
    # The checksum stays that of the file's bytes, mark included.
    marked_test = (marked / "wiki.test.tokens").read_bytes()
    assert with_mark.tokens("test").sha256 == hashlib.sha256(marked_test).hexdigest()


def test_a_byte_order_mark_in_a_two_process_encoding_is_not_a_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = write_corpus(tmp_path / "c")
    (directory / "wiki.train.tokens").write_bytes(UTF8_BOM + (TRAIN * 40).encode())
    monkeypatch.setattr(datasets, "LARGE_FILE_BYTES", 0)
    monkeypatch.setattr(datasets, "WORKER_PIECE_BYTES", 1000)
    monkeypatch.setattr(datasets, "_cpus", lambda: 2)
    assert not any("\ufeff" in token for token in load_dataset(str(directory)).vocab.tokens)


# ---- leftovers of killed runs ----------------------------------------------------------------------


def _dead_pid() -> int:
    """The id of a process that has exited (and been reaped)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_remove_stale_temporaries_removes_only_dead_writers(tmp_path: Path) -> None:
    from wikitext_toolkit_core.files import remove_stale_temporaries

    dead, alive = _dead_pid(), os.getpid()
    stale = tmp_path / f".result.json.{dead}-0a1b2c3d.tmp"
    live = tmp_path / f".result.json.{alive}-0a1b2c3d.tmp"
    scratch = tmp_path / f".encode.{dead}-99aa00ff.tmp"
    others = [tmp_path / "result.json", tmp_path / f"result.json.{dead}-0a1b2c3d.tmp", tmp_path / ".lock"]
    for path in (stale, live, *others):
        path.write_text("x")
    scratch.mkdir()
    (scratch / "0.npy").write_text("x")
    assert remove_stale_temporaries(tmp_path) == sorted([scratch, stale])
    assert sorted(tmp_path.iterdir()) == sorted([live, *others])
    assert remove_stale_temporaries(tmp_path / "missing") == []


def test_the_next_run_removes_what_a_killed_run_left_in_the_token_cache(
    corpus: Path, isolated_cache: Path
) -> None:
    load_dataset(str(corpus)).tokens("test")
    (entry,) = (isolated_cache / "tokens" / "v1").iterdir()
    dead = _dead_pid()
    stale = [
        entry / f".{'a' * 64}.npy.{dead}-0123abcd.tmp",
        isolated_cache / "tokens" / f".encode.{dead}-0a0b0c0d.tmp",
    ]
    live = entry / f".{'b' * 64}.npy.{os.getpid()}-0123abcd.tmp"  # a writer still at work
    foreign = entry / f".{'c' * 64}.npy.{dead}-4567abcd.tmp"  # one at work in another container
    stale[0].write_bytes(b"\x93NUMPY half")
    stale[1].mkdir()
    (stale[1] / "0.npy").write_bytes(b"piece")
    live.write_bytes(b"\x93NUMPY half")
    foreign.write_bytes(b"\x93NUMPY half")
    hours_ago = time.time() - 2 * 3600
    for path in (*stale, stale[1] / "0.npy", live):
        os.utime(path, (hours_ago, hours_ago))
    load_dataset(str(corpus)).tokens("test")
    assert not any(path.exists() for path in stale)
    assert live.exists() and foreign.exists()


#: A harness run killed (SIGKILL) right after it started its encoding worker.
KILLED_RUN = """
import os, signal, sys
from harness import datasets
real = datasets._start_worker
def spawn(*args, **kwargs):
    worker, _ = real(*args, **kwargs)
    print(worker.pid, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
datasets._start_worker = spawn
datasets.LARGE_FILE_BYTES = 0
datasets._cpus = lambda: 2
datasets.load_dataset(sys.argv[1]).vocab
"""


def _is_running(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited (a zombie has)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_killed_run_leaves_no_working_worker_and_no_scratch(
    tmp_path: Path, isolated_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = write_corpus(tmp_path / "c")
    (directory / "wiki.train.tokens").write_text(TRAIN * 2000, encoding="utf-8")
    system_temp = tmp_path / "system-temp"
    system_temp.mkdir()
    environment = {**os.environ, "TMPDIR": str(system_temp), "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        [sys.executable, "-c", KILLED_RUN, str(directory)], env=environment, capture_output=True, text=True
    )
    assert run.returncode == -9, run.stderr
    worker = int(run.stdout)
    deadline = time.monotonic() + 60
    while _is_running(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _is_running(worker), "the encoding worker outlived its parent"
    pieces = [*system_temp.rglob("*.npy"), *isolated_cache.rglob("*.npy")]
    assert pieces == [], "the worker went on encoding after its parent was killed"
    assert list(system_temp.iterdir()) == []  # nothing in the system's temporary folder
    monkeypatch.setenv("TMPDIR", str(system_temp))
    hours_ago = time.time() - 2 * 3600
    for path in (isolated_cache / "tokens").rglob("*"):
        os.utime(path, (hours_ago, hours_ago))
    load_dataset(str(directory)).vocab  # a run an hour later clears the scratch directory
    assert [path.name for path in (isolated_cache / "tokens").iterdir()] == ["v1"]


# ---- plugins that cannot be loaded, or that fail ----------------------------------------------------

#: A plugin whose factory or model fails where its source says (``FAIL`` is replaced).
PLUGIN_SOURCE = """
import numpy as np
from harness import ChunkScores

class Model:
    def reset(self, batch_size):
        FAIL_RESET

    def score(self, chunk):
        FAIL_SCORE
        return ChunkScores(np.full(chunk.targets.shape, -1.0, dtype=SCORE_DTYPE))

def load_model(dataset, *, device, checkpoint):
    FAIL_LOAD
    return Model()
"""


def _plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, **parts: str) -> str:
    """Write plugin module ``name`` from :data:`PLUGIN_SOURCE` with ``parts`` (FAIL_LOAD=...,
    ...; unset ones do nothing) and make it importable; returns its name."""
    source = PLUGIN_SOURCE
    for part in ("FAIL_RESET", "FAIL_SCORE", "FAIL_LOAD", "SCORE_DTYPE"):
        source = source.replace(part, parts.get(part, "np.float64" if part == "SCORE_DTYPE" else "pass"))
    (tmp_path / "plugins").mkdir(exist_ok=True)
    (tmp_path / "plugins" / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path / "plugins"))
    return name


@pytest.mark.parametrize(
    "name, source, expected",
    [
        ("", None, "plugin '' names no module"),
        (":load_model", None, "plugin ':load_model' names no module"),
        ("broken_syntax", "def load_model(:\n", "failed to import: SyntaxError"),
        ("broken_import", "from os import no_such_name\n", "failed to import: ImportError"),
        ("raises_at_import", "raise RuntimeError('no GPU here')\n", "RuntimeError: no GPU here (at "),
    ],
)
def test_a_plugin_that_cannot_be_imported_is_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    corpus: Path,
    name: str,
    source: str | None,
    expected: str,
) -> None:
    if source is not None:
        (tmp_path / "plugins").mkdir()
        (tmp_path / "plugins" / f"{name}.py").write_text(source)
        monkeypatch.syspath_prepend(str(tmp_path / "plugins"))
    assert harness_main(["eval", name, "--dataset", str(corpus)]) == 2
    assert_one_line_error(capsys, f"error: plugin {name!r}", expected)


def test_a_factory_that_raises_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, corpus: Path
) -> None:
    name = _plugin(tmp_path, monkeypatch, "raising_factory", FAIL_LOAD="raise ValueError('bad\\nweights')")
    assert harness_main(["eval", name, "--dataset", str(corpus)]) == 2
    assert_one_line_error(
        capsys,
        "error: plugin 'raising_factory' cannot be loaded",
        "ValueError: bad weights",
        "raising_factory.py:",
    )


@pytest.mark.parametrize(
    "fail, code, place",
    [
        (
            "FAIL_SCORE",
            "if getattr(self, 'scored', False): raise KeyError(7)\n        self.scored = True",
            r"^raising_score c/test: score\(\) on tokens 100\.\.199 raised an exception \(traceback below\)$",
        ),
        ("FAIL_RESET", "raise KeyError(7)", r"^raising_reset c/test: reset\(1\) raised an exception"),
    ],
)
def test_a_model_that_raises_is_named_with_the_position_before_its_traceback(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    fail: str,
    code: str,
    place: str,
) -> None:
    directory = write_corpus(tmp_path / "c", test=TEST * 30)
    name = _plugin(tmp_path, monkeypatch, f"raising_{fail[5:].lower()}", **{fail: code})
    with pytest.raises(KeyError):  # a bug in the plugin keeps its traceback
        harness_main(
            [
                "eval",
                name,
                "--dataset",
                str(directory),
                "--split",
                "test",
                "--audit",
                "0",
                "--causality-audit",
                "0",
            ]
        )
    assert re.search(place, capsys.readouterr().err, re.MULTILINE)


def test_a_model_that_raises_in_either_pass_is_named_with_the_position(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, corpus: Path
) -> None:
    name = _plugin(tmp_path, monkeypatch, "raising_in_audit", FAIL_SCORE="raise KeyError(7)")
    passes = set()
    for _ in range(40):  # the pass that comes first is drawn afresh each time (both within 40: 1 - 2^-39)
        if len(passes) == 2:
            break
        # In its worker process: the traceback, then one line naming the call.
        assert harness_main(["eval", name, "--dataset", str(corpus), "--split", "test"]) == 2
        error = capsys.readouterr().err
        call = r"raising_in_audit toy/test: score\(\) on tokens 0\.\.24( in the causality audit)?"
        found = re.match(rf"{call} raised an exception \(traceback below\)\nTraceback ", error)
        assert found, error
        assert re.search(rf"\nerror: {call} raised KeyError: 7 \(at .*raising_in_audit.py:\d+\)\n$", error)
        passes.add(found.group(1))
    assert passes == {None, " in the causality audit"}


#: Options that skip the audits, which the models of :data:`PLUGIN_SOURCE` do not pass.
UNAUDITED = ["--audit", "0", "--causality-audit", "0"]


def test_a_numpy_integer_parameter_count_is_recorded_as_an_integer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, corpus: Path
) -> None:
    name = _plugin(tmp_path, monkeypatch, "numpy_count", FAIL_LOAD="Model.num_parameters = np.int64(12)")
    out = tmp_path / "out"
    assert (
        harness_main(
            ["eval", name, "--dataset", str(corpus), "--split", "test", "--output-dir", str(out), *UNAUDITED]
        )
        == 0
    )
    (record,) = out.glob("*.json")
    assert json.loads(record.read_text())["num_parameters"] == 12


@pytest.mark.parametrize(
    "name, code, expected",
    [
        (
            "float_count",
            "Model.num_parameters = 12.0",
            "num_parameters must be a non-negative integer, got 12.0 (float)",
        ),
        (
            "negative_count",
            "Model.num_parameters = -1",
            "num_parameters must be a non-negative integer, got -1",
        ),
        (
            "numpy_metadata",
            "Model.result_metadata = lambda self: {'mass': np.float32(1)}",
            "result_metadata() returned a dict that is not JSON: Object of type float32",
        ),
        (
            "nan_metadata",
            "Model.result_metadata = lambda self: {'mass': float('nan')}",
            "result_metadata() returned a dict that is not JSON: Out of range float values",
        ),
        (
            "blank_adaptation",
            "Model.result_metadata = lambda self: {'test_time_adaptation': ' '}",
            "result_metadata(): test_time_adaptation must be a non-empty string saying how the model adapts",
        ),
    ],
)
def test_what_a_plugin_adds_to_its_result_is_checked_before_any_file_is_written(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    corpus: Path,
    name: str,
    code: str,
    expected: str,
) -> None:
    _plugin(tmp_path, monkeypatch, name, FAIL_LOAD=code)
    out = tmp_path / "out"
    assert harness_main(["eval", name, "--dataset", str(corpus), "--output-dir", str(out), *UNAUDITED]) == 2
    assert_one_line_error(capsys, f"error: {name}", expected)
    assert not out.exists() or list(out.iterdir()) == []


@pytest.mark.parametrize("dtype", ["np.complex128", "np.complex64"])
def test_complex_scores_are_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, corpus: Path, dtype: str
) -> None:
    name = _plugin(tmp_path, monkeypatch, f"complex_{dtype[3:]}", SCORE_DTYPE=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code = harness_main(["eval", name, "--dataset", str(corpus), "--audit", "0"])
    assert code == 2
    assert_one_line_error(capsys, "target_log_probs is a complex array", "not real log-probabilities")


def test_complex_torch_scores_are_refused_in_one_line() -> None:
    torch = pytest.importorskip("torch")
    from harness.evaluate import _as_float64

    with pytest.raises(PluginError, match=r"^m: target_log_probs is a complex tensor \(torch.complex64\)"):
        _as_float64(torch.zeros(2, 3, dtype=torch.complex64), "m: target_log_probs")


# ---- the causality audit: progress and diagnosis ------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class _ConstantScores:
    """Scores every target -1 (a probability of 0.37 for each word: unnormalised, not leaking);
    its full distributions, when it gives them, say the same."""

    def __init__(self, vocab_size: int, give_distributions: bool) -> None:
        self.vocab_size, self.give_distributions = vocab_size, give_distributions
        self.stderr_at_first_call: str | None = None

    def reset(self, batch_size: int) -> None:
        pass

    def score(self, chunk: Chunk) -> ChunkScores:
        if self.stderr_at_first_call is None:
            self.stderr_at_first_call = sys.stderr.getvalue() if isinstance(sys.stderr, io.StringIO) else ""
        wanted = chunk.distribution_mask
        rows = None
        if self.give_distributions and wanted is not None:
            rows = np.full((int(wanted.sum()), self.vocab_size), -1.0)
        return ChunkScores(np.full(chunk.targets.shape, -1.0), rows)


def _causality_audit(model, dataset_name: str, **options):
    dataset = load_dataset(dataset_name)
    return evaluate(
        model,
        dataset.tokens("test").ids,
        eos_id=dataset.vocab.eos_id,
        vocab_size=len(dataset.vocab),
        name="m",
        **protocol_options({"causality_seed": 1, "audit_positions": 0, **options}),
    ).causality


def test_the_causality_audit_shows_progress_from_its_first_call(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stderr", _Terminal())
    for seed in range(1, 100):  # the first seed whose draw puts the audit's pass first
        model = _ConstantScores(len(load_dataset(str(corpus)).vocab), give_distributions=False)
        if _causality_audit(model, str(corpus), causality_seed=seed).audit_pass == "first":
            break
    assert "m causality audit" in (model.stderr_at_first_call or ""), model.stderr_at_first_call


def test_the_causality_audit_tells_no_more_than_the_evidence_shows() -> None:
    """Scores of -1 for every token (0.37 each, 3,679 in all over PTB's vocabulary) with no full
    distributions to check: unnormalised, or reading the target; the audit cannot tell which."""
    model = _ConstantScores(10_000, give_distributions=False)
    with pytest.raises(
        PluginError, match=r"^m: causality audit failed: .* get [\d.e+]+ times the probability"
    ) as error:
        _causality_audit(model, "ptb")
    assert str(error.value).endswith(
        "it reads the token it predicts, or its scores are not normalised (it gives no full "
        "distributions, so the audit cannot tell which)"
    )


# ---- first contact ------------------------------------------------------------------------------------


def _subcommand_parsers() -> dict[str, argparse.ArgumentParser]:
    from harness.cli import build_parser

    (commands,) = (
        action for action in build_parser()._actions if action.choices and action.dest == "command"
    )
    return dict(commands.choices)


@pytest.mark.parametrize("command", ["eval", "list", "download", "contamination"])
def test_every_option_of_the_harness_shows_its_default(command: str) -> None:
    parser = _subcommand_parsers()[command]
    for action in parser._actions:
        if action.option_strings and action.dest != "help":
            assert action.help and re.search(r"\bdefault\b|required", action.help), (command, action.dest)


def test_every_option_of_hf_tiny_shows_its_default() -> None:
    from harness.tools import hf_tiny

    for action in hf_tiny.build_parser()._actions:
        if action.option_strings and action.dest != "help":
            assert action.help and re.search(r"\bdefault\b|required", action.help), action.dest


def test_hf_tiny_names_a_missing_train_file_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from harness.tools import hf_tiny

    missing = tmp_path / "no-such.tokens"
    assert hf_tiny.main([str(tmp_path / "out"), "--train", str(missing)]) == 2
    assert_one_line_error(capsys, "--train", str(missing), "no such file")
    assert not (tmp_path / "out").exists()


def test_the_dev_tools_refuse_an_unusable_path_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from harness.tools import detokenizer_round_trip, hf_tiny

    text, binary = tmp_path / "wiki.train.tokens", tmp_path / "weights.bin"
    text.write_text(" = A = \n", encoding="utf-8")
    binary.write_bytes(b"\xff\xfe\x00")
    assert hf_tiny.main([str(text), "--train", str(text)]) == 2  # before building anything
    assert_one_line_error(capsys, f"OUT {text}: is a file; name a directory")
    assert hf_tiny.main([str(text / "model"), "--train", str(text)]) == 2
    assert_one_line_error(capsys, f"{text} is not a directory")
    assert detokenizer_round_trip.main([str(tmp_path / "missing"), "--style", "ptb"]) == 2
    assert_one_line_error(capsys, "no such file")
    assert detokenizer_round_trip.main([str(binary), "--style", "ptb"]) == 2
    assert_one_line_error(capsys, f"{binary}: not UTF-8 text (at byte 0)")


def test_eval_without_a_dataset_prints_the_table_of_what_it_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """A plugin that serves only PTB: one evaluation, still the table the README promises."""
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "ptb_only.py").write_text(
        "from harness import ModelUnavailable\n"
        "from harness.plugins import unigram\n"
        "def load_model(dataset, *, device, checkpoint):\n"
        "    if dataset.name != 'ptb':\n"
        "        raise ModelUnavailable('no checkpoint for it: train one')\n"
        "    return unigram.load_model(dataset, device=device, checkpoint=checkpoint)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "plugins"))
    assert (
        harness_main(["eval", "ptb_only", "--split", "test", "--causality-audit", "1", "--audit", "1"]) == 0
    )
    captured = capsys.readouterr()
    assert "wikitext-2: no checkpoint for it: train one" in captured.err
    assert "wikitext-103: not found locally" in captured.err
    lines = captured.out.splitlines()
    header = next(index for index, line in enumerate(lines) if line.startswith("dataset "))
    assert lines[header - 1] == "model: ptb_only"
    assert re.match(r"ptb +test +82,430 +639\.\d\d ", lines[header + 1])


def test_results_record_no_absolute_machine_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, real_data_dir: Path
) -> None:
    from harness.results import resolve_recorded_path

    write_corpus(tmp_path / "work" / "corpus")
    monkeypatch.chdir(tmp_path / "work")
    outputs = tmp_path / "work" / "out"
    for dataset, extra in (("ptb", ["--data-dir", str(real_data_dir)]), ("corpus", []), ("wikitext-2", [])):
        arguments = [
            "eval",
            "unigram",
            "--dataset",
            dataset,
            "--split",
            "test",
            "--output-dir",
            str(outputs),
            *extra,
        ]
        assert harness_main([*arguments, "--causality-audit", "1", "--audit", "1"]) == 0
    records = {path.name.split(".")[-3]: json.loads(path.read_text()) for path in outputs.glob("*.json")}
    expected = {
        "ptb": "<data>/ptb",
        "corpus": "corpus",
        "wikitext-2": "<repo>/wikitext_toolkit_core/data/wikitext-2",
    }
    assert {name: record["dataset_path"] for name, record in records.items()} == expected
    for name, record in records.items():
        for key in ("dataset_path", "checkpoint", "token_log_probs_file"):
            assert not Path(record[key] or "").is_absolute(), (name, key, record[key])
        assert (outputs / record["token_log_probs_file"]).is_file()  # beside the JSON
    assert resolve_recorded_path("<data>/ptb", real_data_dir) == real_data_dir / "ptb"
    assert (
        resolve_recorded_path("<repo>/wikitext_toolkit_core/data/wikitext-2") == PACKAGED_DATA / "wikitext-2"
    )
    assert resolve_recorded_path("corpus") == Path("corpus")
    assert resolve_recorded_path("/old/absolute/ptb") == Path("/old/absolute/ptb")  # older results


def test_a_dead_writers_temporary_changed_recently_is_spared_when_asked(tmp_path: Path) -> None:
    from wikitext_toolkit_core.files import remove_stale_temporaries

    dead = _dead_pid()
    recent, old = (tmp_path / f".result.json.{dead}-{suffix}.tmp" for suffix in ("0a1b2c3d", "4e5f6a7b"))
    scratch = tmp_path / f".encode.{dead}-99aa00ff.tmp"  # old itself, a file in it written just now
    for path in (recent, old):
        path.write_text("x")
    scratch.mkdir()
    hours_ago = time.time() - 2 * 3600
    for path in (old, scratch):
        os.utime(path, (hours_ago, hours_ago))
    (scratch / "0.npy").write_text("x")
    os.utime(scratch, (hours_ago, hours_ago))
    assert remove_stale_temporaries(tmp_path, idle_seconds=3600) == [old]
    assert remove_stale_temporaries(tmp_path) == sorted([scratch, recent])


# ---- output directories -------------------------------------------------------------------------------


def _eval_into(directory: Path, out: Path, *options: str) -> int:
    """``harness eval unigram`` of the test split of ``directory`` into ``--output-dir out``."""
    arguments = ["eval", "unigram", "--dataset", str(directory), "--split", "test", "--output-dir", str(out)]
    return harness_main([*arguments, *UNAUDITED, *options])


def test_output_dir_refuses_a_same_named_result_of_another_dataset_unless_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    first = write_corpus(tmp_path / "a" / "toy")
    second = write_corpus(tmp_path / "b" / "toy", test=TEST.replace("red cat", "red dog"))
    out = tmp_path / "out"
    assert _eval_into(first, out) == 0
    assert _eval_into(first, out) == 0  # the same dataset: a rerun replaces it
    path = out / "harness.plugins.unigram.toy.test.json"
    before = path.read_bytes()
    recorded = json.loads(before)["dataset_sha256"]
    now = hashlib.sha256((second / "wiki.test.tokens").read_bytes()).hexdigest()
    capsys.readouterr()
    assert _eval_into(second, out) == 2
    message = (
        f"{path}: holds a result of another dataset named toy (test split {recorded[:12]}, now {now[:12]}); "
        "pass "
    )
    assert capsys.readouterr().err == f"error: {message}--overwrite to replace it, or write elsewhere\n"
    with pytest.raises(UsageError, match=re.escape(f"{message}overwrite=True to replace it")):
        evaluate_model("unigram", second, splits="test", output_dir=out, causality_audit=0, audit=0)
    assert path.read_bytes() == before  # refused before scoring: nothing written
    assert _eval_into(second, out, "--overwrite") == 0
    assert json.loads(path.read_text())["dataset_sha256"] == now


def test_a_full_disk_while_the_token_log_probabilities_are_written_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """numpy writes an array with ``fwrite``, whose short write on a full disk it reports as an
    ``OSError`` with no error number (or not at all): here the file size limit cuts the write as
    a full disk does (``EFBIG`` rather than ``ENOSPC``)."""
    directory = write_corpus(tmp_path / "c", test=TEST * 2000)  # 400 kB of log-probabilities
    out = tmp_path / "out"
    assert _eval_into(directory, tmp_path / "warm") == 0  # the token cache is written beforehand
    capsys.readouterr()
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, limits[1]))
    try:
        status = _eval_into(directory, out)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, handler)
    captured = capsys.readouterr()
    assert status == 2
    assert "perplexity" in captured.out  # the figure is not lost
    last = captured.err.splitlines()[-1]
    assert re.fullmatch(
        r"error: .* writing .*\.logprobs\.npy; free some space and rerun the same command", last
    )
    assert str(out) in last
    assert not [path for path in out.iterdir() if path.name != ".lock"]  # nothing half-written


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc")
@pytest.mark.parametrize("where", ["/proc", "/proc/results"])
def test_an_output_dir_whose_file_system_takes_no_files_is_refused_before_scoring(
    corpus: Path, capsys: pytest.CaptureFixture, where: str
) -> None:
    assert _eval_into(corpus, Path(where)) == 2
    assert_one_line_error(capsys, f"--output-dir {where}: cannot ")
    with pytest.raises(UsageError, match=f"^output_dir {where}: cannot "):
        evaluate_model("unigram", corpus, splits="test", output_dir=where, causality_audit=0)


def test_an_empty_output_dir_is_refused_not_read_as_the_working_directory(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.chdir(tmp_path)
    assert harness_main(["eval", "unigram", "--dataset", str(corpus), "--output-dir", "", *UNAUDITED]) == 2
    assert_one_line_error(capsys, "--output-dir is empty")
    with pytest.raises(UsageError, match="^output_dir is empty"):
        evaluate_model("unigram", corpus, splits="test", output_dir="", causality_audit=0)
    assert not list(tmp_path.glob("*.json"))


@pytest.mark.parametrize(
    "options, message",
    [
        ({"dataset": 3}, "dataset must be a benchmark name, a directory or a Dataset, got 3 (int)"),
        ({"splits": None}, "splits must be a split name or an iterable of split names, got None"),
        (
            {"splits": ["test", 1]},
            "splits must be a split name or an iterable of split names, got ['test', 1]",
        ),
        ({"protocol": 5}, "protocol must be a string (stream or documents), got 5 (int)"),
        ({"batch_size": "10"}, "batch_size must be an integer, got '10' (str)"),
        ({"bptt": 2.5}, "bptt must be an integer, got 2.5 (float)"),
        ({"audit": True}, "audit must be an integer, got True (bool)"),
        ({"causality_audit": "x"}, "causality_audit must be an integer, got 'x' (str)"),
        ({"causality_tolerance": "0"}, "causality_tolerance must be a number or None, got '0' (str)"),
        ({"device": None}, "device must be a string, got None (NoneType)"),
        ({"model_args": [("a", 1)]}, "model_args must be a mapping or None, got [('a', 1)] (list)"),
        ({"checkpoint": 7}, "checkpoint must be a path or None, got 7 (int)"),
        ({"data_dir": 1}, "data_dir must be a path or None, got 1 (int)"),
        ({"output_dir": 1.5}, "output_dir must be a path or None, got 1.5 (float)"),
        ({"overwrite": "yes"}, "overwrite must be True or False, got 'yes' (str)"),
        ({"progress": None}, "progress must be True or False, got None (NoneType)"),
        ({"in_process": 1}, "in_process must be True or False, got 1 (int)"),
    ],
)
def test_evaluate_model_names_a_wrongly_typed_argument(
    corpus: Path, capsys: pytest.CaptureFixture, options: dict, message: str
) -> None:
    arguments = {"dataset": corpus, "splits": "test", **options}
    with pytest.raises(ArgumentTypeError, match=f"^{re.escape(message)}$") as raised:
        evaluate_model("unigram", **arguments)
    assert isinstance(raised.value, TypeError)
    assert capsys.readouterr() == ("", "")
