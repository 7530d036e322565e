"""The toolkit's messages are log records (``logging.getLogger(__name__)``): a command shows them
as the plain lines it always printed, once, nested or concurrent, and a library caller who
configures no logging sees the warnings (by Python's last-resort handler) and not the notes."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPO, write_corpus

from wikitext_toolkit_core.cli import TOOLKIT_PACKAGES, ArgumentParser, messages_on_stderr, run
from wikitext_toolkit_core.errors import ToolkitError


def command(handler: Callable[[], None]) -> ArgumentParser:
    """A tool of one command that calls ``handler``."""
    parser = ArgumentParser(prog="tool")
    parser.set_defaults(handler=lambda args: handler())
    return parser


def logged() -> None:
    logging.getLogger("baselines.plugin_bridge").info("zoneout_lstm: using checkpoint %s", "best.pt")
    logging.getLogger("harness.token_cache").warning("note: a %s note", "warning's")
    logging.getLogger("harness.worker").error("call raised an exception (traceback below)\nTraceback ...")
    logging.getLogger("wikitext_toolkit_core.files").debug("never shown")
    logging.getLogger("urllib3").warning("another library's: not the command's")


def loggers_settings() -> list[tuple[int, bool, list[logging.Handler]]]:
    return [
        (logger.level, logger.propagate, list(logger.handlers))
        for logger in map(logging.getLogger, TOOLKIT_PACKAGES)
    ]


def test_a_commands_messages_are_its_plain_lines_on_stderr(capsys, caplog):
    before = loggers_settings()
    assert run(command(logged), []) == 0
    assert capsys.readouterr().err == (
        "zoneout_lstm: using checkpoint best.pt\n"
        "note: a warning's note\n"
        "call raised an exception (traceback below)\nTraceback ...\n"
    )
    assert [record.name for record in caplog.records] == ["urllib3"]  # the toolkit's went nowhere else
    assert loggers_settings() == before


def test_nested_and_concurrent_commands_show_each_message_once(capsys):
    assert run(command(lambda: run(command(logged), [])), []) == 0
    assert capsys.readouterr().err.count("note: a warning's note\n") == 1
    second_in, first_out = threading.Event(), threading.Event()

    def first() -> None:
        second_in.wait(timeout=60)  # both commands run
        logging.getLogger("harness").info("first")

    def second() -> None:
        second_in.set()
        first_out.wait(timeout=60)  # the first command has ended: this one still shows its lines
        logging.getLogger("harness").info("second")

    def first_command() -> None:
        run(command(first), [])
        first_out.set()

    seconds = threading.Thread(target=run, args=(command(second), []))
    firsts = threading.Thread(target=first_command)
    for thread in (seconds, firsts):
        thread.start()
    for thread in (seconds, firsts):
        thread.join(timeout=60)
    assert capsys.readouterr().err == "first\nsecond\n"


def test_an_error_line_is_still_printed_after_the_messages(capsys):
    def failing() -> None:
        logging.getLogger("harness.datasets").info("note: encoding x")
        raise ToolkitError("bad")

    assert run(command(failing), []) == 2
    assert capsys.readouterr().err == "note: encoding x\nerror: bad\n"


#: A library caller's script: a dataset whose token cache cannot be written (a warning) and a
#: checkpoint announced (a note), with ``logging.basicConfig(CONFIG)`` first when given.
LIBRARY_CALLER = """
import logging, sys
from pathlib import Path
if sys.argv[2]:
    logging.basicConfig(level=getattr(logging, sys.argv[2]))
from baselines.plugin_bridge import announce_checkpoint
from harness.datasets import load_dataset
load_dataset(sys.argv[1]).vocab
announce_checkpoint("zoneout_lstm", Path("best.pt"))
"""


@pytest.mark.parametrize(
    "configured, expected",
    [
        ("", ["note: cannot write the token cache in {cache} ("]),
        (
            "INFO",
            [
                "WARNING:harness.datasets:note: cannot write the token cache in {cache} (",
                "INFO:baselines.plugin_bridge:zoneout_lstm: using checkpoint best.pt",
            ],
        ),
    ],
    ids=["unconfigured", "basicConfig"],
)
def test_a_library_caller_gets_each_message_once_as_its_logging_says(tmp_path: Path, configured, expected):
    corpus = write_corpus(tmp_path / "toy")
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    environment = {**os.environ, "HARNESS_CACHE_DIR": str(blocker), "PYTHONPATH": str(REPO)}
    finished = subprocess.run(
        [sys.executable, "-c", LIBRARY_CALLER, str(corpus), configured],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
        check=True,
    )
    lines = finished.stderr.splitlines()
    assert len(lines) == len(expected), finished.stderr
    for line, start in zip(lines, expected, strict=True):
        assert line.startswith(start.format(cache=blocker)), finished.stderr


def test_messages_on_stderr_restores_what_the_caller_configured():
    logger = logging.getLogger("leaderboard")
    logger.setLevel(logging.ERROR)
    try:
        with messages_on_stderr():
            assert (logger.level, logger.propagate) == (logging.INFO, False)
        assert (logger.level, logger.propagate) == (logging.ERROR, True)
    finally:
        logger.setLevel(logging.NOTSET)
