"""The package's architecture, enforced: the op (``ttnn_flashdecode/op/``) apart from its tools
(``ttnn_flashdecode/tools/``), the emulator its own package, no import cycles anywhere (function-level
imports included), and no module of the op much past 500 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "ttnn_flashdecode"
#: issue 34: no op/ module over 500 lines.
MAX_OP_MODULE_LINES = 500


def _module_name(path: Path) -> str:
    parts = ["ttnn_flashdecode", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in PACKAGE.rglob("*.py")}


def _imports(name: str, source: str, known: set[str], is_package: bool = False) -> set[str]:
    """The package's modules that module ``name`` (whose code is ``source``) imports, at any depth
    of its code (``from a import b`` counts as ``a.b`` when that is a module, else ``a``)."""
    package = name if is_package else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path.read_text(), known, path.name == "__init__.py") for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted.

    A package's ``__init__`` re-exporting a submodule (``ttnn_flashdecode`` -> ``.op.operation``)
    is not a cycle with the submodule's own ``import ttnn_flashdecode.op.x``: importing a submodule
    always runs its parents' ``__init__`` first, so edges to a module's own ancestors are dropped."""
    edges = {a: {b for b in bs if not a.startswith(b + ".")} for a, bs in graph.items()}
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return out


def test_the_package_has_no_import_cycles():
    assert _cycles(_graph()) == []


def test_the_op_never_imports_its_tools():
    graph = _graph()
    offenders = {name: sorted(t for t in targets if t.startswith("ttnn_flashdecode.tools"))
                 for name, targets in graph.items() if name.startswith("ttnn_flashdecode.op")}
    assert {name: t for name, t in offenders.items() if t} == {}


def test_the_emulator_imports_neither_the_op_nor_the_tools():
    graph = _graph()
    offenders = {name: sorted(t for t in targets if t.startswith(("ttnn_flashdecode.op", "ttnn_flashdecode.tools")))
                 for name, targets in graph.items() if name.startswith("ttnn_flashdecode.emulator")}
    assert {name: t for name, t in offenders.items() if t} == {}


def test_no_op_module_is_much_past_500_lines():
    sizes = {name: len(path.read_text().splitlines()) for name, path in _modules().items()
             if name.startswith("ttnn_flashdecode.op")}
    assert {name: n for name, n in sizes.items() if n > MAX_OP_MODULE_LINES} == {}


def test_the_cycle_finder_finds_a_planted_cycle():
    """The checker itself can fail: a two-module loop and a three-module loop are reported."""
    graph = {"p.a": {"p.b"}, "p.b": {"p.a"}, "p.c": {"p.d"}, "p.d": {"p.e"}, "p.e": {"p.c"}, "p.f": {"p"}, "p": {"p.f"}}
    assert sorted(_cycles(graph)) == [["p.a", "p.b"], ["p.c", "p.d", "p.e"]]


@pytest.mark.parametrize("source, expected", [
    ("from ttnn_flashdecode.op import plan", {"ttnn_flashdecode.op.plan"}),
    ("def f():\n    from ttnn_flashdecode.tools import bench", {"ttnn_flashdecode.tools.bench"}),
    ("from . import tiles", {"ttnn_flashdecode.op.tiles"}),
    ("from .. import emulator", {"ttnn_flashdecode.emulator"}),
])
def test_the_import_walker_sees_every_form(source, expected):
    assert _imports("ttnn_flashdecode.op.schedule", source, set(_modules())) == expected


def test_the_package_exports_the_compute_options():
    """The compute config a caller passes (``compute_kernel_config=ComputeOptions(...)``, also for
    ``accurate_scores`` on the drop-ins) comes from the package's top level, as the op does."""
    import ttnn_flashdecode
    from ttnn_flashdecode.op.compute_options import ComputeOptions

    assert ttnn_flashdecode.ComputeOptions is ComputeOptions and "ComputeOptions" in ttnn_flashdecode.__all__
