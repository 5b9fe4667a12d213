"""Every combination rule (resrl.engines.trl.rules) once from config validation and once from the
trainer's entry, with the message each names; config and trainer describe one run the same way;
and with a rule disabled its case goes through (the tests depend on the rule, not on a copy)."""

from __future__ import annotations

import dataclasses
import re

import pytest
from train_helpers import build_small_model, overrides, toy_dataset

from resrl.engines.trl import rules
from resrl.train import ConfigError, load_config

STEP = ["env.name=resrl.envs.toy:make_toy_env", "env.layout=step", "reward.function=env"]

# rule -> (config overrides, processes, config message), (trainer overrides, step layout?, trainer message)
CASES = {
    "step-level-algorithm": ((["algorithm.name=gigpo"], 1, r"'algorithm.name' is 'gigpo', a step-level algorithm"),
                             (["algorithm.name=gigpo"], False, r"'gigpo' needs step-level rollouts")),
    "step-vllm": ((STEP + ["trl.use_vllm=true"], 1, r"'trl.use_vllm'"),
                  None),  # vLLM cannot start on CPU: test_trainer_facts_reach_the_rules
    "step-head-sketch": ((STEP + ["algorithm.name=nthr"], 1, r"'algorithm.resrl.weighting'.*head's sketch"),
                         (["algorithm.name=nthr"], True, r"'nthr' .* needs the head sketch")),
    "step-aligned": ((STEP + ["engine.resrl_mode=aligned"], 1, r"'engine.resrl_mode': aligned is impossible"),
                     (["engine.resrl_mode=aligned"], True, r"resrl_mode='aligned' is impossible with step-level")),
    "step-dynamic-sampling": ((STEP + ["algorithm.name=dapo"], 1, r"'engine.dynamic_sampling' \(or a dapo"),
                              (["algorithm.name=dapo"], True, r"dynamic sampling is not supported with step-level")),
    "step-whole-games": ((STEP + ["train.rollout_prompts=3", "train.group_size=2"], 2,
                          r"'train.rollout_prompts' \(3\) must be a multiple of the 2 processes"),
                         None),  # needs 2 processes: test_trainer_facts_reach_the_rules
    "aligned-layout": ((["train.rollout_prompts=8", "train.update_prompts=4", "engine.resrl_mode=aligned"], 1,
                        r"'engine.resrl_mode' is 'aligned' but a device micro-batch"),
                       (["train.rollout_prompts=8", "train.update_prompts=4", "engine.resrl_mode=aligned"], False,
                        r"resrl_mode='aligned' needs whole groups per device micro-batch")),
    "dynamic-sampling-groups": ((["algorithm.name=dapo", "train.rollout_prompts=3", "train.group_size=4"], 2,
                                 r"'engine.dynamic_sampling' needs train.rollout_prompts"),
                                None),  # needs 2 processes: test_trainer_facts_reach_the_rules
}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("tiny") / "model")


def config(*extra, out="/tmp/resrl-rules-out"):
    return load_config(None, overrides("unused", out, *extra))


def make_trainer(model_dir, *extra, step: bool = False, rollout_func=None, resrl_mode=None):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from resrl.engines.steps import StepRolloutConfig
    from resrl.engines.trl.trainer import ResRLTrainer
    from resrl.envs.toy import make_toy_env
    from resrl.train.runner import grpo_args

    cfg = load_config(None, overrides(model_dir, "/tmp/resrl-rules-out", *extra))
    return ResRLTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir), args=grpo_args(cfg, 1, True),
        reward_funcs=lambda prompts, completions, **kw: [0.0] * len(completions), train_dataset=toy_dataset(),
        processing_class=AutoTokenizer.from_pretrained(model_dir), algorithm=cfg.algorithm, loss_config=cfg.loss,
        resrl_mode=resrl_mode or cfg.engine.resrl_mode, dynamic_sampling=cfg.engine.dynamic_sampling,
        step_rollout=StepRolloutConfig(make_toy_env) if step else None, rollout_func=rollout_func)


# ---- each rule from config validation ------------------------------------------------------------------

@pytest.mark.parametrize("rule", sorted(CASES))
def test_rule_from_config_validation(rule):
    extra, processes, message = CASES[rule][0]
    cfg = config(*extra)
    assert [p.rule for p in rules.problems(cfg.run_layout(processes))][:1] == [rule]
    with pytest.raises(ConfigError, match=message):
        cfg.validate(num_processes=processes, need_model=False, need_data=False)


def test_rules_a_config_cannot_reach_still_name_config_keys():
    """resrl_mode values are checked by the config schema first; a config never sets a rollout_func."""
    base = config(*STEP).run_layout()
    for changes, rule, key in (({"resrl_mode": "fast"}, "resrl-mode", "engine.resrl_mode"),
                               ({"rollout_func": True}, "step-rollout-func", "env.layout")):
        found = rules.problems(dataclasses.replace(base, **changes))
        assert [p.rule for p in found] == [rule] and key in found[0].config
    with pytest.raises(ConfigError, match="engine.resrl_mode"):
        config("engine.resrl_mode=fast").validate(need_model=False, need_data=False)


# ---- each rule from the trainer's entry ------------------------------------------------------------------

@pytest.mark.parametrize("rule", sorted(r for r, (_, trainer) in CASES.items() if trainer is not None))
def test_rule_from_the_trainer(model_dir, rule):
    extra, step, message = CASES[rule][1]
    with pytest.raises(ValueError, match=message):
        make_trainer(model_dir, *extra, step=step)


@pytest.mark.filterwarnings("ignore:You are using 'rollout_func'")
def test_trainer_only_rules(model_dir):
    with pytest.raises(ValueError, match="resrl_mode must be auto, aligned or extra-pass, got 'fast'"):
        make_trainer(model_dir, resrl_mode="fast")
    with pytest.raises(ValueError, match="step_rollout and rollout_func are exclusive"):
        make_trainer(model_dir, step=True, rollout_func=lambda prompts, trainer: {})


def test_trainer_facts_reach_the_rules(model_dir):
    """The rules that need 2 processes or vLLM, from the layout a built trainer describes."""
    step = make_trainer(model_dir, step=True)
    assert step.resrl_mode == "extra-pass" and rules.problems(step.run_layout()) == []
    step.use_vllm = True
    with pytest.raises(ValueError, match="vLLM generation is not wired into step-level rollouts"):
        rules.check(step.run_layout(), "trainer")
    step.use_vllm = False
    step.args.per_device_train_batch_size, step.args.steps_per_generation = 3, 1   # a process's share: 3 rows
    with pytest.raises(ValueError, match=r"whole games per process: the local generation batch \(3\)"):
        rules.check(step.run_layout(), "trainer")
    dapo = make_trainer(model_dir, "algorithm.name=dapo")
    assert dapo.dynamic_sampling and rules.problems(dapo.run_layout()) == []
    dapo.args.per_device_train_batch_size, dapo.args.steps_per_generation = 3, 2
    with pytest.raises(ValueError, match=r"dynamic sampling needs whole groups per process.*\(6\)"):
        rules.check(dapo.run_layout(), "trainer")


@pytest.mark.parametrize("extra,step", [([], False), (["algorithm.name=dapo"], False),
                                        (["algorithm.name=resrl", "train.update_prompts=2"], False),
                                        (STEP + ["algorithm.name=gigpo"], True)])
def test_config_and_trainer_describe_one_run(model_dir, extra, step):
    cfg = load_config(None, overrides(model_dir, "/tmp/resrl-rules-out", *extra))
    trainer = make_trainer(model_dir, *[e for e in extra if not e.startswith(("env.", "reward."))], step=step)
    layout = trainer.run_layout(cfg.engine.resrl_mode, cfg.engine.dynamic_sampling)
    assert layout == cfg.run_layout(1)
    assert trainer.resrl_mode == rules.resolve_resrl_mode(layout)


# ---- disabling a rule lets its case through ------------------------------------------------------------

@pytest.mark.parametrize("rule", sorted(CASES))
def test_planted_disabled_rule_lets_its_case_through(rule, monkeypatch):
    extra, processes, message = CASES[rule][0]
    monkeypatch.delitem(rules.RULES, rule)
    cfg = config(*extra)
    assert rule not in [p.rule for p in rules.problems(cfg.run_layout(processes))]
    try:
        cfg.validate(num_processes=processes, need_model=False, need_data=False)
    except ConfigError as exc:  # another check may still object, but not with this rule's message
        assert not re.search(message, str(exc)), exc


def test_planted_disabled_rule_lets_the_trainer_through(model_dir, monkeypatch):
    monkeypatch.delitem(rules.RULES, "step-aligned")
    trainer = make_trainer(model_dir, "engine.resrl_mode=aligned", step=True)
    assert trainer.resrl_mode == "extra-pass"  # the step layout's capture, whatever was asked


def test_resolve_resrl_mode():
    base = config().run_layout()
    assert base.aligned_possible and rules.resolve_resrl_mode(base) == "aligned"
    assert rules.resolve_resrl_mode(dataclasses.replace(base, resrl_mode="extra-pass")) == "extra-pass"
    assert rules.resolve_resrl_mode(dataclasses.replace(base, steps_per_generation=2)) == "extra-pass"
    assert rules.resolve_resrl_mode(dataclasses.replace(base, step_layout=True)) == "extra-pass"
