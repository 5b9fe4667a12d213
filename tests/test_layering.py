"""The package's import graph has no cycles and points down the floors of `LAYERS` (cli ->
experiments -> demo -> train/eval/diagnose -> engines -> tasks -> rewards/data/envs/models -> core): no arrow runs
back up. In particular rewards/, data/ and envs/ hold what the task families build on and import
nothing of resrl.tasks; the lookups by family name (resrl.tasks.data, .rewards, .envs) live beside
resrl.tasks.registry. Function-level (lazy) imports count too: a cycle or an upward arrow hidden
inside a function is still there.

Task families (the packages under resrl.tasks) are islands: no family imports another family,
the core imports no family, and nothing outside resrl.tasks imports a family's modules — the
generic code reaches a family only through resrl.tasks.registry."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

# the floors, top first; a package may import its own floor and the floors below it, never one above
LAYERS = (
    ("resrl.cli",),
    ("resrl.experiments",),  # plans of jobs over train / eval: `resrl demo`, `resrl compare`, --seeds, --grid
    ("resrl.demo",),  # the demo tasks as data (generators, rewards, warm-start sources, budgets) and their reports
    ("resrl.train", "resrl.eval", "resrl.diagnose"),
    ("resrl.engines",),
    ("resrl.tasks",),  # the registry, the lookups by family name beside it, one package per family
    ("resrl.rewards", "resrl.data", "resrl.envs", "resrl.models"),  # what the families build on
    ("resrl.core",),
)
# package -> the packages it must never import (the floors above its own)
FORBIDDEN = {pkg: tuple(up for above in LAYERS[:i] for up in above) for i, floor in enumerate(LAYERS) for pkg in floor}


def _inside(mod: str, packages) -> bool:
    return any(mod == p or mod.startswith(p + ".") for p in packages)


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
            if _inside(mod, (layer,)):
                bad += [f"{mod} -> {t} (points up)" for t in sorted(targets) if _inside(t, forbidden)]
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


def test_the_floors_the_families_build_on_import_nothing_of_tasks():
    for floor in ("resrl.rewards", "resrl.data", "resrl.envs", "resrl.models"):
        assert "resrl.tasks" in FORBIDDEN[floor]
    up = {f"{m} -> {t}" for m, targets in import_graph().items() for t in targets
          if _inside(m, ("resrl.rewards", "resrl.data", "resrl.envs")) and _inside(t, ("resrl.tasks",))}
    assert up == set()


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
             "resrl/tasks/data.py": "from resrl.tasks import registry\nfrom resrl.data import loaders\n",
             "resrl/data/__init__.py": "", "resrl/data/loaders.py": ""}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    fams = families(tmp_path)
    assert fams == {"resrl.tasks.fam_a", "resrl.tasks.fam_b"}
    assert violations(import_graph(tmp_path), fams) == []  # within a family, registry, floors below: allowed
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
        "resrl.data.loaders -> resrl.tasks.fam_a.reward (points up)",
        "resrl.tasks.fam_a.reward -> resrl.tasks.fam_b.env (one family imports another)",
        "resrl.tasks.fam_b.env -> resrl.engines.x (points up)",
    ]


def test_the_checks_see_a_floor_below_tasks_asking_the_registry(tmp_path):
    """The three arrows 0.2.0 removed, planted back: data/, rewards/, envs/ asking resrl.tasks."""
    files = {"resrl/__init__.py": "", "resrl/tasks/__init__.py": "", "resrl/tasks/registry.py": "",
             "resrl/tasks/rewards.py": "from resrl.tasks import registry\nfrom resrl.rewards import isolation\n",
             "resrl/rewards/__init__.py": "", "resrl/rewards/isolation.py": "",
             "resrl/data/__init__.py": "", "resrl/data/loaders.py": "",
             "resrl/envs/__init__.py": "", "resrl/envs/base.py": ""}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert violations(import_graph(tmp_path), families(tmp_path)) == []
    planted = {"resrl/rewards/isolation.py": "from resrl.tasks import registry as tasks\n",
               "resrl/data/loaders.py": "def f():\n    from resrl.tasks.registry import family_for_data\n",
               "resrl/envs/base.py": "import resrl.tasks.rewards\n"}
    for rel, text in planted.items():
        (tmp_path / rel).write_text(text)
    assert sorted(violations(import_graph(tmp_path), families(tmp_path))) == [
        "resrl.data.loaders -> resrl.tasks.registry (points up)",
        "resrl.envs.base -> resrl.tasks.rewards (points up)",
        "resrl.rewards.isolation -> resrl.tasks.registry (points up)",
    ]
