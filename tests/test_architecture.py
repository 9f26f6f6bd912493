"""The import floors of ``docs/architecture.md``, checked on the source.

Every import of every module of the four packages - at the top of the module
or inside a function, ``import a.b`` or ``from a import b``, absolute or
relative - is read with :mod:`ast` (nothing is imported), giving a graph of
modules.  A lazy import counts like any other: one that hides a circle is a
circle.  Importing ``a.b.c`` is an edge to ``a.b.c`` only: the parent
packages' ``__init__`` modules Python runs first are not edges (they may
re-export their submodules without making a circle with each of them).

Two rules: no circle between modules, and every import goes down the floors
(:data:`FLOORS`) or stays in its own block, apart from the few
:data:`UPWARD_IMPORTS`, each of which ``docs/architecture.md`` names and explains.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("accel", "tengine_host", "fpga", "opendla")
ARCHITECTURE_DOC = ROOT / "docs" / "architecture.md"

#: The floors, bottom first.  Each floor holds blocks (a module and its submodules): a
#: block may import itself and any block of a lower floor, never a block of its own
#: floor or of a higher one.  ``accel`` is the package's docstring only.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("accel.jit",),
    ("accel", "accel.config", "accel.layout_compiled", "accel.ir", "accel.errors"),
    ("accel.arith", "accel.layout", "accel.cbuf", "accel.regs", "accel.loadable",
     "accel.golden", "accel.pixel_formats"),
    ("accel.cmod", "accel.rtl", "accel.runtime"),
    ("accel.trace",),
    ("accel.backends",),
    ("accel.compiler",),
    ("tengine_host", "fpga"),
    ("opendla",),
)

#: (importing module, imported module) pairs allowed to go up or across the floors; at
#: most two, each explained in docs/architecture.md
UPWARD_IMPORTS: frozenset[tuple[str, str]] = frozenset()


def module_files(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Dotted module name -> source file, for every ``.py`` under the ``packages``."""
    modules = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _imported_names(tree: ast.AST, module: str, is_package: bool) -> Iterable[tuple[str, int]]:
    """Every name an ``import`` statement anywhere in ``tree`` asks for, made absolute:
    ``a.b`` for ``import a.b``, ``a.b.x`` for ``from a.b import x`` (``x`` may be a
    submodule, or a name defined in ``a.b``: the caller resolves it to a module)."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                if node.level - 1 >= len(parts):
                    raise ValueError(f"{module}:{node.lineno}: relative import beyond the "
                                     f"top-level package")
                base = ".".join(parts[:len(parts) - (node.level - 1)])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            for alias in node.names:
                yield f"{base}.{alias.name}", node.lineno


def import_graph(root: Path, packages: Iterable[str]) -> dict[str, dict[str, int]]:
    """Module -> {module it imports: line of the first such import}, between the modules
    of ``packages`` only (the standard library and third parties are not nodes)."""
    files = module_files(root, packages)
    graph: dict[str, dict[str, int]] = {}
    for module, path in files.items():
        edges: dict[str, int] = {}
        tree = ast.parse(path.read_text(), filename=str(path))
        for name, line in _imported_names(tree, module, path.name == "__init__.py"):
            target = name
            while target and target not in files:   # a name defined in a module -> module
                target = target.rpartition(".")[0]
            if target and target != module:
                edges.setdefault(target, line)
        graph[module] = edges
    return graph


def circles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The import circles: strongly connected components of more than one module (or a
    module importing itself), each sorted, found with Tarjan's algorithm."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def block_of(module: str, floors: tuple[tuple[str, ...], ...]) -> tuple[int, str]:
    """(floor number, block) of ``module``: the longest block that is the module or one
    of its packages.  A module whose only block is a bare top-level package that other
    blocks split up (``accel``) is on no floor: it must be given one."""
    matches = [(len(block), floor, block) for floor, blocks in enumerate(floors)
               for block in blocks if module == block or module.startswith(block + ".")]
    if not matches:
        raise LookupError(f"module {module} is on no floor: add its block to FLOORS "
                          f"(tests/test_architecture.py) and to docs/architecture.md")
    _, floor, block = max(matches)
    split = any(b.startswith(block + ".") for blocks in floors for b in blocks)
    if split and module != block:
        raise LookupError(f"module {module} is on no floor ({block} is split into blocks "
                          f"and none holds it): add it to FLOORS and to "
                          f"docs/architecture.md")
    return floor, block


def upward_imports(graph: Mapping[str, Mapping[str, int]],
                   floors: tuple[tuple[str, ...], ...]) -> list[tuple[str, str, int]]:
    """(importer, imported, line) of every import that does not go down the floors: to
    another block of the same floor or to a higher floor."""
    found = []
    for module, edges in sorted(graph.items()):
        floor, block = block_of(module, floors)
        for target, line in sorted(edges.items()):
            target_floor, target_block = block_of(target, floors)
            if target_block != block and target_floor >= floor:
                found.append((module, target, line))
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, dict[str, int]]:
    return import_graph(ROOT, PACKAGES)


def test_no_import_circles(graph) -> None:
    assert circles(graph) == []


def test_every_module_is_on_a_floor(graph) -> None:
    for module in graph:
        block_of(module, FLOORS)


def test_imports_go_down_the_floors(graph) -> None:
    unexpected = [f"{src} imports {dst} (line {line})"
                  for src, dst, line in upward_imports(graph, FLOORS)
                  if (src, dst) not in UPWARD_IMPORTS]
    assert unexpected == []


def test_the_allowed_upward_imports_are_few_used_and_documented(graph) -> None:
    assert len(UPWARD_IMPORTS) <= 2
    used = {(src, dst) for src, dst, _ in upward_imports(graph, FLOORS)}
    assert sorted(UPWARD_IMPORTS - used) == [], "allowed but no longer made: drop them"
    doc = ARCHITECTURE_DOC.read_text()
    for src, dst in sorted(UPWARD_IMPORTS):
        assert f"`{src}` -> `{dst}`" in doc, f"{src} -> {dst} is not in {ARCHITECTURE_DOC}"


def test_accel_imports_neither_the_host_nor_the_board_nor_the_cli(graph) -> None:
    above = ("tengine_host", "fpga", "opendla")
    bad = [f"{src} imports {dst}" for src, edges in graph.items() if src.split(".")[0] == "accel"
           for dst in edges if dst.split(".")[0] in above]
    assert bad == []


def test_the_floors_in_the_code_are_the_floors_in_the_doc() -> None:
    doc = ARCHITECTURE_DOC.read_text()
    missing = [block for blocks in FLOORS for block in blocks if f"`{block}`" not in doc]
    assert missing == []


# ---------------------------------------------------------------- the checker itself


def _write(root: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_lazy_import_that_closes_a_circle_is_found(tmp_path) -> None:
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/low.py": "def f():\n    from pkg.high import g\n    return g\n",
        "pkg/high.py": "from pkg import low\n",
        "pkg/side.py": "from . import low\n",
    })
    graph = import_graph(tmp_path, ["pkg"])
    assert graph["pkg.low"] == {"pkg.high": 2}
    assert graph["pkg.side"] == {"pkg.low": 1}
    assert circles(graph) == [["pkg.high", "pkg.low"]]


def test_relative_and_from_package_imports_resolve_to_modules(tmp_path) -> None:
    _write(tmp_path, {
        "pkg/__init__.py": "from pkg.sub.a import X\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/a.py": "from ..b import Y\nfrom . import c\nX = 1\n",
        "pkg/sub/c.py": "",
        "pkg/b.py": "import pkg.sub.c\nY = 2\n",
    })
    graph = import_graph(tmp_path, ["pkg"])
    assert graph == {"pkg": {"pkg.sub.a": 1}, "pkg.sub": {},
                     "pkg.sub.a": {"pkg.b": 1, "pkg.sub.c": 2},
                     "pkg.sub.c": {}, "pkg.b": {"pkg.sub.c": 1}}
    assert circles(graph) == []


def test_imports_up_and_across_the_floors_are_found() -> None:
    floors = (("base",), ("left", "right"), ("top",))
    graph = {"base": {"left.x": 3}, "left.x": {"base": 1, "left.y": 2, "right": 4},
             "left.y": {}, "right": {}, "top": {"left.x": 1, "base": 2}}
    assert upward_imports(graph, floors) == [("base", "left.x", 3), ("left.x", "right", 4)]


def test_a_module_outside_the_floors_is_refused() -> None:
    floors = (("pkg", "pkg.low"), ("pkg.high",))
    assert block_of("pkg.low.deep", floors) == (0, "pkg.low")
    assert block_of("pkg", floors) == (0, "pkg")
    with pytest.raises(LookupError, match="pkg.new is on no floor"):
        block_of("pkg.new", floors)
    with pytest.raises(LookupError, match="other is on no floor"):
        block_of("other", floors)
