"""Settings travel as objects: no function of ``wikitext_toolkit_core``, ``harness``, ``baselines``,
``leaderboard`` and ``wikitext_builder`` takes more than :data:`MAX_PARAMETERS` parameters, except those of
:data:`ALLOWED`, public APIs whose docstrings say why.

Every module is parsed (never imported) and every function and method in it counted: its
positional-only, positional and keyword-only parameters, ``*args`` and ``**kwargs``, without a
method's ``self`` or ``cls``. A function over the limit takes its settings unpacked into a long
argument list; pass them as a frozen dataclass instead (``EvaluationProtocol``, ``ScoringJob``,
``Plan``, ...).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("wikitext_toolkit_core", "harness", "baselines", "leaderboard", "wikitext_builder")
MAX_PARAMETERS = 8
#: Functions allowed more parameters, each with why (its docstring says it too).
ALLOWED = frozenset(
    {
        # A public API mirroring the command line: each keyword is an option of `harness eval`,
        # under its name and with its default, so a user passes exactly those they change (as
        # lm-evaluation-harness's simple_evaluate takes its own).
        "harness.api.evaluate_model",
    }
)


def parameter_count(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The parameters of ``function`` (see the module docstring)."""
    arguments = function.args
    positional = [argument.arg for argument in (*arguments.posonlyargs, *arguments.args)]
    if positional and positional[0] in ("self", "cls"):
        positional.pop(0)
    variadic = (arguments.vararg is not None) + (arguments.kwarg is not None)
    return len(positional) + len(arguments.kwonlyargs) + variadic


def functions_of(tree: ast.AST, prefix: str) -> Iterator[tuple[str, int]]:
    """``(qualified name, parameter count)`` of every function under ``tree``, nested ones and
    methods included; names are ``prefix.Class.method``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield f"{prefix}.{node.name}", parameter_count(node)
            yield from functions_of(node, f"{prefix}.{node.name}")
        elif isinstance(node, ast.ClassDef):
            yield from functions_of(node, f"{prefix}.{node.name}")
        else:
            yield from functions_of(node, prefix)


def package_functions() -> dict[str, int]:
    """``{module.qualname: parameter count}`` of every function of :data:`PACKAGES` (an
    overloaded or redefined name: its largest count)."""
    counts: dict[str, int] = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for name, count in functions_of(tree, ".".join(parts)):
                counts[name] = max(count, counts.get(name, 0))
    return counts


def test_parameters_are_counted_as_documented() -> None:
    source = """
def plain(a, /, b, *args, c, d=1, **kwargs): ...
class Holder:
    def method(self, a, *, b): ...
    @classmethod
    def build(cls, a): ...
    @staticmethod
    def helper(a, b): ...
    def outer(self):
        def inner(x, y, z): ...
if True:
    async def guarded(a, b=2): ...
"""
    assert dict(functions_of(ast.parse(source), "m")) == {
        "m.plain": 6,
        "m.Holder.method": 2,
        "m.Holder.build": 1,
        "m.Holder.helper": 2,
        "m.Holder.outer": 0,
        "m.Holder.outer.inner": 3,
        "m.guarded": 2,
    }


def test_no_function_takes_more_than_eight_parameters() -> None:
    counts = package_functions()
    over = sorted(
        f"{name}: {count} parameters"
        for name, count in counts.items()
        if count > MAX_PARAMETERS and name not in ALLOWED
    )
    assert not over, (
        f"more than {MAX_PARAMETERS} parameters (pass settings as a frozen dataclass): " + "; ".join(over)
    )


def test_every_allowed_function_exists_and_still_needs_its_exception() -> None:
    counts = package_functions()
    for name in ALLOWED:
        assert name in counts, f"{name}: no such function (renamed? update ALLOWED)"
        assert counts[name] > MAX_PARAMETERS, f"{name}: {counts[name]} parameters, no exception needed"
