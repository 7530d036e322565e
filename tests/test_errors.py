"""One error base (issue 49, item 4): every user-facing error of the five packages derives from
:class:`wikitext_toolkit_core.errors.ToolkitError`, which :func:`wikitext_toolkit_core.cli.run` alone catches
(one line, exit 2); any other exception is a bug and keeps its traceback."""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import pkgutil
from collections.abc import Callable

import pytest
from conftest import REPO

from wikitext_toolkit_core.cli import EXIT_USAGE, ArgumentParser, UsageError, run
from wikitext_toolkit_core.errors import ToolkitError
from wikitext_toolkit_core.files import DatasetError, DirectoryBusy

PACKAGES = ("wikitext_toolkit_core", "harness", "baselines", "leaderboard", "wikitext_builder")

#: Exception classes that are not user-facing errors: each is caught, and converted or acted on,
#: before it could reach a command line's ``run``, so none derives from :class:`ToolkitError`.
INTERNAL = {
    # A json.JSONDecodeError (and so a ValueError): every reader catches it with the decode
    # errors and words its own one-line error naming the file.
    "wikitext_toolkit_core.bounded_json.JSONTooDeep",
    # One failed attempt of a download; retried, then summed up in a DownloadFailed.
    "wikitext_toolkit_core.download._TransferError",
    # A ValueError without the file's name: leaderboard.records.load_result turns it into a
    # ResultError naming the file; in harness.scoring.save_scores (the record read back before
    # it is written) it would be a bug of the harness, which keeps its traceback.
    "wikitext_toolkit_core.result_schema.InvalidResultRecord",
    "wikitext_toolkit_core.result_schema.NotAResultRecord",
    # The same for a training-log line: leaderboard.training_logs and the run directory's resume
    # rules word their own one-line error naming the file and line.
    "wikitext_toolkit_core.training_log.InvalidTrainingLogRecord",
    # A token-cache entry that does not match its record: the entry is discarded and rebuilt.
    "harness.token_cache.CacheCorrupt",
    # A contamination report that does not fit its result: attach_reports lists it among the
    # rejected reports (a note), and the command goes on.
    "leaderboard.clean_subset.ReportError",
    # A ValueError naming the article: a skipped article in a build, a SourceError naming the
    # file in ``render``.
    "wikitext_builder.render.article.MarkupError",
    # A call into a plugin's worker process that did not return: the worker's proxy turns it into
    # a harness.passes.CallFailed (a PluginError) naming the plugin and the call.
    "harness.worker._Failure",
    # Scores a worker refuses to send: the reply says so, and the harness raises a PluginError.
    "harness.worker._Refused",
}


def _exception_classes() -> dict[str, type[BaseException]]:
    """``{module.Name: class}`` of every exception class defined in the five packages (their
    ``__main__`` modules, which run a tool when imported, define none)."""
    names = list(PACKAGES)
    for package in PACKAGES:
        path = importlib.import_module(package).__path__
        names += [info.name for info in pkgutil.walk_packages(path, package + ".")]
    found = {}
    for name in names:
        if name.endswith(".__main__"):
            continue
        module = importlib.import_module(name)
        for attribute, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == name:
                found[f"{name}.{attribute}"] = value
    return found


def test_every_user_facing_error_derives_from_the_base() -> None:
    classes = _exception_classes()
    assert (
        "wikitext_toolkit_core.cli.UsageError" in classes
        and "baselines.checkpoint.CheckpointError" in classes
    )
    outside = sorted(
        name
        for name, cls in classes.items()
        if cls is not ToolkitError and not issubclass(cls, ToolkitError) and name not in INTERNAL
    )
    assert outside == [], (
        "derive these from wikitext_toolkit_core.errors.ToolkitError, or list them in INTERNAL"
    )
    assert sorted(INTERNAL - classes.keys()) == [], "INTERNAL names classes that are gone"
    listed = sorted(name for name in INTERNAL if issubclass(classes[name], ToolkitError))
    assert listed == [], "these are ToolkitErrors: take them out of INTERNAL"


def test_the_base_imports_nothing() -> None:
    """``wikitext_toolkit_core/errors.py`` stands below everything, ``wikitext_toolkit_core.cli`` included."""
    tree = ast.parse((REPO / "wikitext_toolkit_core" / "errors.py").read_text(encoding="utf-8"))
    imports = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert [getattr(node, "module", None) for node in imports] == ["__future__"]


def _parser(handler: Callable[[argparse.Namespace], int]) -> ArgumentParser:
    parser = ArgumentParser(prog="tool")
    parser.set_defaults(handler=handler)
    return parser


def _raising(error: BaseException) -> Callable[[argparse.Namespace], int]:
    def handler(args: argparse.Namespace) -> int:
        raise error

    return handler


@pytest.mark.parametrize(
    "error",
    [
        ToolkitError("a user error"),
        UsageError("a user error"),
        DatasetError("a user error"),
        DirectoryBusy("a user error"),
    ],
    ids=lambda error: type(error).__name__,
)
def test_run_reports_a_toolkit_error_in_one_line(error: ToolkitError, capsys: pytest.CaptureFixture) -> None:
    assert run(_parser(_raising(error)), []) == EXIT_USAGE == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "error: a user error\n")


def test_run_lets_a_bug_keep_its_traceback(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(RuntimeError, match="a bug"):
        run(_parser(_raising(RuntimeError("a bug"))), [])
    assert capsys.readouterr().err == ""
