"""The layout's rules (docs/architecture.md), checked on the source: every first-party import
resolves, no module imports itself back through others, no wing imports itself back through
other wings (a loop of any length), and the core never imports a shell. How long a module may
grow is a review question (CONTRIBUTING.md), not a test.

Imports inside functions count: a lazy import is still a dependency, and a cycle through one is a
cycle a newcomer has to untangle.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIRST_PARTY = ("pipeline", "api", "consumers", "workers", "schemas")
# Imports of these are checked too: a benchmark or a test that imports a moved module breaks
# as surely as the product does.
CHECKED = (*FIRST_PARTY, "bench", "tests")
SHELLS = ("api", "consumers", "workers")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources(*packages: str) -> list[Path]:
    return sorted(p for pkg in packages for p in (REPO / pkg).rglob("*.py"))


def _imports(path: Path) -> Iterator[tuple[str, str | None, int]]:
    """(module, imported name or None, line) for every import of a first-party module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in CHECKED:
                    yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base.split(".")[0] not in CHECKED:
                continue
            for alias in node.names:
                yield base, alias.name, node.lineno


def _target(module: str, name: str | None) -> str:
    """The module an import depends on (`from pkg import mod` depends on `pkg.mod`)."""
    if name is not None and importlib.util.find_spec(module) is not None:
        spec = importlib.util.find_spec(f"{module}.{name}") if _is_package(module) else None
        if spec is not None:
            return f"{module}.{name}"
    return module


def _is_package(module: str) -> bool:
    spec = importlib.util.find_spec(module)
    return spec is not None and spec.submodule_search_locations is not None


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in _sources(*FIRST_PARTY):
        source = _module_name(path)
        deps = graph.setdefault(source, set())
        for module, name, _ in _imports(path):
            target = _target(module, name)
            if target != source:
                deps.add(target)
    return graph


def test_every_first_party_import_resolves() -> None:
    missing = []
    for path in _sources(*FIRST_PARTY, "tests", "bench"):
        for module, name, line in _imports(path):
            where = f"{path.relative_to(REPO)}:{line}"
            if importlib.util.find_spec(module) is None:
                missing.append(f"{where}: no module {module}")
            elif name is not None and name != "*" and not hasattr(
                    importlib.import_module(module), name) and importlib.util.find_spec(
                    f"{module}.{name}") is None:
                missing.append(f"{where}: {module} has no {name}")
    assert not missing, "\n".join(missing)


def test_no_import_cycles() -> None:
    graph = _graph()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                cycles.append([*stack[stack.index(dep):], dep])
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_the_core_never_imports_a_shell() -> None:
    offenders = []
    for path in _sources("pipeline"):
        if _module_name(path).startswith("pipeline.cli"):
            continue  # the `brainstream` command starts the shells
        for module, _, line in _imports(path):
            if module.split(".")[0] in SHELLS:
                offenders.append(f"{path.relative_to(REPO)}:{line} imports {module}")
    assert not offenders, "\n".join(offenders)


def test_the_client_imports_nothing_of_the_server() -> None:
    """client/ is a distribution of its own, installed alone (httpx and pydantic only)."""
    offenders = [f"{path.relative_to(REPO)}:{line} imports {module}"
                 for path in _sources("client") for module, _, line in _imports(path)]
    assert not offenders, "\n".join(offenders)


def _wing(module: str) -> str:
    """The folder a module lives in: `pipeline.ingest.store.events` -> `ingest`, a shell or
    `schemas` -> its package."""
    parts = module.split(".")
    return parts[1] if parts[0] == "pipeline" and len(parts) > 1 else parts[0]


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of more than one node: every set of wings that reach each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for dep in sorted(graph.get(node, ())):
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in on_stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(set(graph) | {d for deps in graph.values() for d in deps}):
        if node not in index:
            visit(node)
    return found


def test_wings_never_import_themselves_back() -> None:
    wings: dict[str, set[str]] = {}
    for source, deps in _graph().items():
        for dep in deps:
            if _wing(source) != _wing(dep):
                wings.setdefault(_wing(source), set()).add(_wing(dep))
    loops = _strongly_connected(wings)
    assert not loops, f"wings that import each other, directly or through others: {loops}"


def test_the_loop_finder_sees_a_long_loop() -> None:
    """The check above would pass on any layout if the finder missed loops longer than two."""
    assert _strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"d"}, "d": {"a"}, "e": {"a"}}) == [
        ["a", "b", "c", "d"]]
    assert _strongly_connected({"a": {"b"}, "b": {"c"}}) == []


def test_test_modules_have_unique_basenames() -> None:
    # tests/ has no __init__.py: pytest imports each test module by its basename, so two
    # test_pipeline.py in different folders refuse to be collected in one run.
    root = Path(__file__).resolve().parents[1]
    seen: dict[str, list[str]] = {}
    for path in root.rglob("test_*.py"):
        seen.setdefault(path.name, []).append(str(path.relative_to(root)))
    assert not {name: paths for name, paths in seen.items() if len(paths) > 1}
