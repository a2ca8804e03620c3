"""The package's shape: each folder is a layer, imports flow down, and no module reaches into
another module's private names. Read from the source with ``ast`` (no imports executed)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "src" / "gemmlab"
# top to bottom; a module may import its own layer and the layers below it
LAYERS = ("cli", "report", "tune", "bench", "measure", "analysis", "core")


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    pkg = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = pkg[: len(pkg) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str, path: Path):
    """(imported module, [names], line) of every gemmlab import in a module, lazy ones included."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = _resolve(module, path, node)
            if target.split(".")[0] != "gemmlab":
                continue
            names = [a.name for a in node.names]
            # "from gemmlab.core import driver" imports a module, not a name of the package
            subs = [n for n in names if f"{target}.{n}" in MODULES]
            for s in subs:
                yield f"{target}.{s}", [], node.lineno
            rest = [n for n in names if n not in subs]
            if rest:
                yield target, rest, node.lineno
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "gemmlab":
                    yield a.name, [], node.lineno


def test_every_module_lives_in_a_layer_folder():
    loose = [m for m in MODULES if m.count(".") == 1 and _layer(m) is None
             and m not in ("gemmlab.__main__", "gemmlab.torch")]  # thin public facades, like __init__
    assert loose == [], f"modules outside the layer folders: {loose}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_flow_down_the_layers(module):
    mine = _layer(module)
    bad = []
    for target, _names, line in _imports(module, MODULES[module]):
        theirs = _layer(target)
        if mine is None or theirs is None:
            continue  # the package root (public API, __main__) may import any layer
        if LAYERS.index(theirs) < LAYERS.index(mine):
            bad.append(f"line {line}: {mine} imports {target} ({theirs} is above {mine})")
    assert bad == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_private_name_is_imported_from_another_module(module):
    bad = []
    tree = ast.parse(MODULES[module].read_text())
    aliases = {}
    for target, names, line in _imports(module, MODULES[module]):
        if target == module:
            continue
        bad += [f"line {line}: from {target} import {n}" for n in names
                if n.startswith("_") and n != "__version__"]
    for node in ast.walk(tree):  # module aliases: "from gemmlab.core import driver as d"
        if isinstance(node, ast.ImportFrom):
            target = _resolve(module, MODULES[module], node)
            for a in node.names:
                if f"{target}.{a.name}" in MODULES:
                    aliases[a.asname or a.name] = f"{target}.{a.name}"
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            bad.append(f"line {node.lineno}: {node.value.id}.{node.attr} ({aliases[node.value.id]})")
    assert bad == []


def test_the_layer_check_sees_a_wrong_way_import(tmp_path):
    """The checks above would catch core importing from the benchmark."""
    src = tmp_path / "gemmlab" / "core"
    src.mkdir(parents=True)
    bad = src / "x.py"
    bad.write_text("from ..bench.runner import run_bench\nfrom .driver import _primary_context\n")
    found = list(_imports("gemmlab.core.x", bad))
    assert ("gemmlab.bench.runner", ["run_bench"], 1) in found
    assert ("gemmlab.core.driver", ["_primary_context"], 2) in found
    assert LAYERS.index(_layer("gemmlab.bench.runner")) < LAYERS.index(_layer("gemmlab.core.x"))


def test_no_function_is_longer_than_80_lines():
    long = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 80:
                long.append(f"{module}.{node.name}: {node.end_lineno - node.lineno + 1} lines")
    assert long == []


def _module_of(target: str) -> str | None:
    """The module an import names (a package's __init__ included), or None outside gemmlab."""
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target or None


def _graph() -> dict[str, set[str]]:
    return {m: {u for t, _n, _l in _imports(m, p) if (u := _module_of(t)) and u != m} for m, p in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_between_modules():
    """Lazy imports included, and the package root with them (it imports the layers, so a layer
    importing it back closes a cycle): a cycle would make its modules one in all but name."""
    assert _cycles(_graph()) == []


def test_the_cycle_check_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _layer(m)))
def test_no_module_starts_a_higher_layers_module(module):
    """A module named as a string (python -m gemmlab.x.y, importlib) counts as an import."""
    mine = _layer(module)
    bad = []
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(r"gemmlab(\.\w+)+", node.value):
            theirs = _layer(node.value)
            if theirs and LAYERS.index(theirs) < LAYERS.index(mine):
                bad.append(f"line {node.lineno}: {node.value!r} ({theirs} is above {mine})")
    assert bad == []
