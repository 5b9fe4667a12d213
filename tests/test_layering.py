"""The package's import graph has no cycles and points down (cli -> train/eval/demo/diagnose ->
engines -> tasks (with rewards/data/envs/models) -> core). Function-level (lazy) imports count too:
a cycle hidden inside a function is still two modules that cannot be understood one without the
other.

Task families (the packages under resrl.tasks) are islands: no family imports another family,
the core imports no family, and nothing outside resrl.tasks imports a family's modules — the
generic code reaches a family only through resrl.tasks.registry."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

# layer -> packages it must never import (the layers above it)
FORBIDDEN = {
    "resrl.core": ("resrl.engines", "resrl.train", "resrl.eval", "resrl.demo", "resrl.diagnose", "resrl.cli",
                   "resrl.rewards", "resrl.data", "resrl.envs", "resrl.models", "resrl.tasks"),
    "resrl.tasks": ("resrl.engines", "resrl.train", "resrl.eval", "resrl.demo", "resrl.diagnose", "resrl.cli"),
    "resrl.rewards": ("resrl.engines", "resrl.train", "resrl.eval", "resrl.demo", "resrl.diagnose", "resrl.cli"),
    "resrl.data": ("resrl.engines", "resrl.train", "resrl.eval", "resrl.demo", "resrl.diagnose", "resrl.cli"),
    "resrl.envs": ("resrl.engines", "resrl.train", "resrl.eval", "resrl.demo", "resrl.diagnose", "resrl.cli"),
    "resrl.engines": ("resrl.train", "resrl.eval", "resrl.demo", "resrl.diagnose", "resrl.cli"),
}


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    """module -> the package modules it imports anywhere in its body (top level or in functions)."""
    files = {}
    for path in (src / "resrl").rglob("*.py"):
        parts = path.relative_to(src).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        files[name] = path
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                graph[mod] |= {a.name for a in node.names if a.name in files}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                subs = {f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in files}
                graph[mod] |= subs or ({target} if target in files else set())
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def families(src: Path = SRC) -> set[str]:
    """The task-family packages: resrl.tasks.<name> directories with an __init__.py."""
    return {f"resrl.tasks.{p.parent.name}" for p in (src / "resrl" / "tasks").glob("*/__init__.py")}


def _family(mod: str, family_names: set[str]) -> str | None:
    return next((f for f in family_names if mod == f or mod.startswith(f + ".")), None)


def violations(graph: dict[str, set[str]], family_names: set[str]) -> list[str]:
    """Every import that breaks a rule of the module docstring, as "importer -> imported (rule)"."""
    bad = []
    for mod, targets in graph.items():
        for layer, forbidden in FORBIDDEN.items():
            if mod == layer or mod.startswith(layer + "."):
                bad += [f"{mod} -> {t} (points up)" for t in sorted(targets) if t.startswith(forbidden)]
        mine = _family(mod, family_names)
        for t in sorted(targets):
            theirs = _family(t, family_names)
            if theirs is None or theirs == mine:
                continue
            if mine is not None:
                bad.append(f"{mod} -> {t} (one family imports another)")
            else:  # the generic code asks resrl.tasks.registry instead
                bad.append(f"{mod} -> {t} (a family imported outside resrl.tasks)")
    return bad


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_imports_point_down():
    assert violations(import_graph(), families()) == []


def test_the_five_families_are_packages():
    assert families() >= {"resrl.tasks.math", "resrl.tasks.code", "resrl.tasks.tools", "resrl.tasks.reasoning_gym",
                          "resrl.tasks.alfworld"}


def test_the_checks_see_a_planted_cycle_and_an_upward_import(tmp_path):
    for rel, text in {"resrl/__init__.py": "", "resrl/core/__init__.py": "",
                      "resrl/core/a.py": "def f():\n    from resrl.core import b\n",
                      "resrl/core/b.py": "from .a import f\n",
                      "resrl/engines/__init__.py": "", "resrl/engines/x.py": ""}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    graph = import_graph(tmp_path)
    assert cycles(graph) == [["resrl.core.a", "resrl.core.b"]]
    (tmp_path / "resrl/core/b.py").write_text("import resrl.engines.x\n")
    graph = import_graph(tmp_path)
    assert cycles(graph) == [] and graph["resrl.core.b"] == {"resrl.engines.x"}


def test_the_checks_see_a_cross_family_import_and_a_family_imported_from_outside(tmp_path):
    files = {"resrl/__init__.py": "", "resrl/core/__init__.py": "", "resrl/core/m.py": "",
             "resrl/engines/__init__.py": "", "resrl/engines/x.py": "",
             "resrl/tasks/__init__.py": "", "resrl/tasks/registry.py": "",
             "resrl/tasks/fam_a/__init__.py": "from resrl.tasks.registry import *\n",
             "resrl/tasks/fam_a/reward.py": "from resrl.tasks.fam_a import data\n",
             "resrl/tasks/fam_a/data.py": "import resrl.core.m\n",
             "resrl/tasks/fam_b/__init__.py": "", "resrl/tasks/fam_b/env.py": "",
             "resrl/data/__init__.py": "", "resrl/data/loaders.py": "from resrl.tasks import registry\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    fams = families(tmp_path)
    assert fams == {"resrl.tasks.fam_a", "resrl.tasks.fam_b"}
    assert violations(import_graph(tmp_path), fams) == []  # within a family, registry, core: allowed
    planted = {"resrl/tasks/fam_a/reward.py": "def f():\n    from resrl.tasks.fam_b.env import E\n",
               "resrl/core/m.py": "import resrl.tasks.fam_b\n",
               "resrl/tasks/fam_b/env.py": "from resrl.engines import x\n",
               "resrl/data/loaders.py": "from resrl.tasks.fam_a.reward import f\n"}
    for rel, text in planted.items():
        (tmp_path / rel).write_text(text)
    assert sorted(violations(import_graph(tmp_path), fams)) == [
        "resrl.core.m -> resrl.tasks.fam_b (a family imported outside resrl.tasks)",
        "resrl.core.m -> resrl.tasks.fam_b (points up)",
        "resrl.data.loaders -> resrl.tasks.fam_a.reward (a family imported outside resrl.tasks)",
        "resrl.tasks.fam_a.reward -> resrl.tasks.fam_b.env (one family imports another)",
        "resrl.tasks.fam_b.env -> resrl.engines.x (points up)",
    ]
