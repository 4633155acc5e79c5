"""The floor plan ARCHITECTURE.md draws is the one the imports have: every module stands on a
listed floor, imports only from its own floor or below, and no files or wings import each
other in a loop. Pure: reads the source, runs nothing."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tsstore"


def floors_from(text: str) -> dict[str, int]:
    """Wing → floor, from the table under ``## The floors`` (``| N | `wing`, `wing/` | … |``)."""
    section = text.split("## The floors", 1)[1].split("\n## ", 1)[0]
    floors: dict[str, int] = {}
    for number, wings in re.findall(r"^\|\s*(\d+)\s*\|([^|]*)\|", section, flags=re.M):
        for wing in re.findall(r"`([^`]+)`", wings):
            assert wing not in floors, f"{wing} is listed on two floors"
            floors[wing] = int(number)
    return floors


def wing_of(module: str) -> str:
    """``tsstore.read.plan`` → ``read/``; ``tsstore.spec`` → ``spec.py``; ``tsstore`` → ``__init__.py``."""
    parts = module.split(".")[1:]
    if not parts:
        return "__init__.py"
    return f"{parts[0]}/" if (PACKAGE / parts[0]).is_dir() else f"{parts[0]}.py"


@functools.cache
def parsed(path: Path) -> ast.Module:
    """The syntax tree of ``path``, parsed once per test process (the package takes a CPU-second)."""
    return ast.parse(path.read_text(), str(path))


#: The fields that hold statements (an import or a class is a statement, never inside an expression).
BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


def statements(tree: ast.Module) -> Iterable[ast.AST]:
    """Every statement of ``tree``, at any depth (a function's, a branch's, a handler's), without
    the expressions, which ast.walk visits too: nine nodes in ten, and most of this test's time."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        yield node
        for field in BODIES:
            stack.extend(getattr(node, field, ()))


def imports_of(path: Path) -> set[str]:
    """The tsstore modules ``path`` imports, anywhere in it (a function's import too)."""
    tree = parsed(path)
    found: set[str] = set()
    for node in statements(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "tsstore")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tsstore":
            for alias in node.names:  # `from tsstore.verbs import reading` names a module
                sub = f"{node.module}.{alias.name}"
                found.add(sub if module_path(sub) is not None else node.module)
    return found


def module_path(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def graph() -> dict[str, set[str]]:
    """Module → the tsstore modules it imports (itself and its own package's face left out)."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {m: {i for i in imports_of(p) if i != m and not m.startswith(i + ".")} for m, p in modules.items()}


def loops(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in list(edges):
        if node not in index:
            visit(node)
    return found


def problems(edges: Mapping[str, set[str]], floors: Mapping[str, int]) -> list[str]:
    """Everything wrong with ``edges`` against ``floors``, one sentence each."""
    found = [f"{wing_of(m)} ({m}) is on no floor of ARCHITECTURE.md" for m in edges if wing_of(m) not in floors]
    for module, imported in sorted(edges.items()):
        for target in sorted(imported):
            here, there = floors.get(wing_of(module)), floors.get(wing_of(target))
            if here is not None and there is not None and there > here:
                found.append(f"{module} (floor {here}) imports {target} (floor {there}): an import up the floors")
    found += [f"files import each other in a loop: {', '.join(group)}" for group in loops(edges)]
    found += [f"wings import each other in a loop: {', '.join(group)}" for group in loops(wing_graph(edges))]
    return found


def wing_graph(edges: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """Wing → the other wings its modules import."""
    wings: dict[str, set[str]] = {}
    for module, imported in edges.items():
        wings.setdefault(wing_of(module), set()).update(wing_of(t) for t in imported if wing_of(t) != wing_of(module))
    wings.pop("__init__.py", None)  # the package's face hands names on; it is imported by no wing
    return wings


def tallest(wings: Mapping[str, set[str]]) -> list[str]:
    """The longest chain of wings in which each imports the next (the wings make no loop)."""

    @functools.cache
    def chain(wing: str) -> tuple[str, ...]:
        return (wing, *max((chain(w) for w in sorted(wings.get(wing, ()))), key=len, default=()))

    return list(max((chain(w) for w in sorted(wings)), key=len, default=()))


#: The most wings one chain of imports climbs: issue 61 asks for a house of at most 15 floors,
#: the benchmarks (``bench/``, which import the stores and the console) standing on the package.
MOST_WINGS_HIGH = 14


def test_the_imports_follow_the_floors_architecture_md_lists() -> None:
    floors = floors_from((ROOT / "ARCHITECTURE.md").read_text())
    edges = graph()
    assert len(edges) > 50 and {wing_of(m) for m in edges} <= set(floors) | {"__init__.py"}
    assert problems(edges, floors) == []
    assert not set(floors) - {wing_of(m) for m in edges}, "ARCHITECTURE.md lists a wing that does not exist"


def test_no_chain_of_imports_climbs_more_than_fourteen_wings() -> None:
    """What sits low stays low: a room that only parses, plans or declares imports no store, so
    the tallest chain (the CLI on the ingest on the store on its backend ... on the errors) is
    at most :data:`MOST_WINGS_HIGH` wings."""
    tower = tallest(wing_graph(graph()))
    assert tallest({"cli/": {"store.py", "errors.py"}, "store.py": {"errors.py"}}) == ["cli/", "store.py", "errors.py"]
    assert len(tower) <= MOST_WINGS_HIGH, f"{len(tower)} wings: " + " imports ".join(tower)


def test_the_check_finds_an_upward_import_a_file_loop_and_a_wing_loop() -> None:
    floors = {"errors.py": 1, "spec.py": 2, "read/": 3, "write/": 3}
    upward = {"tsstore.errors": {"tsstore.spec"}, "tsstore.spec": set()}
    assert problems(upward, floors) == [
        "tsstore.errors (floor 1) imports tsstore.spec (floor 2): an import up the floors"
    ]
    files = {"tsstore.read.plan": {"tsstore.read.chunks"}, "tsstore.read.chunks": {"tsstore.read.plan"}}
    assert problems(files, floors) == ["files import each other in a loop: tsstore.read.chunks, tsstore.read.plan"]
    wings = {
        "tsstore.read.plan": {"tsstore.write.ops"},
        "tsstore.write.ops": set(),
        "tsstore.write.job": {"tsstore.read.cost"},
        "tsstore.read.cost": set(),
    }
    assert problems(wings, floors) == ["wings import each other in a loop: read/, write/"]
    assert problems({"tsstore.nowhere": set()}, floors) == [
        "nowhere.py (tsstore.nowhere) is on no floor of ARCHITECTURE.md"
    ]


def test_no_class_outgrows_a_room() -> None:
    """The stores stay drivers (at most 250 lines each); no class passes 300 lines."""
    sizes = {
        f"{path.relative_to(ROOT)}:{node.name}": (node.end_lineno or node.lineno) - node.lineno + 1
        for path in PACKAGE.rglob("*.py")
        for node in statements(parsed(path))
        if isinstance(node, ast.ClassDef)
    }
    assert sizes["tsstore/store.py:TimeSeriesStore"] <= 250 and sizes["tsstore/aio.py:AsyncTimeSeriesStore"] <= 250
    assert {name: size for name, size in sizes.items() if size > 300} == {}
