from __future__ import annotations

from pathlib import Path

import pytest

from harness.datasets import load_dataset
from harness.plugin import (
    PluginError,
    create_model,
    discover_plugins,
    load_factory,
    number_arg,
    parse_model_args,
)
from harness.plugins import unigram


def test_plugins_load_by_entry_point_name_or_module_path() -> None:
    assert discover_plugins()["kneser_ney"] == "baselines.kneser_ney"
    assert load_factory("unigram") == ("harness.plugins.unigram", unigram.load_model)
    assert load_factory("harness.plugins.unigram") == ("harness.plugins.unigram", unigram.load_model)


def test_plugin_loading_errors_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(
        PluginError,
        match=r"no plugin 'no_such\.model': not an importable module nor "
        r"a registered plugin \(registered: .*kneser_ney",
    ):
        load_factory("no_such.model")
    (tmp_path / "needs_missing_dep.py").write_text("import missing_dependency_xyz\n")
    (tmp_path / "no_factory.py").write_text("x = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError, match="failed to import: No module named 'missing_dependency_xyz'"):
        load_factory("needs_missing_dep")
    with pytest.raises(PluginError, match=r"'no_factory' has no load_model\(dataset"):
        load_factory("no_factory")


def test_model_args_are_parsed_as_literals() -> None:
    assert parse_model_args("order=3,name=x,flag=true,rate=0.5,none=null") == {
        "order": 3,
        "name": "x",
        "flag": True,
        "rate": 0.5,
        "none": None,
    }
    assert parse_model_args(None) == {}
    with pytest.raises(PluginError, match="'order' is not key=value"):
        parse_model_args("order")


def test_number_arg_takes_integers_and_floats_only() -> None:
    assert number_arg("p", "theta", 0.5) == 0.5
    assert number_arg("p", "theta", 2) == 2
    for value in (True, "0.5", None):
        with pytest.raises(PluginError, match=rf"^p: theta must be a number, got {value!r}$"):
            number_arg("p", "theta", value)


def test_factory_arguments_and_result_are_checked(corpus: Path) -> None:
    dataset = load_dataset(str(corpus))
    with pytest.raises(
        PluginError, match="rejects its arguments: got an unexpected keyword argument 'order'"
    ):
        create_model(
            unigram.load_model, "unigram", dataset, device="cpu", checkpoint=None, model_args={"order": 3}
        )
    with pytest.raises(PluginError, match="load_model returned int, which has no reset"):
        create_model(
            lambda dataset, *, device, checkpoint: 3,
            "three",
            dataset,
            device="cpu",
            checkpoint=None,
            model_args={},
        )


def test_a_factory_without_a_signature_reports_its_own_error(corpus: Path) -> None:
    with pytest.raises(
        PluginError, match=r"^plugin 'builtins:dict' cannot be loaded: its factory raised TypeError"
    ):
        create_model(
            dict, "builtins:dict", load_dataset(str(corpus)), device="cpu", checkpoint=None, model_args={}
        )
