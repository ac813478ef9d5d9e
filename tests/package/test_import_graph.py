"""The library's modules import each other without a cycle, nothing of the
benchmark lab, and only the binding layer touches the engine's cffi module.

The graph is read from the source with :mod:`ast`.  An edge ``a -> b`` is any
``import`` or ``from ... import`` in ``a`` that names ``b``, wherever it is:
at the top, inside a function (a lazy import is still a dependency) or in a
``try``.  Imports under ``if TYPE_CHECKING:`` are for type checkers only and
make no edge.  Relative imports are resolved against the module's package;
``from pkg import name`` is an edge to the submodule ``pkg.name`` when there
is one and to ``pkg`` (its ``__init__``) otherwise.  Importing ``pkg.sub``
also runs ``pkg/__init__.py``; that implicit edge to a parent package is left
out, as every module of a package has it.

The benchmark lab (baselines, scenarios, the demo) is a distribution of its
own, ``cstrie_lab`` in ``stress/lab``: no library module imports it.  Imports
made by name at run time (``importlib``, ``__import__``) would be hidden from
the graph: the library makes none.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

import cstrie

PACKAGE_DIR = Path(cstrie.__file__).resolve().parent
#: the top-level packages of the benchmark lab (stress/lab)
LAB = ("cstrie_lab",)
#: the modules allowed to use the engine's cffi module: the binding layer, and
#: the cffi build that makes it
FFI_USERS = ("cstrie._binding", "cstrie._build")


def _name(root: Path, package: str, path: Path) -> str:
    parts = [package, *path.relative_to(root).parent.parts, path.name.split(".")[0]]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every ``.py`` module under ``root`` (the directory of ``package``) by name."""
    return {_name(root, package, path): path for path in sorted(root.rglob("*.py"))}


def compiled_names(root: Path, package: str) -> set[str]:
    """The compiled modules under ``root``: by their stubs, or their files once built."""
    return {
        _name(root, package, path)
        for suffix in (".pyi", *EXTENSION_SUFFIXES)
        for path in root.rglob("*" + suffix)
    }


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    if isinstance(test, ast.Attribute):
        return test.attr == "TYPE_CHECKING"
    return False


def _imports(nodes: list[ast.AST]) -> list[ast.Import | ast.ImportFrom]:
    """The import statements in ``nodes`` that run (not those under TYPE_CHECKING)."""
    found: list[ast.Import | ast.ImportFrom] = []
    for node in nodes:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            found.extend(_imports(list(node.orelse)))
        else:
            found.extend(_imports(list(ast.iter_child_nodes(node))))
    return found


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    parts = module.split(".")
    if not is_package:
        parts.pop()
    if node.level > 1:
        parts = parts[: len(parts) - (node.level - 1)]
    if node.module:
        parts.append(node.module)
    return ".".join(parts)


def import_graph(modules: dict[str, Path], others: Iterable[str] = ()) -> dict[str, set[str]]:
    """``{module: {modules it imports}}``, restricted to ``modules``.

    ``others`` names the package's modules that are not nodes (compiled ones,
    the lab's), so that ``from pkg import other`` is read as an import of
    ``pkg.other`` (left out), not of ``pkg``.
    """
    known = set(modules) | set(others)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        targets: set[str] = set()
        for node in _imports([tree]):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
                continue
            base = _absolute(name, is_package, node)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                targets.add(sub if sub in known else base)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every elementary cycle of ``graph``, each once, starting at its least node."""
    found: list[list[str]] = []
    for start in sorted(graph):
        _walk(graph, [start], found)
    return found


def _walk(graph: dict[str, set[str]], path: list[str], found: list[list[str]]) -> None:
    """The cycles through ``path`` back to ``path[0]`` whose other nodes are greater."""
    start = path[0]
    for nxt in sorted(graph[path[-1]]):
        if nxt == start:
            found.append([*path, start])
        elif nxt > start and nxt not in path:
            path.append(nxt)
            _walk(graph, path, found)
            path.pop()


def library_modules() -> dict[str, Path]:
    """The library's modules: every module of the installed package."""
    return module_names(PACKAGE_DIR, "cstrie")


def library_graph() -> dict[str, set[str]]:
    library = library_modules()
    others = set(module_names(PACKAGE_DIR, "cstrie")) - set(library)
    return import_graph(library, others | compiled_names(PACKAGE_DIR, "cstrie"))


def test_library_has_no_import_cycle() -> None:
    graph = library_graph()
    # the graph is read at all: an edge every build has
    assert "cstrie._binding" in graph["cstrie.dialect"]
    found = [" -> ".join(cycle) for cycle in sorted(cycles(graph), key=len)]  # shortest first
    for cycle in found:
        print(cycle)
    assert not found, f"{len(found)} import cycles:\n" + "\n".join(found)


def test_no_module_imports_by_name() -> None:
    names = {"import_module", "__import__"}
    found = []
    for name, path in library_modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if called in names:
                    found.append(f"{name}:{node.lineno}")
    assert not found


def test_binding_imports_nothing_of_the_library() -> None:
    assert library_graph()["cstrie._binding"] == set()


def _imported(tree: ast.AST) -> Iterable[tuple[int, str]]:
    """(line, absolute module name) of every absolute import in ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def test_the_library_imports_nothing_of_the_lab() -> None:
    found = [
        f"{name}:{line} imports {mod}"
        for name, path in library_modules().items()
        for line, mod in _imported(ast.parse(path.read_text(encoding="utf-8")))
        if mod.split(".")[0] in LAB
    ]
    assert not found, "\n".join(found)


def test_only_the_binding_uses_the_engines_ffi_and_lib() -> None:
    """No module but the binding layer imports ``cstrie._native`` or reads an
    ``ffi``/``lib`` attribute (``_binding.lib.cst_lookup``, ``nb.ffi.new``)."""
    found = []
    for name, path in library_modules().items():
        if name in FFI_USERS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module is not None:
                names = {a.name for a in node.names}
                if node.module.endswith("_native") or "_native" in names:
                    found.append(f"{name}:{node.lineno} imports the cffi module")
                if names & {"ffi", "lib"}:
                    found.append(f"{name}:{node.lineno} imports ffi/lib")
            elif isinstance(node, ast.Import) and any(
                a.name.endswith("._native") for a in node.names
            ):
                found.append(f"{name}:{node.lineno} imports the cffi module")
            elif isinstance(node, ast.Attribute) and node.attr in ("ffi", "lib"):
                found.append(f"{name}:{node.lineno} reads .{node.attr}")
    assert not found, "\n".join(found)


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_graph_sees_lazy_relative_and_package_imports(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "__init__.py": "from pkg.a import A\n",
            "a.py": "def f():\n    from .sub import helper\n",
            "b.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from pkg.a import A\n"
                "else:\n    import pkg.c\n"
            ),
            "c.py": "import os\n",
            "sub/__init__.py": "from . import x\nfrom ..c import C\n",
            "sub/x.py": (
                "from pkg.sub import helper\n"
                "try:\n    from .. import b\nexcept ImportError:\n    pass\n"
            ),
        },
    )
    graph = import_graph(module_names(tmp_path, "pkg"))
    assert graph == {
        "pkg": {"pkg.a"},
        "pkg.a": {"pkg.sub"},
        "pkg.b": {"pkg.c"},
        "pkg.c": set(),
        "pkg.sub": {"pkg.sub.x", "pkg.c"},
        "pkg.sub.x": {"pkg.sub", "pkg.b"},
    }
    assert cycles(graph) == [["pkg.sub", "pkg.sub.x", "pkg.sub"]]


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"a"}}, [["a", "b", "a"]]),
        (
            {"a": {"b", "c"}, "b": {"c"}, "c": {"a"}},
            [["a", "b", "c", "a"], ["a", "c", "a"]],
        ),
    ],
)
def test_cycles(graph: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert cycles(graph) == expected
