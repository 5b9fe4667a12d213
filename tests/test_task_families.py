"""The task-family registry (resrl.tasks.registry): which family serves a data spec, a reward, an
environment; a family registered from outside is found by the generic loaders and rewards; the
built-in registration imports nothing optional."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from resrl.data.problem import Problem
from resrl.errors import InputError
from resrl.tasks import registry
from resrl.tasks.registry import TaskFamily

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _python(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)


def test_families_serve_their_data_rewards_and_environments(tmp_path, monkeypatch):
    assert [f.name for f in registry.families()][:5] == ["math", "code", "reasoning_gym", "tools", "alfworld"]
    data = {"rg:leg_counting?size=5": "reasoning_gym", "bfcl:simple": "tools", "HumanEval": "code",
            "humanevalplus": "code", "alfworld:valid_seen": "alfworld", "alfworld-synth:games:train": "alfworld"}
    for spec, name in data.items():
        assert registry.family_for_data(spec).name == name, spec
    for spec in ("aime24", "gsm8k", "rows.jsonl", "bfcl", "rgx:y"):
        assert registry.family_for_data(spec) is None, spec
    monkeypatch.chdir(tmp_path)
    (tmp_path / "humaneval").write_text("{}\n")  # a file of that name is a file, not the benchmark
    assert registry.family_for_data("humaneval") is None
    rewards = {"math": "math", "exact": "math", "code": "code", "code-fraction": "code", "rg": "reasoning_gym",
               "tool_call": "tools", "tool_call_exact": "tools", "tool_call[format_weight=0.5]": "tools"}
    for spec, name in rewards.items():
        assert registry.family_for_reward(spec).name == name, spec
    for spec in ("tool_call_x", "math[x=1]", "my_pkg:score", "Math"):
        assert registry.family_for_reward(spec) is None, spec
    from resrl.tasks.rewards import BUILTIN_REWARDS

    assert BUILTIN_REWARDS == ("math", "exact", "code", "code-fraction", "rg", "tool_call", "tool_call_exact")
    assert registry.default_reward() == "math"
    assert registry.family_for_env("bfcl").name == "tools" and registry.family_for_env("alfworld").name == "alfworld"
    assert registry.family_for_env("my_pkg:make") is None and registry.family_for_env(None) is None
    assert registry.env_spec("alfworld").layouts == ("step",) and registry.env_spec("bfcl").layouts == ("concat",)
    assert registry.step_env_names() == ["alfworld", "webshop"]
    assert registry.command_modules() == ["resrl.tasks.code.command", "resrl.tasks.alfworld.command",
                                          "resrl.tasks.webshop.command"]
    from resrl.tasks.envs import STEP_ENVS, step_factory

    assert STEP_ENVS == {"alfworld": "resrl.tasks.alfworld.env:alfworld_step_env",
                         "webshop": "resrl.tasks.webshop.env:webshop_step_env"}
    assert step_factory("alfworld") == STEP_ENVS["alfworld"] and step_factory("m:f") == "m:f"


def test_one_rule_picks_the_reward_of_the_data():
    math = [Problem("m1", "1+1?", "2", "m")]
    code = [Problem("c1", "code", "{}", "c", extra={"task": "code"})]
    assert registry.reward_for_data(["bfcl:simple", "bfcl:multi_turn_base"], {}) == "tool_call_exact"
    assert registry.reward_for_data(["bfcl:simple", "alfworld:valid_seen"], {}) == "tool_call_exact"
    assert registry.reward_for_data(["bfcl:simple", "aime24"], {"a": math}) == "math"
    # reasoning-gym data is scored by its own verifiers (was Math-Verify against the row's metadata)
    assert registry.reward_for_data(["rg:leg_counting"], {"rg:leg_counting": math}) == "rg"
    assert registry.reward_for_data(["rg:leg_counting"]) == "rg"
    assert registry.reward_for_data(["humaneval"]) == "code"
    assert registry.reward_for_data(["humaneval", "my_code.jsonl"], {"HumanEval": code, "my": code}) == "code"
    assert registry.reward_for_data(["my_code.jsonl"], {"my": code}) == "code"  # rows recognised by content
    assert registry.reward_for_data(["gsm8k"]) == registry.reward_for_data([]) == "math"
    with pytest.raises(InputError, match="mixes code and non-code"):
        registry.reward_for_data(["humaneval", "aime24"], {"HumanEval": code, "aime24": math})


def test_train_eval_and_diagnose_follow_the_one_rule(tmp_path):
    """rg: data is scored by the rg reward by default in `resrl train`, `resrl eval` and `resrl
    diagnose`: a correct answer scores 1 in each."""
    pytest.importorskip("reasoning_gym")
    from resrl.diagnose.tasks import load_task
    from resrl.eval.scoring import Scorer
    from resrl.models.tiny import build_char_tokenizer
    from resrl.tasks.reasoning_gym.data import load_rg_problems
    from resrl.train import load_config
    from resrl.train.runner import _load_reward

    spec = "rg:basic_arithmetic"
    problems = load_rg_problems(spec, split="test", limit=2)
    answers = [p.answer for p in problems]
    correct = [f"The result is \\boxed{{{p.extra['reference_answer']}}}." for p in problems]
    # train: reward.function unset
    cfg = load_config(None, [f"data.train={spec}"])
    assert cfg.reward.function is None and cfg.reward_spec() == "rg"
    adapter = _load_reward(cfg, None)
    assert adapter(["p"] * 2, correct, answer=answers) == [1.0, 1.0]
    # eval: the command's default reward, through its scorer
    scorer = Scorer(registry.reward_for_data([spec], {spec: problems}))
    try:
        assert [v.correct for v in scorer(correct, answers)] == [True, True]
    finally:
        scorer.close()
    # diagnose
    task = load_task(spec, build_char_tokenizer(), limit=2)
    try:
        assert task.reward(correct, task.answers) == [1.0, 1.0]
    finally:
        if task.close:
            task.close()
    if getattr(adapter.fn, "close", None):
        adapter.fn.close()


@pytest.fixture
def toy_family(monkeypatch):
    """A family registered from outside the package (the registry is restored afterwards)."""
    registry.families()  # the built-ins first
    monkeypatch.setattr(registry, "_FAMILIES", dict(registry._FAMILIES))
    calls = []

    def load(spec, split="train", limit=None):
        calls.append((spec, split, limit))
        n = int(spec.split(":")[1])
        return [Problem(f"toy-{i}", f"{i}+{i}=", str(2 * i), "toy") for i in range(n)][:limit]

    def reward(spec, **_):
        return lambda completions, answers: [float(c.strip() == a) for c, a in zip(completions, answers)]

    family = registry.register_family(TaskFamily(name="toy", prefixes=("toy:",), load=load,
                                                 report_name=lambda spec: "Toy" + spec[4:], rewards={"toy": reward},
                                                 data_reward="toy"))
    return family, calls


def test_a_family_registered_from_outside_is_found_by_the_generic_code(toy_family):
    from resrl.tasks.data import load_benchmarks, load_problems
    from resrl.tasks.rewards import BUILTIN_REWARDS, load_reward_function

    family, calls = toy_family
    assert registry.family_for_data("toy:3") is family and registry.family_for_reward("toy") is family
    assert [p.id for p in load_problems("toy:3")] == ["toy-0", "toy-1", "toy-2"]
    assert list(load_benchmarks(["toy:2"], limit=1)) == ["Toy2"] and calls[-1] == ("toy:2", "test", 1)
    with pytest.raises(InputError, match="already loaded"):  # report names are unique unless the family says not
        load_benchmarks(["toy:2", "toy:2"])
    assert load_reward_function("toy")(["4 ", "5"], ["4", "4"]) == [1.0, 0.0]
    assert "toy" in BUILTIN_REWARDS
    with pytest.raises(ValueError, match="already registered"):
        registry.register_family(TaskFamily(name="toy"))
    with pytest.raises(ValueError, match="already belong to family 'math'"):
        registry.register_family(TaskFamily(name="toy2", rewards={"math": lambda spec, **_: None}))


def test_registering_the_builtins_imports_nothing_optional_or_heavy():
    out = _python("import sys; from resrl.tasks import registry; registry.families(); registry.command_modules(); "
                  "import resrl.data.loaders, resrl.tasks.rewards, resrl.tasks.envs; "
                  "print(sorted(m for m in ('torch', 'transformers', 'reasoning_gym', 'alfworld', 'textworld', "
                  "'bfcl_eval', 'math_verify', 'datasets') if m in sys.modules))")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


def test_every_deferred_hook_names_a_function_that_exists():
    """A hook given as "module:function" (registry.Deferred: imported when first called, so that
    registering imports nothing heavy) names a callable of a module that imports; a typo fails here,
    not when a user first runs `resrl eval` on that family's data."""
    import importlib
    from dataclasses import fields

    hooks = [(family.name, getattr(family.evaluator, h.name)) for family in registry.families() if family.evaluator
             for h in fields(family.evaluator) if isinstance(getattr(family.evaluator, h.name), registry.Deferred)]
    assert {name for name, _ in hooks} >= {"alfworld", "webshop", "tools"}
    for name, hook in hooks:
        module, _, function = hook.target.partition(":")
        assert callable(getattr(importlib.import_module(module), function, None)), (name, hook.target)
    with pytest.raises(InputError, match="no_such_hook"):  # a name the module lacks is not passed over
        registry.Deferred("resrl.tasks.registry:no_such_hook")()
