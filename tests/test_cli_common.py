"""One command-line plumbing for the four tools (issue 18, item 3): same handler attribute,
same error contract (one line and exit 2 for user errors, 130 on Ctrl-C, tracebacks for bugs),
console scripts beside ``python -m``, and a shared module that needs no torch."""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
from importlib import import_module
from pathlib import Path

import pytest
from conftest import REPO

import baselines.cli
import harness.cli
import leaderboard.cli
import wikitext_builder.cli
from wikitext_toolkit_core.cli import ArgumentParser, UsageError, positive_float, positive_int, run
from wikitext_toolkit_core.errors import ToolkitError

TOOLS = {
    "lm-harness": harness.cli,
    "lm-baselines": baselines.cli,
    "lm-leaderboard": leaderboard.cli,
    "wikitext-builder": wikitext_builder.cli,
}


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Every leaf subcommand of ``parser``, by its full prog name."""
    leaves = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                leaves.update(_subcommands(sub) or {sub.prog: sub})
    return leaves


@pytest.mark.parametrize("module", TOOLS.values(), ids=TOOLS.keys())
def test_every_subcommand_sets_handler_and_uses_the_shared_parser(module) -> None:
    parser = module.build_parser()
    assert isinstance(parser, ArgumentParser)
    leaves = _subcommands(parser)
    assert leaves
    for prog, sub in leaves.items():
        assert callable(sub.get_default("handler")), prog
        assert sub.get_default("run") is None, prog


def test_console_scripts_run_the_mains(monkeypatch: pytest.MonkeyPatch) -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(scripts) == set(TOOLS)
    for name, target in scripts.items():
        module, _, attribute = target.partition(":")
        monkeypatch.setattr(TOOLS[name], "main", lambda name=name: len(name))
        assert getattr(import_module(module), attribute)() == len(name), name


@pytest.mark.parametrize(
    "module, argv",
    [
        (harness.cli, ["eval", "unigram", "--bptt", "0"]),
        (baselines.cli, ["train", "zoneout_lstm", "--dataset", "ptb", "--batch-size", "x"]),
        (leaderboard.cli, ["compare", "a.json"]),
        (wikitext_builder.cli, ["--workers", "0"]),
    ],
)
def test_argparse_errors_are_one_line_and_exit_2(
    module, argv: list[str], capsys: pytest.CaptureFixture
) -> None:
    assert module.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err


@pytest.mark.parametrize(
    "module, argv",
    [
        (harness.cli, ["eval", "unigram", "--out", "r.json"]),  # --output, --output-dir
        (baselines.cli, ["train", "zoneout_lstm", "--dataset", "ptb", "--max-ep", "1"]),  # --max-epochs
        (leaderboard.cli, ["build", "r.json", "--output-dir", "d", "--include"]),  # --include-unaudited
        (wikitext_builder.cli, ["build", "--out", "d"]),  # --output-dir
        (wikitext_builder.cli, ["merge", "--out", "d", "c.sqlite"]),
    ],
)
def test_options_must_be_spelled_out(module, argv: list[str]) -> None:
    """No abbreviated options, in any subcommand of the four tools: argparse's prefix matching
    would tie a script to whichever options exist today. (Parsed only: nothing runs.)"""
    parser = module.build_parser()
    with pytest.raises(UsageError, match="^unrecognized arguments: --"):
        parser.parse_args(argv)
    for sub in _subcommands(parser).values():
        assert sub.allow_abbrev is False, sub.prog


@pytest.mark.parametrize("text, value", [("0.5", 0.5), ("60", 60.0), ("1e-3", 0.001)])
def test_positive_float_accepts_finite_numbers_above_0(text: str, value: float) -> None:
    assert positive_float(text) == value


@pytest.mark.parametrize(
    "text, message",
    [
        ("0", "greater than 0"),
        ("-1", "greater than 0"),
        ("inf", "finite"),
        ("nan", "finite"),
        ("x", "not a number"),
    ],
)
def test_positive_float_refuses_the_rest(text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        positive_float(text)


def _parser(handler) -> ArgumentParser:
    parser = ArgumentParser(prog="tool")
    parser.add_argument("--size", type=positive_int, default=1)
    parser.set_defaults(handler=handler)
    return parser


class ToolError(ToolkitError):
    """A tool's own error type."""


def test_run_contract(capsys: pytest.CaptureFixture) -> None:
    def handler(args: argparse.Namespace) -> int:
        if args.size == 2:
            raise UsageError("options do not fit")
        if args.size == 3:
            raise ToolError("a missing file")
        if args.size == 4:
            raise KeyboardInterrupt
        if args.size == 5:
            raise ValueError("a bug")
        return 0

    assert run(_parser(handler), []) == 0
    for size, line in (
        (0, "error: argument --size: must be at least 1, got 0"),
        (2, "error: options do not fit"),
        (3, "error: a missing file"),
    ):
        assert run(_parser(handler), ["--size", str(size)]) == 2
        assert capsys.readouterr().err == line + "\n"
    assert run(_parser(handler), ["--size", "4"], interrupted="interrupted: rerun to resume") == 130
    assert capsys.readouterr().err == "interrupted: rerun to resume\n"
    with pytest.raises(ValueError, match="a bug"):  # a bug keeps its traceback
        run(_parser(handler), ["--size", "5"])


@pytest.mark.parametrize(
    "argv",
    [
        ["harness", "list"],
        ["harness", "eval", "unigram", "--dataset", "ptb", "--split", "valid", "--output", "OUT"],
        [
            "leaderboard",
            "compare",
            "results/ptb/baselines.zoneout_lstm.ptb.test.json",
            "results/ptb/baselines.pointer_sentinel.ptb.test.json",
        ],
    ],
    ids=["harness-list", "harness-eval", "leaderboard-compare"],
)
def test_a_reader_that_stops_reading_costs_no_work(argv: list[str], tmp_path: Path) -> None:
    """``python -m harness eval ... --output FILE | head -1``: once the reader has gone, the command
    still writes its result, then exits with the shell's SIGPIPE status, 141, and no traceback
    (unbuffered, so the first line printed meets the closed pipe at once)."""
    output = tmp_path / "result.json"
    writes_a_file = "OUT" in argv
    argv = [str(output) if part == "OUT" else part for part in argv]
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before the first line is written
    try:
        ran = subprocess.run(
            [sys.executable, "-m", *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            cwd=REPO,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    finally:
        os.close(write_end)
    said = [line for line in ran.stderr.decode().splitlines() if not line.startswith("ptb/valid: audited: ")]
    assert (ran.returncode, said) == (141, [])  # nothing on stderr but harness eval's audit line
    assert output.is_file() == writes_a_file


def test_a_command_started_with_standard_output_closed_still_runs() -> None:
    """``python -m harness list >&-``: Python's ``sys.stdout`` is None; the output goes nowhere."""
    ran = subprocess.run(
        [sys.executable, "-m", "harness", "list"],
        stderr=subprocess.PIPE,
        cwd=REPO,
        preexec_fn=lambda: os.close(1),  # noqa: PLW1509 (no threads in the child before exec)
    )
    assert (ran.returncode, ran.stderr.decode()) == (0, "")


def test_a_broken_pipe_other_than_standard_output_is_a_bug(capsys: pytest.CaptureFixture) -> None:
    def handler(args: argparse.Namespace) -> int:
        raise BrokenPipeError("a worker's pipe")

    with pytest.raises(BrokenPipeError, match="a worker's pipe"):
        run(_parser(handler), [])


@pytest.mark.parametrize(
    "module, command",
    [
        (leaderboard.cli, "command_build"),
        (baselines.cli, "command_tune"),
        (harness.cli, "command_list"),
        (wikitext_builder.cli, "command_stats"),
    ],
)
def test_a_bug_in_any_tool_keeps_its_traceback(module, command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def buggy(args: argparse.Namespace) -> int:
        raise ValueError("a bug, not a user error")

    monkeypatch.setattr(module, command, buggy)
    argv = {
        "command_build": ["build", "results", "--output-dir", "x"],
        "command_tune": ["tune", "--dataset", "ptb"],
        "command_list": ["list"],
        "command_stats": ["stats", "corpus"],
    }[command]
    with pytest.raises(ValueError, match="a bug"):
        module.main(argv)


def test_the_shared_module_is_stdlib_only_and_import_harness_needs_no_torch() -> None:
    """``wikitext_toolkit_core.cli`` imports the standard library and ``wikitext_toolkit_core.errors`` (which
    imports nothing, ``tests/test_errors.py`` checks)."""
    tree = ast.parse((REPO / "wikitext_toolkit_core" / "cli.py").read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    outside = {name for name in imported if name.split(".")[0] not in sys.stdlib_module_names}
    assert outside <= {"__future__", "wikitext_toolkit_core.errors"}, outside
    code = (
        "import sys, harness, wikitext_toolkit_core.cli, wikitext_builder.cli; print('torch' in sys.modules)"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert completed.stdout.strip() == "False"


def test_no_tool_defines_its_own_usage_error() -> None:
    for module in TOOLS.values():
        own = [
            name
            for name, value in vars(module).items()
            if isinstance(value, type)
            and issubclass(value, Exception)
            and value.__module__ == module.__name__
        ]
        assert own == [], module.__name__


def test_check_output_dir_refuses_an_input_or_a_write_over_one(tmp_path) -> None:
    from wikitext_toolkit_core.cli import check_output_dir

    source = tmp_path / "pool.jsonl"
    source.write_text("{}\n")
    with pytest.raises(UsageError, match="is .*, an input of this command"):
        check_output_dir(tmp_path, "--output-dir", inputs=[tmp_path])
    with pytest.raises(UsageError, match="would overwrite .*pool.jsonl, an input of this command"):
        check_output_dir(tmp_path, "--output-dir", inputs=[source], writes=["stats.json", "pool.jsonl"])
    assert check_output_dir(tmp_path / "out", "--output-dir", inputs=[source], writes=["pool.jsonl"]) == (
        tmp_path / "out"
    )
