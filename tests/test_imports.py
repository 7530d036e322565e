"""The packages import each other without cycles, and in layers.

Every module of ``wikitext_toolkit_core``, ``harness``, ``baselines``, ``leaderboard`` and
``wikitext_builder`` is parsed (never imported) and each of its imports becomes an edge of a module
graph. What counts:

* every import the module can execute: module-level ones **and** those inside functions
  (a lazy import only postpones a cycle to the first call that needs it, and hides it from
  readers), except those under ``if TYPE_CHECKING:``, which never run;
* ``from pkg import name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``
  (the package's ``__init__``);
* the implicit import of a module's parent packages is not an edge: Python imports them first
  whatever the code says, so a package ``__init__`` that re-exports its submodules is no cycle.

A cycle fails the test with its modules in order, e.g. ``baselines.checkpoint ->
baselines.zoneout_lstm -> baselines.plugin_bridge -> baselines.checkpoint``.

The layers (:data:`MAY_IMPORT`): ``wikitext_toolkit_core`` is the ground floor and imports none of
the four tools; the builder and the harness import only it; the baselines and the leaderboard
stand on the harness and it (never on each other).
"""

from __future__ import annotations

import ast
import importlib.metadata
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("wikitext_toolkit_core", "harness", "baselines", "leaderboard", "wikitext_builder")
#: Package -> the other packages its modules may import.
MAY_IMPORT = {
    "wikitext_toolkit_core": set(),
    "wikitext_builder": {"wikitext_toolkit_core"},
    "harness": {"wikitext_toolkit_core"},
    "baselines": {"wikitext_toolkit_core", "harness"},
    "leaderboard": {"wikitext_toolkit_core", "harness"},
}


def module_files() -> dict[str, Path]:
    """``{dotted module name: source file}`` of every module of :data:`PACKAGES`."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _type_checking_only(tree: ast.Module) -> set[int]:
    """Ids of the import nodes under ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``)."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = (
                test.id
                if isinstance(test, ast.Name)
                else test.attr
                if isinstance(test, ast.Attribute)
                else None
            )
            if name == "TYPE_CHECKING":
                skipped.update(id(child) for statement in node.body for child in ast.walk(statement))
    return skipped


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of :data:`PACKAGES` that ``module`` imports (see the module docstring)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    skipped = _type_checking_only(tree)
    is_package = path.name == "__init__.py"
    targets = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join(anchor + ([base] if base else []))
            names = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names
            ]
        else:
            continue
        for name in names:
            while name and name not in modules:  # ``import a.b.c`` of a non-module attribute
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
    return targets


def import_graph() -> dict[str, set[str]]:
    modules = module_files()
    return {module: imports_of(module, path, modules) for module, path in modules.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (as a closed path ``[a, b, ..., a]``) per strongly connected component of more
    than one module (or a module importing itself), by Tarjan's algorithm."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph[node]:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return [_cycle_through(min(component), component, graph) for component in components]


def _cycle_through(start: str, component: set[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest closed path from ``start`` back to itself inside ``component`` (breadth first)."""
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph[node] & component):
                if target == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [*reversed(path), start]
                if target not in parents:
                    parents[target] = node
                    following.append(target)
        frontier = following
    raise AssertionError(f"{start} is in no cycle of {sorted(component)}")


def test_the_graph_sees_lazy_and_relative_imports_but_not_type_checking_ones(tmp_path: Path) -> None:
    source = tmp_path / "b.py"
    source.write_text(
        textwrap.dedent("""
        from typing import TYPE_CHECKING

        from . import c
        from pkg.d import name

        if TYPE_CHECKING:
            from pkg import e


        def lazy():
            import pkg.f.g
    """)
    )
    modules = {name: source for name in ("pkg", "pkg.b", "pkg.c", "pkg.d", "pkg.e", "pkg.f")}
    assert imports_of("pkg.b", source, modules) == {"pkg.c", "pkg.d", "pkg.f"}
    graph = import_graph()
    assert "harness.plugin" in graph["harness"]  # the package __init__'s re-export


def test_cycle_detection_names_the_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert sorted(find_cycles(graph)) == [["a", "b", "c", "a"], ["e", "e"]]


def test_no_import_cycles() -> None:
    cycles = find_cycles(import_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in cycles)


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """``a -> b`` for every import of a module ``a`` of a package that :data:`MAY_IMPORT` does not
    allow to import ``b``'s package."""
    found = []
    for module, targets in sorted(graph.items()):
        package = module.partition(".")[0]
        allowed = MAY_IMPORT[package] | {package}
        found += [
            f"{module} -> {target}" for target in sorted(targets) if target.partition(".")[0] not in allowed
        ]
    return found


def test_layer_violations_are_named() -> None:
    graph = {
        "wikitext_toolkit_core.files": {"harness.plugin"},
        "wikitext_builder.cli": {"wikitext_toolkit_core.files", "wikitext_builder.render"},
    }
    assert layer_violations(graph) == ["wikitext_toolkit_core.files -> harness.plugin"]


def test_the_packages_import_only_the_layers_below_them() -> None:
    violations = layer_violations(import_graph())
    assert not violations, "imports across layers:\n" + "\n".join(violations)


def _closure(graph: dict[str, set[str]], module: str) -> set[str]:
    """Every module ``module`` imports, directly or through others."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        for target in graph.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_no_plugin_imports_the_evaluator() -> None:
    """A plugin talks to the harness through :mod:`harness.plugin` only: none of the registered
    plugins imports the evaluator, even through another module, and the ``hf`` plugin does not
    lay out the harness's streams either (it is handed each stream whole)."""
    plugins = {
        entry.name: entry.value
        for entry in importlib.metadata.entry_points(group="harness.models")
        if entry.value.partition(".")[0] in PACKAGES
    }
    assert {"hf", "unigram", "kneser_ney", "pointer_sentinel", "neural_cache"} <= set(plugins)
    graph = import_graph()
    for name, target in plugins.items():
        reached = _closure(graph, target.partition(":")[0])
        assert "harness.evaluate" not in reached, f"plugin {name} imports harness.evaluate"
    assert "harness.streams" not in _closure(graph, plugins["hf"])


def test_the_hf_plugin_never_reads_a_split() -> None:
    """The ``hf`` plugin scores the stream it is handed: no module of it opens a split of the
    dataset (``dataset.tokens(...)``, ``dataset.path(...)``) to guess what it is being fed."""
    for path in sorted((REPO / "harness" / "plugins" / "hf").glob("*.py")):
        calls = {
            node.func.attr
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        }
        assert not calls & {"tokens", "path", "stat"}, f"{path.name} reads the dataset's splits"
