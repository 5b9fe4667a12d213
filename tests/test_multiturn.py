"""Multi-turn rollouts: exact token masks with a scripted environment and a scripted policy, limits,
token advantages that leave environment tokens out, and BFCL multi-turn environments."""

import importlib.util
import os
from types import SimpleNamespace

import pytest
import torch

from resrl.core.registry import AdvantageInputs, AlgorithmConfig, compute_token_advantages
from resrl.core.resrl_config import ResRLConfig
from resrl.engines.multiturn import (ChatRenderer, make_trl_rollout_func, rollout_multi_turn,
                                     rollout_stats, trajectories_to_batch)
from resrl.envs.base import Environment, StepResult
from resrl.models.tiny import build_char_tokenizer

HAVE_BFCL = importlib.util.find_spec("bfcl_eval") is not None
needs_bfcl = pytest.mark.skipif(not HAVE_BFCL and not os.environ.get("CI"),
                                reason="bfcl-eval is not installed (CI requires it)")


class CountingEnv(Environment):
    """Answers "call" with a tool message "ok"; "stop" ends with reward 1 iff there were `want` calls."""

    def __init__(self, want: int = 2) -> None:
        self.want = want

    def reset(self, prompt=None):
        self.calls = 0
        return [{"role": "user", "content": str(prompt)}]

    def step(self, model_text):
        if model_text == "call":
            self.calls += 1
            return StepResult([{"role": "tool", "content": "ok"}], 0.0, False)
        return StepResult([], 1.0 if (model_text == "stop" and self.calls == self.want) else 0.0, True)


class ScriptedPolicy:
    """Row r of the batch says script[r][k] at its k-th step (matched by context prefix)."""

    def __init__(self, tokenizer, scripts, prompts_ids):
        self.tok, self.scripts, self.prompts = tokenizer, scripts, prompts_ids
        self.step_of = [0] * len(scripts)
        self.eos = tokenizer.eos_token_id

    def encode(self, text):
        return self.tok(text, add_special_tokens=False)["input_ids"]

    def __call__(self, contexts, max_new_tokens):
        outs = []
        for ctx, budget in zip(contexts, max_new_tokens):
            r = next(i for i, p in enumerate(self.prompts) if list(ctx[: len(p)]) == p
                     and self.step_of[i] < len(self.scripts[i]))
            text = self.scripts[r][self.step_of[r]]
            self.step_of[r] += 1
            ids = self.encode(text) + [self.eos]
            outs.append((ids[:budget], [-0.5] * min(budget, len(ids))))
        return outs


@pytest.fixture(scope="module")
def tok():
    return build_char_tokenizer()


def test_observation_ids_are_the_template_suffix(tok):
    renderer = ChatRenderer(tok)
    ids = renderer.observation_ids([{"role": "tool", "content": "ok"}])
    assert tok.decode(ids) == "\n<|im_start|>tool\nok<|im_end|>\n<|im_start|>assistant\n"
    plain = ChatRenderer(tok, use_chat_template=False)
    assert tok.decode(plain.observation_ids([{"role": "tool", "content": "ok"}])) == "\n[tool] ok\n"


def test_scripted_rollout_gives_exact_masks_and_rewards(tok):
    renderer = ChatRenderer(tok)
    prompts = ["p0", "p1"]
    prompt_ids = [renderer.prompt_ids([{"role": "user", "content": p}]) for p in prompts]
    scripts = [["call", "call", "stop"], ["stop"]]
    policy = ScriptedPolicy(tok, scripts, prompt_ids)
    trajs = rollout_multi_turn([CountingEnv(), CountingEnv()], prompts, policy, renderer,
                               eos_token_ids=[tok.eos_token_id], max_turns=8, max_total_tokens=500, max_step_tokens=50)
    enc = policy.encode
    eos = [tok.eos_token_id]
    obs = renderer.observation_ids([{"role": "tool", "content": "ok"}])
    call, stop = enc("call") + eos, enc("stop") + eos
    assert trajs[0].prompt_ids == prompt_ids[0]
    assert trajs[0].completion_ids == call + obs + call + obs + stop
    assert trajs[0].env_mask == [1] * len(call) + [0] * len(obs) + [1] * len(call) + [0] * len(obs) + [1] * len(stop)
    assert trajs[0].logprobs == [-0.5] * len(call) + [0.0] * len(obs) + [-0.5] * len(call) + [0.0] * len(obs) + [-0.5] * len(stop)
    assert trajs[1].completion_ids == stop and trajs[1].env_mask == [1] * len(stop)
    assert [t.reward for t in trajs] == [1.0, 0.0]
    assert [t.texts for t in trajs] == scripts and all(t.done and t.truncation is None for t in trajs)

    batch = trajectories_to_batch(trajs, tok.pad_token_id)
    C = len(trajs[0].completion_ids)
    assert batch["completion_ids"].shape == (2, C)
    assert batch["completion_mask"][1].tolist() == [1] * len(stop) + [0] * (C - len(stop))
    assert batch["tool_mask"][0].tolist() == trajs[0].env_mask
    assert batch["tool_mask"][1].tolist() == [1] * C  # padding: 1, as TRL pads it
    loss_mask = batch["completion_mask"] * batch["tool_mask"]
    assert loss_mask.sum().item() == 2 * len(call) + 2 * len(stop)
    P = batch["prompt_ids"].shape[1]
    assert batch["prompt_mask"][0].sum().item() == len(prompt_ids[0]) and batch["prompt_ids"].shape == (2, P)
    assert rollout_stats(trajs)["env_tokens_mean"] == len(obs)


def test_limits_truncate_and_are_reported(tok):
    renderer = ChatRenderer(tok)
    pid = renderer.prompt_ids([{"role": "user", "content": "p"}])
    run = lambda scripts, **kw: rollout_multi_turn(  # noqa: E731
        [CountingEnv()], ["p"], ScriptedPolicy(tok, scripts, [pid]), renderer, eos_token_ids=[tok.eos_token_id], **kw)
    t = run([["call"] * 10], max_turns=3, max_total_tokens=1000, max_step_tokens=50)[0]
    assert t.truncation == "turn_limit" and t.num_model_turns == 3 and t.reward == 0.0 and not t.done
    assert t.env_mask[-1] == 1  # ends on the model's EOS: no dangling environment tokens
    t = run([["call"] * 10], max_turns=50, max_total_tokens=40, max_step_tokens=50)[0]
    assert t.truncation == "token_limit" and len(t.completion_ids) <= 40
    t = run([["a very long answer"]], max_turns=5, max_total_tokens=1000, max_step_tokens=6)[0]
    assert t.truncation == "step_token_limit" and len(t.completion_ids) == 6 and t.texts == ["a very"]
    stats = rollout_stats([t])
    assert stats["truncated_step_token_limit_frac"] == 1.0 and stats["done_frac"] == 0.0


def _layout_batch(tok):
    """Two groups of 2 scripted trajectories (rewards 1/0 in each)."""
    renderer = ChatRenderer(tok)
    prompts = ["a", "a", "b", "b"]
    pids = [renderer.prompt_ids([{"role": "user", "content": p}]) for p in prompts]
    scripts = [["call", "call", "stop"], ["call", "stop"], ["call", "call", "stop"], ["stop"]]

    class Policy(ScriptedPolicy):  # rows share prompts: route by the row's position in the batch
        def __call__(self, contexts, max_new_tokens):
            outs = []
            rows = [i for i in range(len(self.scripts)) if self.step_of[i] < len(self.scripts[i])]
            for i, budget in zip(rows, max_new_tokens):
                ids = self.encode(self.scripts[i][self.step_of[i]]) + [self.eos]
                self.step_of[i] += 1
                outs.append((ids[:budget], None))
            return outs

    trajs = rollout_multi_turn([CountingEnv() for _ in prompts], prompts, Policy(tok, scripts, pids), renderer,
                               eos_token_ids=[tok.eos_token_id], max_turns=8, max_total_tokens=500, max_step_tokens=50)
    assert [t.reward for t in trajs] == [1.0, 0.0, 1.0, 0.0]
    return trajs, trajectories_to_batch(trajs, tok.pad_token_id)


@pytest.mark.parametrize("algorithm", ["grpo", "resrl"])
def test_environment_tokens_get_zero_advantage_and_no_resrl_weight(tok, algorithm):
    trajs, batch = _layout_batch(tok)
    mask = batch["completion_mask"] * batch["tool_mask"]  # what ResRLTrainer._loss_mask gives the core
    B, C = mask.shape
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(B, C, 8, generator=g, dtype=torch.float64).float()
    config = AlgorithmConfig(name=algorithm, resrl=ResRLConfig(rank=2, max_pos_tokens=64, boundary_tokens=2))
    group = torch.tensor([0, 0, 1, 1])
    adv, _ = compute_token_advantages(AdvantageInputs(batch["rewards"], group, mask, hidden), config)
    env = (batch["completion_mask"] == 1) & (batch["tool_mask"] == 0)
    assert env.any() and (adv[env] == 0).all()
    assert (adv[mask == 0] == 0).all()
    if algorithm == "grpo":  # one constant per response over its model tokens: +/- 1/sqrt(2) * ...
        for b, sign in zip(range(B), [1, -1, 1, -1]):
            vals = adv[b][mask[b] == 1]
            assert torch.allclose(vals, vals[0].expand_as(vals)) and torch.sign(vals[0]).item() == sign
    # the environment's hidden states do not matter: scramble them, same advantages
    scrambled = hidden.clone()
    scrambled[env] = 100 * torch.randn(int(env.sum()), 8, generator=g)
    adv2, _ = compute_token_advantages(AdvantageInputs(batch["rewards"], group, mask, scrambled), config)
    assert torch.equal(adv, adv2)
    # and the model tokens get exactly what a batch holding only the model tokens gets
    compact_len = int(mask.sum(1).max())
    cm = torch.zeros(B, compact_len, dtype=mask.dtype)
    ch = torch.zeros(B, compact_len, 8)
    for b in range(B):
        n = int(mask[b].sum())
        cm[b, :n] = 1
        ch[b, :n] = hidden[b][mask[b] == 1]
    adv3, _ = compute_token_advantages(AdvantageInputs(batch["rewards"], group, cm, ch), config)
    for b in range(B):
        assert torch.allclose(adv[b][mask[b] == 1], adv3[b][cm[b] == 1], atol=1e-6)
    if algorithm == "resrl":  # negatives are actually reweighted (not all equal)
        neg = adv[1][mask[1] == 1]
        assert neg.min() < neg.max()


@needs_bfcl
@pytest.mark.parametrize("category", ["multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param",
                                      "multi_turn_long_context"])
def test_bfcl_multi_turn_ground_truth_scores_100_percent(category):
    from resrl.tasks.tools.bfcl_env import bfcl_multi_turn_envs, parse_ground_truth_turn
    from resrl.tasks.tools.parsing import format_calls

    envs = bfcl_multi_turn_envs(category)
    assert len(envs) == 200
    for env in envs:
        first = env.reset()
        assert first[0]["role"] == "system" and "<tools>" in first[0]["content"]
        for turn in env.ground_truth:
            if turn:
                step = env.step(format_calls(parse_ground_truth_turn(turn), "python"))
                assert not step.done and step.observation and step.observation[0]["role"] == "tool"
            step = env.step("Done.")
        assert step.done and step.reward == 1.0, (env.entry["id"], step.info)


@needs_bfcl
def test_bfcl_multi_turn_wrong_calls_fail_with_reasons():
    from resrl.tasks.tools.bfcl_env import bfcl_multi_turn_envs

    env = bfcl_multi_turn_envs("base", limit=1)[0]  # turn 0: cd, mkdir, mv in the file system
    env.reset()
    step = env.step("[cd(folder='document')]")  # only part of turn 0
    assert "Error" not in step.observation[0]["content"]
    step = env.step("[kill(pid=1), no_such_tool(x=1)]")
    assert [m["content"] for m in step.observation] == [
        "Error during execution: Function call kill is not allowed.",
        "Error during execution: name 'no_such_tool' is not defined"]
    for _ in env.ground_truth:
        step = env.step("I am done.")
        if step.done:
            break
    assert step.done and step.reward == 0.0 and step.info["error_type"] == "multi_turn:instance_state_mismatch"
    # a turn with too many call steps force-terminates
    env.reset()
    for _ in range(21):
        step = env.step("[pwd()]")
    assert step.done and step.reward == 0.0 and step.info["error_type"] == "multi_turn:force_terminated"


def test_tiny_model_rollout_through_trl_rollout_func():
    """Plumbing: a random tiny model talks to environments through the TRL rollout_func (G = 2)."""
    from resrl.models.tiny import build_tiny_model

    model, tokenizer = build_tiny_model()
    model.eval()
    prompts = ["entry 0", "entry 0", "entry 1", "entry 1"]
    trainer = SimpleNamespace(model=model, processing_class=tokenizer,
                              accelerator=SimpleNamespace(unwrap_model=lambda m: m),
                              args=SimpleNamespace(temperature=1.0, top_p=1.0, max_completion_length=60))
    torch.manual_seed(0)
    out = make_trl_rollout_func(lambda p: CountingEnv(), max_turns=3, max_step_tokens=8)(prompts, trainer)
    assert set(out) >= {"prompt_ids", "completion_ids", "logprobs", "env_mask", "env_reward", "truncation"}
    assert len(out["prompt_ids"]) == len(prompts) == len(out["env_mask"]) == len(out["env_reward"])
    for ids, m, trunc in zip(out["completion_ids"], out["env_mask"], out["truncation"]):
        assert len(ids) == len(m) and m[0] == 1 and len(ids) <= 60
        assert trunc in ("turn_limit", "step_token_limit", "token_limit", None)
    assert all(r == 0.0 for r in out["env_reward"])  # a random model never says exactly "call", "call", "stop"


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["grpo", "resrl"])
def test_short_multi_turn_training_run(tmp_path, monkeypatch, algorithm):
    """Plumbing, no learning claim: ResRLTrainer trains 2 steps on multi-turn rollouts (TRL's
    rollout_func); the loss sees tool_mask and every environment token has zero advantage."""
    from datasets import Dataset
    from train_helpers import build_small_model, overrides

    from resrl.engines.trl import trainer as trl_engine
    from resrl.train import load_config
    from resrl.train.runner import grpo_args
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir = build_small_model(tmp_path / "model")
    cfg = load_config(None, overrides(model_dir, tmp_path / "out", f"algorithm.name={algorithm}",
                                      "train.max_completion_length=48"))
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    seen = []
    real, real_get_policy_loss = trl_engine.ResRLTrainer._compute_loss, trl_engine.get_policy_loss

    def spy(self, model, inputs):
        seen.append({k: inputs[k].detach().clone() for k in ("tool_mask", "completion_mask")})
        return real(self, model, inputs)

    def get_policy_loss_spy(name):  # the trainer looks its loss up once, in __init__
        loss_fn = real_get_policy_loss(name)

        def policy_loss_spy(loss_inputs, config):  # the advantages and mask the loss uses
            seen[-1]["advantages"] = loss_inputs.advantages.detach().clone()
            seen[-1]["loss_mask"] = loss_inputs.response_mask.detach().clone()
            return loss_fn(loss_inputs, config)
        return policy_loss_spy

    monkeypatch.setattr(trl_engine.ResRLTrainer, "_compute_loss", spy)
    monkeypatch.setattr(trl_engine, "get_policy_loss", get_policy_loss_spy)
    # a random tiny model almost never samples EOS: end every message after <= 4 sampled tokens so
    # that conversations have several steps (the policy's tokens are still the model's samples)
    from resrl.engines import multiturn
    real_policy = multiturn.HFStepPolicy.__call__

    def short_messages(self, contexts, max_new_tokens):
        outs = real_policy(self, contexts, [min(4, m) for m in max_new_tokens])
        return [((ids if ids and ids[-1] in self.eos_token_ids else ids + [self.eos_token_ids[0]]), None)
                for ids, _ in outs]

    monkeypatch.setattr(multiturn.HFStepPolicy, "__call__", short_messages)

    def env_reward(prompts, completions, env_reward, **kwargs):  # the environment owns the reward
        return list(env_reward)

    class CallOnce(CountingEnv):  # reward for any two-step conversation: varied outcomes at random
        def step(self, model_text):
            if self.calls == 0:
                self.calls += 1
                return StepResult([{"role": "tool", "content": "ok"}], 0.0, False)
            return StepResult([], float(len(model_text) % 2), True)

    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": f"task {i}"}]} for i in range(8)])
    trainer = trl_engine.ResRLTrainer(
        model=model, reward_funcs=[env_reward], args=grpo_args(cfg, 1, True), train_dataset=dataset,
        processing_class=tokenizer, algorithm=cfg.algorithm, loss_config=cfg.loss,
        rollout_func=make_trl_rollout_func(lambda p: CallOnce(), max_turns=3, max_step_tokens=6))
    trainer.train()
    assert trainer.state.global_step == 2 and seen
    env_tokens = 0
    for batch in seen:
        env = (batch["completion_mask"] == 1) & (batch["tool_mask"] == 0)
        env_tokens += int(env.sum())
        assert (batch["advantages"][env] == 0).all() and (batch["loss_mask"][env] == 0).all()
        model_tokens = batch["loss_mask"] == 1
        assert batch["advantages"][model_tokens].abs().sum() > 0  # the model's tokens are trained
    assert env_tokens > 0


@needs_bfcl
def test_multi_turn_scoring_agrees_with_bfcl_checker():
    """score_multi_turn against bfcl-eval's own multi_turn_checker on perturbed call sequences."""
    import copy
    import random

    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    from resrl.tasks.tools.bfcl_data import MULTI_TURN
    from resrl.tasks.tools.bfcl_env import bfcl_multi_turn_envs, parse_ground_truth_turn, score_multi_turn

    def as_text(c):  # a parsed call back to BFCL's executable string
        args = [repr(v) for v in c.get("positional", [])] + [f"{k}={v!r}" for k, v in c["arguments"].items()]
        return f"{c['name']}({', '.join(args)})"

    rng = random.Random(0)
    compared, disagree, verdicts = 0, [], {True: 0, False: 0}
    for category in MULTI_TURN:
        for env in rng.sample(bfcl_multi_turn_envs(category), 6):
            truth = [parse_ground_truth_turn(t) for t in env.ground_truth]
            busy = [i for i, t in enumerate(truth) if t]
            variants = {"exact": truth}
            t_i = rng.choice(busy)
            v = copy.deepcopy(truth); v[t_i] = v[t_i][:-1]; variants["dropped_call"] = v
            v = copy.deepcopy(truth); v[t_i] = []; variants["empty_turn"] = v
            v = copy.deepcopy(truth); v[t_i] = v[t_i] + v[t_i][-1:]; variants["repeated_call"] = v
            v = copy.deepcopy(truth); v[t_i] = v[t_i][::-1]; variants["reversed_turn"] = v
            v = copy.deepcopy(truth)
            strings = [(c, k) for c in v[t_i] for k, x in c["arguments"].items() if isinstance(x, str)]
            if strings:
                c, k = rng.choice(strings); c["arguments"][k] += "_x"; variants["changed_argument"] = v
            for kind, turns in variants.items():
                model_strings = [[[as_text(c) for c in calls]] if calls else [] for calls in turns]
                theirs = multi_turn_checker(model_strings, env.ground_truth, copy.deepcopy(env.entry),
                                            category, f"cmp{compared}")["valid"]
                ours = score_multi_turn(env.entry, [[calls] if calls else [] for calls in turns],
                                        env.ground_truth)["valid"]
                compared += 1
                verdicts[ours] += 1
                if ours != theirs:
                    disagree.append((env.entry["id"], kind, ours, theirs))
    assert compared >= 120 and not disagree, disagree[:5]
    assert verdicts[True] >= 24 and verdicts[False] >= 40, verdicts


@needs_bfcl
def test_stateless_math_calls_are_isolated_and_time_limited():
    import time

    from resrl.tasks.tools.bfcl_env import BFCLExecutor, load_bfcl_entries

    entry = next(e for e, _ in load_bfcl_entries("base") if "MathAPI" in e["involved_classes"])
    ex = BFCLExecutor(entry, call_timeout_s=2.0)
    assert ex.call({"name": "add", "arguments": {"a": 2, "b": 3}}) == '{"result": 5}'
    assert ex.call({"name": "power", "arguments": {"base": 2, "exponent": 10}}) == '{"result": 1024}'
    start = time.perf_counter()
    out = ex.call({"name": "power", "arguments": {"base": 10, "exponent": 10 ** 10}})  # would never finish
    assert time.perf_counter() - start < 10 and out.startswith("Error during execution") and "longer than" in out
    assert ex.call({"name": "add", "arguments": {"a": 1, "b": 1}}) == '{"result": 2}'  # a fresh worker serves
