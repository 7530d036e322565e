"""The command-line plumbing shared by the toolkit's four tools.

``wikitext-builder``, ``lm-harness``, ``lm-baselines`` and ``lm-leaderboard`` (also run as
``python -m PACKAGE``) each build an :class:`ArgumentParser` whose subcommands set ``handler``
(``parser.set_defaults(handler=command)``, ``command(args) -> exit status``) and hand it to
:func:`run`, which gives every tool the same contract:

- a user error, a :class:`wikitext_toolkit_core.errors.ToolkitError` (:class:`UsageError` or another package's
  error type: a missing file, a checksum mismatch, a plugin that cannot load), is one line
  ``error: MESSAGE`` on stderr and exit status 2; argparse's own errors (an unknown option,
  ``--bptt 0``) go the same way;
- Ctrl-C is one line on stderr and exit status 130;
- a full disk (or quota, or a file system turned read-only) is one line naming the file, exit
  status 2 (:func:`wikitext_toolkit_core.files.write_atomically` leaves the file it was replacing as it was);
- when the reader of standard output stops reading (``| head``), the command still finishes its
  work (its files are written), drops the rest of its output and exits 141, the status of a
  shell tool stopped by SIGPIPE;
- anything else is a bug and keeps its traceback;
- the toolkit's log messages (``logging.getLogger(__name__)`` in its packages) of level INFO and
  above are lines on stderr as they are, with no level or logger name
  (:func:`messages_on_stderr`).

Output flags follow one convention: ``--output FILE`` for a command's result, ``--output-dir DIR``
for a directory of results, ``--save-WHAT FILE`` for an optional by-product (per-token
log-probabilities, gate values). Every output path is checked by :func:`check_output_file` or
:func:`check_output_dir` before the command does any work, so a path that cannot be written
never costs an evaluation or a training run; the files themselves are written with
:func:`wikitext_toolkit_core.files.write_atomically`.

Standard library only, and importing it (with the ``harness`` package) imports no torch: the
builder uses it too.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import math
import os
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

from wikitext_toolkit_core.errors import ToolkitError

#: Exit status of a user error (as argparse's own).
EXIT_USAGE = 2
#: Exit status after Ctrl-C (128 + SIGINT), as a shell reports it.
EXIT_INTERRUPTED = 130
#: Exit status when the reader of standard output has gone (128 + SIGPIPE), as a shell reports it.
EXIT_BROKEN_PIPE = 141
#: The errors of a file system that cannot take more data: the machine's, not the command's.
STORAGE_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG})


class UsageError(ToolkitError):
    """Options that do not fit, an unusable path: one line, exit 2."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser whose errors are :class:`UsageError` (one line through :func:`run`,
    and a return value of 2 rather than ``SystemExit`` when ``main`` is called from Python).

    Options must be spelled out: ``allow_abbrev`` is off by default (argparse would take
    ``--out`` for ``--output-dir``, and a later option sharing the prefix would silently change
    what it means); subcommand parsers, of this class too, inherit the default."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def run(
    parser: argparse.ArgumentParser,
    argv: Sequence[str] | None,
    *,
    interrupted: str = "interrupted",
) -> int:
    """Parse ``argv`` and call the chosen subcommand's ``handler``; returns the exit status.

    A :class:`wikitext_toolkit_core.errors.ToolkitError`, the base of every user-facing error of the toolkit
    (:class:`UsageError`, a dataset, device, plugin, result or source error, ...), is printed as
    ``error: MESSAGE`` on stderr with exit status 2; any other exception is a bug and propagates
    with its traceback.

    Args:
        parser: the tool's parser (an :class:`ArgumentParser`); every subcommand sets ``handler``.
        argv: the arguments (``None``: ``sys.argv[1:]``).
        interrupted: the line printed on Ctrl-C (say how to resume, where a command can).
    """
    stdout = sys.stdout = _OutputToAReader(sys.stdout)
    try:
        with messages_on_stderr():
            args = parser.parse_args(argv)
            status = args.handler(args)
        stdout.flush()
        return status or (EXIT_BROKEN_PIPE if stdout.reader_gone else 0)
    except ToolkitError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(interrupted, file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as error:
        if error.errno not in STORAGE_ERRORS:
            raise
        print(f"error: {storage_message(error)}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        sys.stdout = stdout.stream


class _PlainStderr(logging.Handler):
    """Writes each record's message as it is, a line, to the ``sys.stderr`` of the moment (which
    a redirection, pytest's capture included, may have replaced): as ``print(message,
    file=sys.stderr)`` would. ``commands`` counts the commands that use it
    (:func:`messages_on_stderr`), ``saved`` holds the loggers' settings from before the first."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.commands = 0
        self.saved: list[tuple[logging.Logger, int, bool]] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:  # logging's contract: report it, never raise
            self.handleError(record)


#: The packages whose loggers :func:`messages_on_stderr` shows.
TOOLKIT_PACKAGES = ("harness", "baselines", "leaderboard", "wikitext_builder", "wikitext_toolkit_core")
_STDERR = _PlainStderr()
_STDERR_LOCK = threading.Lock()


@contextlib.contextmanager
def messages_on_stderr() -> Iterator[None]:
    """Within the context, the toolkit's log messages of level INFO and above are lines on
    stderr as they are, with no level or logger name: a command's output, as its notes were
    always printed. The toolkit's loggers stop propagating meanwhile, so that a handler the
    caller has configured does not show them twice. Nested and concurrent commands share it:
    the first installs it, the last removes it and restores the loggers' settings.

    Outside a command the messages are ordinary log records: with no logging configured,
    Python's last-resort handler prints those of WARNING and above (the same lines) and drops
    the INFO ones (which checkpoint is used, a download starting, ...)."""
    with _STDERR_LOCK:
        if _STDERR.commands == 0:
            for logger in map(logging.getLogger, TOOLKIT_PACKAGES):
                _STDERR.saved.append((logger, logger.level, logger.propagate))
                logger.addHandler(_STDERR)
                logger.setLevel(logging.INFO)
                logger.propagate = False
        _STDERR.commands += 1
    try:
        yield
    finally:
        with _STDERR_LOCK:
            _STDERR.commands -= 1
            if _STDERR.commands == 0:
                for logger, level, propagate in _STDERR.saved:
                    logger.removeHandler(_STDERR)
                    logger.setLevel(level)
                    logger.propagate = propagate
                _STDERR.saved.clear()


def storage_message(error: OSError) -> str:
    """One line for a write the file system refused (full, over quota, read-only)."""
    where = f" writing {error.filename}" if error.filename else ""
    reason = error.strerror or os.strerror(error.errno or 0)
    remedy = "write elsewhere" if error.errno == errno.EROFS else "free some space"
    return f"{reason}{where}; {remedy} and rerun the same command"


class _OutputToAReader:
    """Standard output while a command runs: once its reader has gone (``| head`` has read
    enough), the rest of the output is dropped rather than raising ``BrokenPipeError`` from
    whichever ``print`` comes next, so the command still writes the files it was asked for."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.reader_gone = False

    def write(self, text: str) -> int:
        if not self.reader_gone and self.stream is not None:  # None: started with stdout closed
            try:
                self.stream.write(text)
            except BrokenPipeError:
                self._drop_the_rest()
        return len(text)

    def flush(self) -> None:
        if not self.reader_gone and self.stream is not None:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._drop_the_rest()

    def _drop_the_rest(self) -> None:
        self.reader_gone = True
        try:  # the interpreter's own flush at exit then writes nowhere rather than failing again
            descriptor = self.stream.fileno()
        except (AttributeError, OSError, ValueError):  # a stream without a file descriptor
            return
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, descriptor)
        os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


# ---- argparse types ------------------------------------------------------------------------------


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def positive_int(text: str) -> int:
    """An integer of at least 1 (``--batch-size``, ``--bptt``, ``--workers``, ...)."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


#: The most CPU threads a command takes per CPU of the machine: beyond, threads only wait.
THREADS_PER_CPU = 4


def thread_count(text: str) -> int:
    """``--threads``: at least 1, and at most :data:`THREADS_PER_CPU` per CPU of this machine
    (torch starts every thread asked for: 100,000 hang the process)."""
    value = positive_int(text)
    cpus = os.cpu_count() or 1
    if value > THREADS_PER_CPU * cpus:
        raise argparse.ArgumentTypeError(
            f"{value} threads on a machine of {cpus} CPU(s): at most {THREADS_PER_CPU * cpus}"
        )
    return value


def non_negative_int(text: str) -> int:
    """An integer of at least 0 (``--audit N``, where 0 switches the audit off)."""
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return value


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def non_negative_float(text: str) -> float:
    """A finite number of at least 0 (a tolerance)."""
    value = _number(text)
    if not 0 <= value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a finite number of at least 0, got {text}")
    return value


def positive_float(text: str) -> float:
    """A finite number greater than 0 (a learning rate, a timeout)."""
    value = _number(text)
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a finite number greater than 0, got {text}")
    return value


def below_one(text: str) -> float:
    """A number of at least 0 and below 1 (the neural cache's lambda)."""
    value = _number(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 0 and below 1, got {text}")
    return value


def share(text: str) -> float:
    """A number greater than 0 and at most 1 (a threshold on a share)."""
    value = _number(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be greater than 0 and at most 1, got {text}")
    return value


def existing_file(text: str) -> Path:
    """A path to an existing file (not a directory)."""
    path = Path(text)
    if not path.is_file():
        problem = "is a directory, not a file" if path.is_dir() else "no such file"
        raise argparse.ArgumentTypeError(f"{text}: {problem}")
    return path


def existing_dir(text: str) -> Path:
    """A path to an existing directory."""
    path = Path(text)
    if not path.is_dir():
        problem = "is a file, not a directory" if path.exists() else "no such directory"
        raise argparse.ArgumentTypeError(f"{text}: {problem}")
    return path


# ---- output paths --------------------------------------------------------------------------------


def _nearest_existing(path: Path) -> Path:
    """``path`` itself if it exists, else its nearest existing ancestor (what ``mkdir -p`` and
    the write will need to be allowed to write in)."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _check_writable_directory(path: Path, option: str, shown: Path) -> None:
    """Fail unless directory ``path`` (``shown`` lies in it) exists and can be written in."""
    if not path.is_dir():
        raise UsageError(f"{option} {shown}: {path} is not a directory")
    if not os.access(path, os.W_OK | os.X_OK):
        read_only = os.statvfs(path).f_flag & os.ST_RDONLY
        reason = "read-only file system" if read_only else "permission denied"
        raise UsageError(f"{option} {shown}: cannot write in {path} ({reason})")


def check_output_file(
    path: str | os.PathLike, option: str, *, inputs: Iterable[str | os.PathLike] = ()
) -> Path:
    """Refuse, before any work, an output file that cannot be written or would overwrite one of
    the command's ``inputs``; returns the path. ``option`` names it in the message."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{option} {path}: is a directory; name a file")
    _check_name_length(path, option)
    check_not_an_input(path, option, inputs)
    if path.exists() and not os.access(path, os.W_OK):
        raise UsageError(f"{option} {path}: the file is read-only")
    _check_writable_directory(_nearest_existing(path.parent), option, path)
    return path


#: Bytes a file name needs beyond its own while it is written (``.NAME.PID-RANDOM.tmp``, see
#: :func:`wikitext_toolkit_core.files.write_atomically`).
TEMPORARY_NAME_BYTES = 32


def _check_name_length(path: Path, option: str) -> None:
    """Refuse a file name too long for its file system, counting the temporary name it is first
    written under."""
    directory = _nearest_existing(path.parent)
    try:
        limit = os.pathconf(directory, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    length = len(os.fsencode(path.name))
    if length + TEMPORARY_NAME_BYTES > limit:
        raise UsageError(
            f"{option} {path}: the file name is {length} bytes; this file system takes at most "
            f"{limit - TEMPORARY_NAME_BYTES} here (with --output-dir: shorter --model-args values)"
        )


def check_not_an_input(path: str | os.PathLike, option: str, inputs: Iterable[str | os.PathLike]) -> None:
    """Refuse output file ``path`` when it is one of ``inputs`` (known only once the command
    has found them; :func:`check_output_file` has checked it can be written)."""
    for source in inputs:
        if Path(source).exists() and Path(path).exists() and os.path.samefile(path, source):
            raise UsageError(
                f"{option} {path}: is an input of this command ({source}); refusing to overwrite it"
            )


def check_output_dir(
    path: str | os.PathLike,
    option: str,
    *,
    inputs: Iterable[str | os.PathLike] = (),
    writes: Iterable[str] = (),
) -> Path:
    """Refuse, before any work, an output directory that cannot be created or written in, that
    is one of the command's ``inputs``, or where a file the command writes (``writes``: names in
    the directory) would overwrite one of them; returns the path."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UsageError(f"{option} {path}: is a file; name a directory")
    written = {(path / name).resolve() for name in writes}
    for source in inputs:
        if Path(source).resolve() == path.resolve():
            raise UsageError(
                f"{option} {path}: is {source}, an input of this command; choose another directory"
            )
        if Path(source).resolve() in written:
            raise UsageError(
                f"{option} {path}: would overwrite {source}, an input of this command; "
                "choose another directory"
            )
    _check_writable_directory(_nearest_existing(path), option, path)
    return path


# ---- options shared by the tools -----------------------------------------------------------------

#: The help of ``--data-dir`` where a command looks for the benchmarks in it first.
DATA_DIR_HELP = (
    "directory holding ptb/, wikitext-2/, ..., looked in first (default: $HARNESS_DATA_DIR, then "
    "the packaged copies, then the download cache)"
)


def add_data_dir_option(parser: argparse.ArgumentParser, help: str = DATA_DIR_HELP) -> None:
    """``--data-dir DIR``: an existing directory where the command looks for the benchmarks."""
    parser.add_argument("--data-dir", type=existing_dir, metavar="DIR", help=help)
