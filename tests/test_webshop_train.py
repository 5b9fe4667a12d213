"""WebShop-format goals through the library: the family in the registry, `resrl train` with
`env.name: webshop` in the step layout for every step-layout algorithm, and `resrl eval` reporting
score and success (scripted episodes scored exactly, files, resume)."""

from __future__ import annotations

import json
import math
import random
import re

import pytest

from resrl.tasks.webshop.data import load_goal_rows

_ACTIONS = re.compile(r"^'((?:search|click)\[.*\])',$", re.MULTILINE)


class AdmissiblePolicy:
    """A StepPolicy that reads the admissible actions of a verl-agent WebShop prompt and answers one
    (seeded; searches use the instruction's product words): rewards vary within a group."""

    def __init__(self, tokenizer, seed: int = 0):
        self.tok, self.rng = tokenizer, random.Random(seed)
        self.eos_token_ids = [int(tokenizer.eos_token_id)]

    def __call__(self, contexts, budgets):
        outs = []
        for ids, budget in zip(contexts, budgets):
            text = self.tok.decode(ids, skip_special_tokens=True)
            actions = _ACTIONS.findall(text) or ["click[nothing]"]
            action = self.rng.choice(actions)
            if action.startswith("search["):
                task = re.search(r"Your task is to: (.*?)\.\n", text).group(1).split(",")[0].split()
                action = f"search[{' '.join(task[-2:])}]"
            answer = f"<think>x</think><action>{action}</action>"
            outs.append(((self.tok(answer, add_special_tokens=False)["input_ids"] + self.eos_token_ids)[:budget], None))
        return outs


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from resrl.models.tiny import TinyModelConfig, build_tiny_model

    path = tmp_path_factory.mktemp("webshop-model")
    build_tiny_model(path, TinyModelConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                           num_key_value_heads=1, head_dim=16, intermediate_size=64,
                                           max_position_embeddings=4096))
    return str(path)


def test_the_family_is_found_by_the_generic_code():
    from resrl.tasks.envs import STEP_ENVS, step_games
    from resrl.tasks.registry import env_spec, family_for_data, family_for_env

    assert family_for_data("webshop-small:test").name == "webshop"
    assert family_for_data("webshop:/some/dir:train").name == "webshop" and family_for_env("webshop").name == "webshop"
    spec = env_spec("webshop")
    assert spec.layouts == ("step",) and spec.ends_at_max_steps and STEP_ENVS["webshop"] == spec.step_factory
    rows = step_games("webshop-small:test", limit=2)
    assert [json.loads(r["prompt"])["id"] for r in rows] == [r["answer"] for r in rows]


@pytest.mark.parametrize("algorithm", ["grpo", "gigpo", "empg", "resrl"])
def test_two_step_training_on_webshop_goals(algorithm, model_dir, tmp_path, monkeypatch):
    from resrl import cli
    from resrl.engines import multiturn

    rounds = []

    def scripted(model, tokenizer, **kwargs):  # the random tiny model writes no action: a policy stands in
        rounds.append(AdmissiblePolicy(tokenizer, seed=len(rounds)))
        return rounds[-1]

    monkeypatch.setattr(multiturn, "HFStepPolicy", scripted)
    out = tmp_path / algorithm
    rc = cli.main(["train", "--config", "configs/qwen_webshop_resrl.yaml", f"model.path={model_dir}",
                   "model.dtype=float32", "model.gradient_checkpointing=false", "data.train=webshop-small:train",
                   f"train.output_dir={out}", "train.max_steps=2", "train.rollout_prompts=2", "train.group_size=2",
                   "train.micro_batch_size=null", "train.update_prompts=null", "train.bf16=false", "train.use_cpu=true",
                   "train.max_prompt_length=4000", "env.max_steps=4", "env.max_step_tokens=64", "env.num_workers=1",
                   "loss.kl_coef=0.0", f"algorithm.name={algorithm}", "log.progress=false", "log.report_to=[none]"])
    assert rc == 0
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(metrics) == 2 and all(math.isfinite(m["loss"]) for m in metrics)
    assert all(m["step_rows"] > 4 for m in metrics) and len(rounds) == 2
    assert any(m["episode/invalid_action_rate"] < 1.0 for m in metrics)  # the policy's actions were acted on


class _Scripted:
    """A StepPolicy answering, at its t-th call, reply t of each episode still running."""

    def __init__(self, tokenizer, scripts):
        self.tok, self.scripts, self.t = tokenizer, scripts, 0
        self.eos_token_ids = [tokenizer.eos_token_id]

    def __call__(self, contexts, budgets):
        running = [s for s in self.scripts if len(s) > self.t]
        assert len(running) == len(contexts)
        out = [(self.tok(s[self.t], add_special_tokens=False)["input_ids"] + self.eos_token_ids, None) for s in running]
        self.t += 1
        return out


def test_scripted_episodes_score_exactly(model_dir, tmp_path):
    """Scripted episodes through the one step-episode evaluator with WebShop's scorer: the expert wins
    (score 1), a wasted step costs an invalid action, buying the first result scores what the reference
    play of the same actions scores; the table's Score column is that score."""
    from transformers import AutoTokenizer

    from resrl.eval.steps import StepScorer, evaluate_episodes, results_table
    from resrl.tasks.envs import step_games
    from resrl.tasks.webshop.env import WebShopSpec
    from resrl.tasks.webshop.evaluate import SCORER, play
    from resrl.tasks.webshop.policies import expert_action

    tok = AutoTokenizer.from_pretrained(model_dir)
    rows = load_goal_rows("webshop-small:test", limit=3)
    games = step_games("webshop-small:test", limit=3)  # the same goals as the environment's rows
    spec = WebShopSpec(max_steps=8)
    walk = []
    for row in rows[:2]:  # the expert's replies, recorded by playing it
        env = spec.build()
        env.reset(row)
        replies = []
        while True:
            replies.append(expert_action(env))
            if env.step(replies[-1]).done:
                break
        walk.append(replies)
    # episode 0: the expert; 1: one wasted step, then the expert; 2: searches, buys the first result
    env = spec.build()
    env.reset(rows[2])
    env.step(f"<think>x</think><action>search[{env.goal.query}]</action>")
    asin = env.site.page_products()[0].asin.lower()
    scripts = [walk[0], ["<think>x</think><action>dance</action>"] + walk[1],
               [f"<think>x</think><action>search[{env.goal.query}]</action>",
                f"<think>x</think><action>click[{asin}]</action>", "<think>x</think><action>click[buy now]</action>"]]
    expected3 = play([rows[2]], lambda e, it=iter(scripts[2]): next(it), spec)[0]["score"]
    policy = _Scripted(tok, scripts)
    scorer = StepScorer(**SCORER)
    summary = evaluate_episodes(None, tok, {"webshop-small_test": games}, "webshop", {"history_window": 2}, tmp_path,
                                max_steps=8, max_step_tokens=400, policy=policy, model_name="GRPO", scorer=scorer)
    recs = [json.loads(line) for line in (tmp_path / "webshop_episodes.jsonl").read_text().splitlines()]
    assert [r["won"] for r in recs] == [True, True, False] and [r["info"]["score"] for r in recs[:2]] == [1.0, 1.0]
    assert recs[2]["info"]["score"] == expected3 and 0 < expected3 < 1
    assert recs[1]["invalid_actions"] == 1 and recs[1]["steps"] == len(walk[1]) + 1 and recs[1]["actions"][0] == "dance"
    m = summary["datasets"]["webshop-small_test"]
    assert m["success"] == pytest.approx(2 / 3) and m["score"] == pytest.approx((2 + expected3) / 3)
    line = results_table({"GRPO": {"webshop-small_test": m}}, scorer).splitlines()[2]
    assert line.startswith(f"| GRPO | webshop-small_test | {100 * m['score']:.1f} | 66.7 ± ")


@pytest.mark.slow
def test_cli_eval_writes_score_and_success_and_resumes(model_dir, tmp_path, capsys):
    from resrl.cli import main

    out = tmp_path / "eval"
    base = ["eval", "--model", model_dir, "--data", "webshop-small:test", "--limit", "2", "--webshop-max-steps", "2",
            "--max-new-tokens", "8", "--out", str(out), "--no-progress", "--temperature", "0"]
    assert main(base) == 0
    printed = capsys.readouterr().out
    assert "| Method | Data | Score | Success (Avg@1) ± s.e. |" in printed and "webshop-small_test: 2 episodes" in printed
    summary = json.loads((out / "webshop_summary.json").read_text())
    m = summary["datasets"]["webshop-small_test"]
    assert m["episodes"] == 2 and m["score"] == 0.0 and m["success"] == 0.0 and m["steps"] == 2
    assert main(base) == 0  # resume: nothing new
    assert json.loads((out / "webshop_summary.json").read_text())["throughput"]["new_episodes"] == 0
    capsys.readouterr()
    assert main([a if a != "2" else "3" for a in base]) == 2  # other settings: refused with one line
    assert "different settings" in capsys.readouterr().err


def test_the_package_names_its_public_api_lazily_in_a_fresh_process():
    import subprocess
    import sys

    code = ("import sys; import resrl.tasks.webshop as w; assert 'resrl.tasks.webshop.env' not in sys.modules; "
            "from resrl.tasks.webshop import WebShopSpec, load_goal_rows, webshop_reward, expert_action, play; "
            "assert not hasattr(w, 'nope'); print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-1500:]
