"""The renderer package's structure: an acyclic import graph, one template registry."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import wikitext_builder.render as render
from wikitext_builder.render import convert, languages, registry, templates

PACKAGE = Path(render.__file__).parent


def _internal_imports(path: Path) -> set[str]:
    """The modules of the render package that ``path`` imports (by module name)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:  # from .x import y / from . import x
                if node.module:
                    found.add(node.module.split(".")[0])
                else:
                    found.update(alias.name for alias in node.names)
            elif node.level == 0 and (node.module or "").startswith("wikitext_builder.render."):
                found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            found.update(
                alias.name.split(".")[2]
                for alias in node.names
                if alias.name.startswith("wikitext_builder.render.")
            )
    return found


def import_graph() -> dict[str, set[str]]:
    modules = {path.stem: path for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    return {name: _internal_imports(path) & set(modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the graph as a list of modules, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        path.append(name)
        for target in sorted(graph[name]):
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        path.pop()
        state[name] = 2
        return None

    for name in sorted(graph):
        if name not in state:
            cycle = visit(name)
            if cycle:
                return cycle
    return None


def test_render_package_import_graph_has_no_cycles() -> None:
    graph = import_graph()
    assert {"walker", "layout", "prestrip", "registry", "convert", "languages"} <= set(graph)
    assert "registry" in graph["walker"] and "convert" in graph["registry"]  # the graph was read
    assert find_cycle(graph) is None, find_cycle(graph)


def test_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_one_registry_and_no_key_registered_twice() -> None:
    tables = [convert.TEMPLATES, languages.TEMPLATES, templates.TEMPLATES]
    keys = [key for table in tables for key, _ in table]
    assert len(keys) == len(set(keys))
    assert keys.count("nihongo") == 1
    assert registry.TEMPLATE_RENDERERS is render.TEMPLATE_RENDERERS
    assert set(registry.TEMPLATE_RENDERERS) == set(keys)
    with pytest.raises(ValueError, match="'convert' registered twice"):
        registry.merge_tables(convert.TEMPLATES, convert.TEMPLATES[:1])


def test_convert_units_are_named_records() -> None:
    km = convert.UNITS["km"]
    assert isinstance(km, convert.Unit)
    assert (km.dimension, km.symbol, km.singular, km.plural, km.default_output) == (
        "length",
        "km",
        "kilometre",
        "kilometres",
        "mi",
    )
    assert convert.UNITS["kilometre"] is km
    for code, unit in convert.UNITS.items():
        for output in unit.default_output.split():
            assert convert.UNITS[output].dimension == unit.dimension, (code, output)
