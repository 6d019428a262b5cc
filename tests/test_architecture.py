"""The import rule of the house (docs ARCHITECTURE, README "How the code is organised").

A stage imports only stages below it, in the order of `STAGES`; modules of one stage may import
each other, but no modules import each other in a circle (of any length). Every import counts:
module level, inside functions, under `if TYPE_CHECKING:`, relative or absolute, and
`importlib.import_module("psyattrs....")` with a literal name. `from pkg import name` counts as
importing `pkg.name` when that is a module, else `pkg` itself. Importing a submodule is not
counted as importing the packages above it (Python runs their `__init__` first, but that is
not an arrow the code draws).
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "attrs"
PACKAGE = "psyattrs"

# lowest first; the stages of one tuple sit side by side (may import each other, never in a circle)
STAGES: tuple[tuple[str, ...], ...] = (
    ("_runtime", "_version", "_yaml", "errors", "schema"),
    ("features",),
    ("data",),
    ("labels",),
    ("models",),
    ("synth", "align"),
    ("experiments",),
    ("serving",),
    ("reports",),
    ("cli",),
    ("__init__", "__main__"),  # the public API (psyattrs/__init__.py) and `python -m psyattrs`
)


@dataclass(frozen=True)
class Arrow:
    source: str
    target: str
    where: str  # file:line

    def __str__(self) -> str:
        return f"{self.source} -> {self.target}  ({self.where})"


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module of the package under `root`: dotted name -> file (a package is its __init__)."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join([package, *parts])] = path
    return names


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The module `name` refers to: itself, or the longest prefix that is a module (an attribute)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def imports(modules: dict[str, Path], package: str, root: Path) -> list[Arrow]:
    """Every import between the package's modules, with where it is written."""
    arrows = []
    for source, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = source.split(".") if is_package else source.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    stem = ".".join(base + ([node.module] if node.module else []))
                else:
                    stem = node.module or ""
                for alias in node.names:
                    sub = f"{stem}.{alias.name}"
                    targets.append(sub if sub in modules else stem)
            elif isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if called in ("import_module", "__import__") and node.args:
                    arg = node.args[0]
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        targets = [arg.value]
            for target in targets:
                if target != package and not target.startswith(package + "."):
                    continue
                resolved = _resolve(target, modules)
                arrow = Arrow(source, resolved, f"{path.relative_to(root).as_posix()}:{node.lineno}") if resolved else None
                if arrow is not None and resolved != source and arrow not in arrows:
                    arrows.append(arrow)
    return arrows


def stage_of(module: str) -> str:
    """The stage of a dotted module name: its first folder or file below the package."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def rank_table(stages: tuple[tuple[str, ...], ...]) -> dict[str, int]:
    return {name: rank for rank, group in enumerate(stages) for name in group}


def upward(arrows: list[Arrow], stages: tuple[tuple[str, ...], ...]) -> list[Arrow]:
    """The arrows from a stage to a stage above it."""
    rank = rank_table(stages)
    return [a for a in arrows if rank[stage_of(a.source)] < rank[stage_of(a.target)]]


def cycles(arrows: list[Arrow]) -> list[list[str]]:
    """One circle per group of modules that import each other (directly or through others), as
    the list of modules around it (first repeated at the end); Tarjan's strongly connected
    components, then a shortest circle through the group's first module."""
    graph: dict[str, set[str]] = {}
    for a in arrows:
        graph.setdefault(a.source, set()).add(a.target)
        graph.setdefault(a.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:  # recursion depth is bounded by the number of modules (~100)
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    found = []
    for group in sorted(groups):
        members, start = set(group), group[0]
        previous: dict[str, str] = {}
        frontier, path = [start], None
        while frontier and path is None:  # breadth-first: a shortest way back to start
            nxt = []
            for v in frontier:
                for w in sorted(graph[v] & members):
                    if w == start:
                        path = [start]
                        while v != start:
                            path.append(v)
                            v = previous[v]
                        path = [start, *reversed(path[1:]), start]
                        break
                    if w not in previous:
                        previous[w] = v
                        nxt.append(w)
                if path is not None:
                    break
            frontier = nxt
        found.append(path)
    return found


def check(root: Path, package: str, stages: tuple[tuple[str, ...], ...]) -> list[str]:
    """Everything wrong with the package's imports, one line each (empty: the house is in order)."""
    modules = module_names(root, package)
    rank = rank_table(stages)
    problems = [f"{m}: stage {stage_of(m)!r} is not in the stage order" for m in modules
                if stage_of(m) not in rank]
    if problems:
        return problems
    arrows = imports(modules, package, root)
    for a in upward(arrows, stages):
        problems.append(f"upward: {a}   [{stage_of(a.source)} is below {stage_of(a.target)}]")
    for circle in cycles(arrows):
        problems.append("circle: " + " -> ".join(circle))
    return problems


def test_the_package_imports_only_downward_and_without_circles():
    problems = check(SRC, PACKAGE, STAGES)
    assert not problems, "import rule broken:\n" + "\n".join(problems)


# ------------------------------------------------------------------------------ the checker itself


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root / "pkg"


TOY_STAGES = (("low",), ("mid",), ("high",), ("__init__",))


def test_the_checker_finds_upward_arrows_of_every_spelling(tmp_path):
    root = _write(tmp_path, {
        "__init__.py": "from pkg.high import top\n",
        "low/__init__.py": "",
        "low/a.py": """
            def lazy():
                from pkg.high import top  # a submodule through `from pkg import name`
                return top
        """,
        "low/b.py": "from ..mid.m import VALUE\n",  # relative, two levels up
        "low/c.py": """
            import importlib
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                import pkg.mid.m
            MOD = importlib.import_module("pkg.high.top")
        """,
        "low/d.py": "from pkg import high\nimport os\n",
        "low/e.py": "from pkg.low import a\nfrom . import b\n",  # sideways: fine
        "mid/__init__.py": "",
        "mid/m.py": "from pkg.low.a import lazy\nVALUE = 1\n",  # downward: fine
        "high/__init__.py": "",
        "high/top.py": "import pkg.mid.m\nfrom pkg.low import a\n",
    })
    problems = check(root, "pkg", TOY_STAGES)
    upward_lines = sorted(p.split("  (")[0] for p in problems if p.startswith("upward"))
    assert upward_lines == [
        "upward: pkg.low.a -> pkg.high.top",
        "upward: pkg.low.b -> pkg.mid.m",
        "upward: pkg.low.c -> pkg.high.top",
        "upward: pkg.low.c -> pkg.mid.m",
        "upward: pkg.low.d -> pkg.high",
    ]
    assert "upward: pkg.low.a -> pkg.high.top  (low/a.py:3)   [low is below high]" in problems
    # pkg.low.a -> high.top -> low.a is also a circle
    assert [p for p in problems if p.startswith("circle")] == ["circle: pkg.high.top -> pkg.low.a -> pkg.high.top"]


def test_the_checker_finds_circles_of_any_length_within_a_stage(tmp_path):
    root = _write(tmp_path, {
        "__init__.py": "",
        "low/__init__.py": "from pkg.low.run import go\n",
        "low/run.py": "from pkg.low import helpers\ndef go(): pass\n",  # -> pkg.low.helpers, not the package
        "low/helpers.py": "X = 1\n",
        "mid/__init__.py": "",
        "mid/p.py": "from .q import f\n",
        "mid/q.py": "def f():\n    from .r import g\n",
        "mid/r.py": "from pkg.mid import p\ng = 1\n",
        "high/__init__.py": "",
        "high/s.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.high.t import T\n",
        "high/t.py": "from pkg.high.s import S\nT = 1\n",
    })
    assert check(root, "pkg", TOY_STAGES) == [
        "circle: pkg.high.s -> pkg.high.t -> pkg.high.s",
        "circle: pkg.mid.p -> pkg.mid.q -> pkg.mid.r -> pkg.mid.p",
    ]


def test_the_checker_passes_a_clean_package_and_names_unknown_stages(tmp_path):
    root = _write(tmp_path, {
        "__init__.py": "from pkg.high.top import run\n",
        "low/__init__.py": "",
        "low/a.py": "import json\n",
        "high/__init__.py": "from . import top\n",  # relative in a package's __init__: pkg.high.top
        "high/top.py": "from pkg.low import a\nfrom ..low.a import json\ndef run(): pass\n",
    })
    assert check(root, "pkg", TOY_STAGES) == []
    (root / "extra").mkdir()
    (root / "extra" / "__init__.py").write_text("", encoding="utf-8")
    assert check(root, "pkg", TOY_STAGES) == ["pkg.extra: stage 'extra' is not in the stage order"]


def unexplained_lazy_imports(root: Path, package: str) -> list[str]:
    """The imports of the package's own modules written inside a function with no `# lazy: why`
    comment on the line above them (or above the run of such imports they belong to), as
    `file:line: the import`. Issue 25: a file's dependencies show at its top; an import stays in a
    function only where moving it up would load a heavy backend on a path that does not need it or
    close a circle, and then it says so."""
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.split("\n")
        for func in ast.walk(ast.parse(text, filename=str(path))):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.ImportFrom):
                    own = node.level > 0 or (node.module or "").split(".")[0] == package
                elif isinstance(node, ast.Import):
                    own = any(alias.name.split(".")[0] == package for alias in node.names)
                else:
                    continue
                above = node.lineno - 2
                while above >= 0 and lines[above].strip().startswith((f"from {package}", f"import {package}", "from .")):
                    above -= 1
                if own and not (above >= 0 and lines[above].strip().startswith("# lazy:")):
                    found.append(f"{path.relative_to(root).as_posix()}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return sorted(set(found))


def test_every_import_left_inside_a_function_says_why():
    found = unexplained_lazy_imports(SRC, PACKAGE)
    assert not found, ("move these to the top of their module, or say why they stay (`# lazy: torch`, "
                       "`# lazy: circle with X`) on the line above:\n" + "\n".join(found))


def test_the_lazy_check_finds_an_unexplained_import(tmp_path):
    root = _write(tmp_path, {
        "a.py": "def f():\n    from pkg.b import x\n    return x\n",
        "b.py": ("x = 1\n\ndef g():\n    # lazy: torch\n    from pkg.a import f\n    from pkg.c import y\n\n"
                 "    import json\n    return f, y, json\n"),
        "c.py": "y = 2\n",
    })
    assert unexplained_lazy_imports(root, "pkg") == ["a.py:2: from pkg.b import x"]
