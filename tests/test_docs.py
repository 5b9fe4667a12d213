"""The documentation site: `mkdocs build --strict` passes, the key pages exist, the equations are MathML,
and the configuration reference lists exactly the keys of the config dataclasses, each described.

Needs the `docs` extra. Without it the tests skip, except under CI (`CI` set and not 0/false), where a
missing docs toolchain is a failure: CI must build the site.
"""

from __future__ import annotations

import dataclasses
import html
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import typing
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS_MODULES = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python", "pymdownx", "latex2mathml")

SLOW = pytest.mark.slow  # each site build takes ~15-20 s on a busy 2-core machine


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _require_docs_toolchain() -> None:
    missing = []
    for name in DOCS_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            missing.append(name)
    if not missing:
        return
    message = f"docs toolchain not installed (missing {', '.join(missing)}): pip install -e '.[docs]'"
    if _in_ci():
        pytest.fail(message + " — CI must build the documentation site")
    pytest.skip(message + " (this fails under CI=true)")


def build_site(root: Path, out: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(root / "mkdocs.yml"), "-d", str(out)],
        cwd=root, env=env, capture_output=True, text=True, timeout=600,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    _require_docs_toolchain()
    out = tmp_path_factory.mktemp("site")
    proc = build_site(ROOT, out)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    assert "WARNING" not in proc.stderr + proc.stdout
    return out


def _page(site: Path, path: str) -> str:
    file = site / path / "index.html" if path else site / "index.html"
    assert file.is_file(), f"page {path or '/'} was not built"
    return file.read_text(encoding="utf-8")


def _text(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page))


@SLOW
def test_key_pages_exist_with_their_content(site):
    start = _text(_page(site, "getting-started"))
    assert "Two commands" in start and "bash scripts/setup.sh && .venv/bin/resrl demo" in start
    method = _page(site, "method")
    assert method.count("<math") >= 10, "the method's equations were not converted to MathML"
    assert 'class="arithmatex"' not in method, "a formula was left unconverted"
    assert "<math" in _page(site, "evaluation") and "<math" in _page(site, "diagnose")
    for path in ("training", "recipes", "verl", "evaluation", "tasks/math", "tasks/tools", "tasks/code",
                 "diagnose", "results", "development", "reference/config"):
        _page(site, path)
    # the API reference is generated from the docstrings
    core = _page(site, "api/core")
    assert 'id="resrl.core.residual.resrl_token_advantages"' in core
    assert 'id="resrl.core.resrl_config.ResRLConfig"' in core
    for path, ident in [("api/metrics", "resrl.metrics"), ("api/tasks", "resrl.tasks.math.reward"),
                        ("api/eval", "resrl.eval.runner.evaluate"), ("api/training", "resrl.engines.trl.trainer.ResRLTrainer"),
                        ("api/training", "resrl.train.config.TrainConfig")]:
        assert f'id="{ident}"' in _page(site, path), (path, ident)
    # the measured results moved from the README, numbers and commands included
    results = _page(site, "results")
    assert "<td>warm start</td>\n<td>0.402</td>" in results and "<td>0.484 ± 0.016</td>" in results
    assert "python benchmarks/bench_weights.py" in _text(results)



@SLOW
def test_the_api_reference_covers_every_public_module(site):
    api = "".join(p.read_text(encoding="utf-8") for p in (site / "api").rglob("*.html"))
    modules = []
    for path in (ROOT / "src" / "resrl").rglob("*.py"):
        parts = list(path.relative_to(ROOT / "src").with_suffix("").parts)
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        if not any(p.startswith("_") for p in parts) and parts[-1] not in ("command", "cli"):
            modules.append(".".join(parts))
    assert len(modules) > 80
    missing = sorted(m for m in modules if f'id="{m}"' not in api)
    assert not missing, f"modules missing from the API reference: {missing}"


@SLOW
def test_the_built_site_loads_nothing_from_the_network(site):
    external = re.compile(r'(?:<script[^>]*\ssrc|<link[^>]*\shref|<img[^>]*\ssrc)="(?:https?:)?//', re.IGNORECASE)
    pages = list(site.rglob("*.html"))
    assert len(pages) > 20
    offenders = [str(p.relative_to(site)) for p in pages if external.search(p.read_text(encoding="utf-8"))]
    assert not offenders, f"pages loading a script, stylesheet or font from the network: {offenders[:5]}"


# -- the configuration reference ----------------------------------------------------------------

def _config_keys() -> tuple[dict[str, dataclasses.Field], set[str]]:
    """Every dotted key of TrainConfig, walked here independently of the docs hook: annotations,
    with `algorithm` / `loss` / `critic` (annotated Any) resolved to the core's dataclasses."""
    from resrl.core.flowrl import FlowRLConfig
    from resrl.core.loss import LossConfig
    from resrl.core.registry import AlgorithmConfig
    from resrl.core.resrl_config import ResRLConfig
    import resrl.train.config as config_module

    from resrl.core.value import CriticConfig

    untyped = {"algorithm": AlgorithmConfig, "loss": LossConfig, "critic": CriticConfig}
    keys: dict[str, dataclasses.Field] = {}
    sections: set[str] = set()
    reached: set[type] = set()

    def walk(cls: type, prefix: str) -> None:
        reached.add(cls)
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            keys[prefix + f.name] = f
            candidates = [untyped.get(f.name) if cls is config_module.TrainConfig else None,
                          hints[f.name], *typing.get_args(hints[f.name])]
            sub = next((c for c in candidates if isinstance(c, type) and dataclasses.is_dataclass(c)), None)
            if sub is not None:
                sections.add(prefix + f.name)
                walk(sub, f"{prefix}{f.name}.")

    walk(config_module.TrainConfig, "")
    every = {obj for obj in vars(config_module).values() if isinstance(obj, type) and dataclasses.is_dataclass(obj)
             and obj.__module__ == config_module.__name__}
    every |= {AlgorithmConfig, LossConfig, ResRLConfig, FlowRLConfig, CriticConfig}
    assert every <= reached, f"config dataclasses not reachable from TrainConfig: {every - reached}"
    return keys, sections


_ROW = re.compile(r"<tr>\s*<td><code>([^<]*)</code></td>\s*<td><code>([^<]*)</code></td>\s*"
                  r"<td><code>([^<]*)</code></td>\s*<td>((?:(?!</tr>).)*?)</td>\s*</tr>", re.DOTALL)


def _reference_rows(site: Path) -> dict[str, tuple[str, str, str]]:
    page = _page(site, "reference/config")
    rows = {}
    for key, type_, default, description in _ROW.findall(page):
        assert key not in rows, f"config key {key} listed twice"
        text = html.unescape(re.sub(r"<[^>]+>", "", description)).strip()
        rows[key] = (html.unescape(type_), html.unescape(default), text)
    return rows


@SLOW
def test_config_reference_lists_every_field_of_every_config_dataclass(site):
    keys, sections = _config_keys()
    rows = _reference_rows(site)
    assert set(rows) == set(keys), (f"missing from the reference: {sorted(set(keys) - set(rows))}; "
                                    f"listed but not a config key: {sorted(set(rows) - set(keys))}")
    assert len(keys) > 90  # every section, nested ones included (model.lora, algorithm.resrl, ...)
    for key, f in keys.items():
        type_, default, description = rows[key]
        assert description, f"config key {key} has no description"
        if key in sections:
            assert default == "(section)" or (default == "null" and f.default is None), (key, default)
        elif f.default is not dataclasses.MISSING:
            assert default == ("null" if f.default is None else repr(f.default)), (key, default, f.default)
    assert rows["algorithm.resrl.rank"][1] == "64" and "rank of the positive subspace" in rows["algorithm.resrl.rank"][2]
    assert rows["train.group_size"][1] == "4"
    assert rows["model.lora"][1] == "null" and rows["algorithm"][1] == "(section)"


@SLOW
def test_an_undocumented_config_key_or_a_bad_formula_fails_the_strict_build(tmp_path):
    """Plant, in a copy of the docs and sources, a new config field with no comment, one with a
    comment, and a formula with a misspelt command: the strict build fails naming exactly the
    undocumented field and the formula."""
    _require_docs_toolchain()
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "src", copy / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "docs", copy / "docs")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    config_py = copy / "src" / "resrl" / "train" / "config.py"
    source = config_py.read_text()
    anchor = "    bf16: bool = False"
    assert anchor in source
    source = source.replace(anchor, "    planted_documented: int = 3  # a planted key with its comment\n"
                                    "    planted_silent: int = 7\n" + anchor)
    config_py.write_text(source)
    method = copy / "docs" / "method.md"
    method.write_text(method.read_text() + "\nA planted formula: $\\omgea_t$.\n")

    proc = build_site(copy, tmp_path / "site")
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, "the strict build passed with an undocumented config key"
    warnings = [line for line in output.splitlines() if line.startswith("WARNING")]
    assert any("train.planted_silent" in w and "no description" in w for w in warnings), output
    assert any("method.md" in w and "\\omgea" in w for w in warnings), output
    assert not any("planted_documented" in w for w in warnings), output
    assert len(warnings) == 2, output


def _hook(name: str):
    spec = importlib.util.spec_from_file_location(f"docs_hook_{name}", ROOT / "docs" / "_hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_docstring_tables_become_preformatted_blocks_and_nothing_else_changes():
    _require_docs_toolchain()
    preformat = _hook("griffe_docstring_tables").preformat_tables
    doc = ("Summary line.\n"
           "rank             k, rank of the subspace\n"
           "max_pos_tokens   M_max, cap on sampled\n"
           "                 positive tokens\n"
           "\n"
           "Note:   one aligned line alone stays prose.")
    assert preformat(doc).split("\n") == [
        "Summary line.", "",
        "    rank             k, rank of the subspace",
        "    max_pos_tokens   M_max, cap on sampled",
        "                     positive tokens",
        "",
        "Note:   one aligned line alone stays prose."]
    plain = "One paragraph\nover two lines.\n\n    already indented   code\n    block   here"
    assert preformat(plain) == plain


def test_field_descriptions_read_comments_above_trailing_and_docstring_tables(tmp_path):
    _require_docs_toolchain()
    hook = _hook("config_reference")
    source = tmp_path / "docs_planted_config.py"  # inspect.getsource needs a real file
    source.write_text(
        "from dataclasses import dataclass\n"
        "@dataclass\n"
        "class Planted:\n"
        '    """Planted.\n\n    gamma   from the docstring,\n            continued\n    """\n'
        "    # above, line 1\n"
        "    # above, line 2\n"
        "    alpha: int = 1\n"
        "    beta: float = 2.0  # trailing\n"
        "    gamma: str = 'g'\n"
        "    delta: int = 0\n"
    )
    spec = importlib.util.spec_from_file_location("docs_planted_config", source)
    module = importlib.util.module_from_spec(spec)
    sys.modules["docs_planted_config"] = module  # dataclass() looks its module up
    try:
        spec.loader.exec_module(module)
        descriptions = hook.field_descriptions(module.Planted)
    finally:
        sys.modules.pop("docs_planted_config", None)
    assert descriptions == {"alpha": "above, line 1 above, line 2", "beta": "trailing",
                            "gamma": "from the docstring, continued", "delta": ""}


# -- every path the docs name exists ------------------------------------------------------------

# A repo-relative path: src/…, configs/…, scripts/…, benchmarks/…, examples/…, tests/…, docs/…
# (not a part of a longer path or URL: `verl-agent/examples/…` is another project's file).
_REPO_PATH = re.compile(r"(?<![\w./~$:-])((?:src|configs|scripts|benchmarks|examples|tests|docs)/[\w./{},*<>-]*)")
# A source file named inside src/resrl, in backticks: `core/loss.py`, `engines/trl/rules.py`.
_PACKAGE_FILE = re.compile(r"`((?:core|engines|train|eval|demo|diagnose|rewards|data|envs|models|tasks|experiments)/[\w/{},-]*\.py)`")
# The worked example of a new family in development.md names files that do not exist yet.
_HYPOTHETICAL = ("/sudoku", "test_sudoku.py", "sorting_task.py", "test_demo_sorting.py")  # development.md's examples


def _expand_braces(path: str) -> list[str]:
    """`src/resrl/tasks/{math,code}/` -> both paths (nested and repeated lists too)."""
    match = re.search(r"\{([^{}]*)\}", path)
    if match is None:
        return [path]
    return [expanded for alternative in match.group(1).split(",")
            for expanded in _expand_braces(path[:match.start()] + alternative + path[match.end():])]


def named_paths(text: str) -> list[tuple[int, str]]:
    """(line number, path relative to the repository root) for every path a page names."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for pattern, prefix in ((_REPO_PATH, ""), (_PACKAGE_FILE, "src/resrl/")):
            for match in pattern.finditer(line):
                for path in _expand_braces(match.group(1).rstrip(".,:;)")):
                    path = path.rstrip(".,:;)")
                    if "<" in path or any(h in path for h in _HYPOTHETICAL):  # placeholders
                        continue
                    found.append((number, prefix + path))
    return found


def _deprecated_shim(file: Path) -> bool:
    head = file.read_text(encoding="utf-8")[:200] if file.suffix == ".py" and file.is_file() else ""
    return head.startswith('"""Deprecated')


def stale_paths(root: Path) -> list[str]:
    """Every path README.md, CHANGELOG.md and docs/**/*.md name that does not exist in `root`, or that
    names a deprecated shim module (moved, kept for one release) instead of where the code lives now."""
    pages = [root / "README.md", *[root / "CHANGELOG.md"] * (root / "CHANGELOG.md").is_file(),
             *sorted((root / "docs").rglob("*.md"))]
    stale = []
    for page in pages:
        for number, path in named_paths(page.read_text(encoding="utf-8")):
            where = f"{page.relative_to(root)}:{number}: {path}"
            if "*" in path:
                if not list(root.glob(path)):
                    stale.append(where + " (matches nothing)")
            elif not (root / path).exists():
                stale.append(where + " (does not exist)")
            elif _deprecated_shim(root / path):
                stale.append(where + " (a deprecated shim: name the module it moved to)")
    return stale


_DOTTED = re.compile(r"(?<![\w.])(resrl(?:\.\w+){2,})")


def stale_module_names(root: Path) -> list[str]:
    """Dotted names under a subpackage (`resrl.tasks.code.reward`, `resrl.train.run_training`) that
    name no module or no name in the module they point into, or that point into a deprecated shim
    (the old names are in CHANGELOG.md, which this does not read: tests/test_moved.py checks its new
    names). Config keys such as `resrl.hidden_alignment` are not module names."""
    src = root / "src"
    stale = []
    for page in [root / "README.md", *sorted((root / "docs").rglob("*.md"))]:
        relative = str(page.relative_to(root))
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for match in _DOTTED.finditer(line):
                parts = match.group(1).split(".")
                if not (src / "resrl" / parts[1]).is_dir() or "sudoku" in parts:  # development.md's example
                    continue
                for k in range(len(parts), 1, -1):  # the longest prefix that is a module
                    base = src.joinpath(*parts[:k])
                    module = next((f for f in (base.with_suffix(".py"), base / "__init__.py") if f.is_file()), None)
                    if module is not None:
                        break
                where = f"{relative}:{number}: {match.group(1)}"
                if module is None:
                    stale.append(where + " (no such module)")
                    continue
                text = module.read_text(encoding="utf-8")
                if k < len(parts) and not re.search(rf"\b{re.escape(parts[k])}\b", text):
                    stale.append(where + f" (no {parts[k]} in {module.relative_to(root)})")
                elif _deprecated_shim(module):
                    stale.append(where + " (a deprecated shim: name the module it moved to)")
    return stale


def test_every_module_the_docs_name_exists(tmp_path):
    stale = stale_module_names(ROOT)
    assert not stale, "module names in README.md / docs/ that are stale:\n" + "\n".join(stale)
    (tmp_path / "docs").mkdir()
    package = tmp_path / "src" / "resrl" / "rewards"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "code.py").write_text('"""Deprecated: moved."""\n')
    (package / "exact.py").write_text("def exact_match(): ...\n")
    (tmp_path / "README.md").write_text("`resrl.rewards.code` `resrl.rewards.exact.exact_match` `resrl.rewards.exact.gone`"
                                        " `resrl.rewards.nowhere` `resrl.hidden_alignment=token`\n")
    assert [p.split(" (")[0] for p in stale_module_names(tmp_path)] == [
        "README.md:1: resrl.rewards.code", "README.md:1: resrl.rewards.exact.gone", "README.md:1: resrl.rewards.nowhere"]


def test_named_paths_parse_brace_lists_and_skip_urls_and_placeholders():
    text = ("see `src/resrl/tasks/{math,code}/` and `core/loss.py`, then configs/tiny_math.yaml.\n"
            "verl-agent/examples/gigpo_trainer/run.sh https://x.org/docs/a.md `src/resrl/tasks/<family>/`")
    assert named_paths(text) == [(1, "src/resrl/tasks/math/"), (1, "src/resrl/tasks/code/"),
                                 (1, "configs/tiny_math.yaml"), (1, "src/resrl/core/loss.py")]


def test_every_path_the_docs_name_exists(tmp_path):
    stale = stale_paths(ROOT)
    assert not stale, "paths named in README.md / docs/ that are stale:\n" + "\n".join(stale)
    # the check can fail: a planted bad path, and a planted name of a deprecated shim, are both found
    (tmp_path / "docs").mkdir()
    (tmp_path / "src" / "resrl" / "rewards").mkdir(parents=True)
    (tmp_path / "src" / "resrl" / "rewards" / "code.py").write_text('"""Deprecated: moved."""\n')
    (tmp_path / "README.md").write_text("`src/resrl/nowhere.py` and `rewards/code.py`\n")
    (tmp_path / "docs" / "index.md").write_text("`configs/{tiny_math,missing}.yaml`\n")
    planted = stale_paths(tmp_path)
    assert [p.split(" (")[0] for p in planted] == [
        "README.md:1: src/resrl/nowhere.py", "README.md:1: src/resrl/rewards/code.py",
        "docs/index.md:1: configs/tiny_math.yaml", "docs/index.md:1: configs/missing.yaml"]


def test_no_table_cell_prints_an_escaped_pipe():
    """In a Markdown table a `\\|` inside backticks is printed literally (the row is split before
    code spans are read): such a cell is reworded, or written as HTML (`<code>a&#124;b</code>`)."""
    offenders = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith("|") and any("\\|" in span for span in re.findall(r"`[^`]*`", line)):
                offenders.append(f"{page.relative_to(ROOT)}:{number}")
    assert not offenders, f"table cells with \\| inside a code span: {offenders}"


@SLOW
def test_the_built_site_prints_no_escaped_pipe_in_a_table(site):
    offenders = [str(p.relative_to(site)) for p in site.rglob("*.html")
                 if re.search(r"<td>(?:(?!</td>).)*\\\|", p.read_text(encoding="utf-8"), re.DOTALL)]
    assert not offenders, f"pages printing a literal \\| in a table cell: {offenders}"


def test_the_docs_name_the_experiment_engine_every_kind_and_every_demo_task():
    """README names the experiment engine's folder; docs/demo.md and docs/development.md name every
    experiment kind (`resrl.experiments.kinds.KINDS`, by key and class) and docs/demo.md every demo
    task: a kind or task added without its docs, or a list of kinds gone stale, fails here."""
    from resrl.demo.tasks import DEMO_TASKS
    from resrl.experiments.kinds import KINDS

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "`src/resrl/experiments/`" in readme
    demo, development = ((ROOT / "docs" / page).read_text(encoding="utf-8") for page in ("demo.md", "development.md"))
    for key, kind in KINDS.items():
        for page, text in (("docs/demo.md", demo), ("docs/development.md", development)):
            assert f"`{key}`" in text and kind.__name__ in text, f"{page} does not name the kind {key!r}"
    for name, task in DEMO_TASKS.items():
        assert f"`{name}`" in demo or f"--task {name}" in demo, f"docs/demo.md does not name the task {name!r}"
        assert task.experiment in KINDS
