from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any

import pytest

from harness.datasets import load_dataset
from harness.plugin import (
    OneOf,
    PluginError,
    PositiveInt,
    create_model,
    declared_model_args,
    discover_plugins,
    load_factory,
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


@dataclasses.dataclass(frozen=True)
class ToyArgs:
    """A declaration of each kind of model argument."""

    order: PositiveInt = 5
    theta: float | None = None
    method: Annotated[str, OneOf(("sgd", "rms"))] | None = None
    name: str = "toy"
    flag: bool = False


@declared_model_args("toy", ToyArgs)
def toy_factory(dataset: Any, *, device: str, checkpoint: str | None, model_args: ToyArgs) -> ToyArgs:
    """Returns what it was given, checked."""
    return model_args


def test_declared_model_args_reach_the_factory_checked_with_their_defaults() -> None:
    def made(**model_args: Any) -> ToyArgs:
        return toy_factory(None, device="cpu", checkpoint=None, **model_args)

    assert made() == ToyArgs()
    assert made(theta=2, method="rms", flag=True) == ToyArgs(
        theta=2, method="rms", flag=True
    )  # 2 is a number
    assert made(theta=None, method=None) == ToyArgs()  # None where the declaration allows it
    assert (
        toy_factory.__name__ == "toy_factory" and toy_factory.__doc__ == "Returns what it was given, checked."
    )


@pytest.mark.parametrize(
    "model_args, message",
    [
        ({"orde": 3, "x": 1}, "toy: unknown model arg(s) orde, x (known: order, theta, method, name, flag)"),
        ({"order": 0}, "toy: order must be a positive integer, got 0"),
        ({"order": 2.5}, "toy: order must be a positive integer, got 2.5"),
        ({"order": True}, "toy: order must be a positive integer, got True"),  # a bool is no integer
        ({"order": None}, "toy: order must be a positive integer, got None"),  # its default is no None
        ({"theta": "0.5"}, "toy: theta must be a number, got '0.5'"),
        ({"theta": True}, "toy: theta must be a number, got True"),
        ({"method": "adam"}, "toy: method must be one of sgd, rms, got 'adam'"),
        ({"name": 3}, "toy: name must be a string, got 3"),
        ({"flag": "maybe"}, "toy: flag must be true or false, got 'maybe'"),
    ],
)
def test_declared_model_args_refuse_unknown_names_wrong_types_and_bad_values_in_one_line(
    model_args: dict[str, Any], message: str
) -> None:
    with pytest.raises(PluginError) as raised:
        toy_factory(None, device="cpu", checkpoint=None, **model_args)
    assert str(raised.value) == message


def test_a_declaration_of_a_type_the_harness_cannot_check_is_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class Sizes:
        sizes: list[int] = dataclasses.field(default_factory=list)

    with pytest.raises(
        TypeError, match=r"model arg Sizes.sizes: list\[int\] is not a type the harness checks"
    ):
        declared_model_args("sizes", Sizes)


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
