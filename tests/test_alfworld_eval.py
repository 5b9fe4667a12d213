"""ALFWorld evaluation: the one step-episode evaluator (resrl.eval.steps) with the family's scorer (success
per task type, the table's columns; hand-made records), episodes with scripted policies, and `resrl eval
--data alfworld-synth:...` on a tiny model (files, resume)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from resrl.eval.steps import StepScorer, results_table, step_metrics
from resrl.tasks.alfworld.evaluate import SCORER, task_type_success

SCORE = StepScorer(**SCORER)


def _rec(kind, won, steps=10, invalid=0, fmt=0, game="g"):
    return {"game": f"{game}-{kind}", "problem_id": f"{game}-{kind}", "task_type": kind, "won": won, "steps": steps,
            "invalid_actions": invalid, "invalid_formats": fmt, "reward": float(won)}


def test_metrics_and_table_by_hand():
    recs = [_rec("pick", True, 4), _rec("pick", False, 50, 10, 5, game="h"), _rec("heat", True, 6, 1),
            _rec("cool", False, 50, 50, 50)]
    m = {**step_metrics(recs), **task_type_success(recs)}
    assert m["success"] == 0.5 and m["episodes"] == 4 and m["games"] == 4
    assert m["per_task_type"]["pick"] == {"episodes": 2, "success": 0.5}
    assert m["per_task_type"]["heat"]["success"] == 1.0 and m["per_task_type"]["look"]["success"] is None
    assert m["steps"] == pytest.approx(110 / 4)
    assert m["invalid_action_rate"] == pytest.approx(61 / 110) and m["invalid_format_rate"] == pytest.approx(55 / 110)
    table = results_table({"GRPO": {"alfworld_valid_unseen": m}, "ReAct": {"alfworld-synth_valid_seen": m}}, SCORE)
    lines = table.splitlines()
    assert lines[0].split("|")[3:10] == [" Pick ", " Look ", " Clean ", " Heat ", " Cool ", " Pick2 ",
                                         " Success (Avg@1) ± s.e. "]
    assert lines[2].startswith("| GRPO | unseen | 50.0 | – | – | 100.0 | 0.0 | – | 50.0 ± 28.9 | 50.0 | 0.500 | 27.5 | "
                               "50.0 | 55.5 |")
    assert "| ReAct | seen (alfworld-synth) |" in lines[3]


class _Scripted:
    """A StepPolicy answering, at its t-th call, action t of each episode still running (episodes
    run in lockstep and each walkthrough wins at its last step, so the running ones are those with
    more than t actions)."""

    def __init__(self, tokenizer, scripts):
        self.tok, self.scripts, self.t = tokenizer, scripts, 0
        self.eos_token_ids = [tokenizer.eos_token_id]

    def __call__(self, contexts, budgets):
        running = [s for s in self.scripts if len(s) > self.t]
        assert len(running) == len(contexts)
        out = []
        for script in running:
            text = script[self.t] if script[self.t].startswith("<") else f"<think>plan</think><action>{script[self.t]}</action>"
            out.append((self.tok(text, add_special_tokens=False)["input_ids"] + self.eos_token_ids, None))
        self.t += 1
        return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from resrl.models.tiny import build_tiny_model

    path = tmp_path_factory.mktemp("tiny-alfworld")
    model, tok = build_tiny_model(path)
    return path, model, tok


def test_scripted_episodes_score_exactly(alfworld_engine, alfworld_synth, tiny, tmp_path):
    """Scripted episodes through the evaluator (environments in EnvPool workers, as training plays):
    a walkthrough wins, a wasted step costs one invalid action, looking until the step limit loses."""
    from resrl.eval.steps import evaluate_episodes
    from resrl.tasks.envs import step_games

    _, _, tok = tiny
    spec = f"alfworld-synth:{alfworld_synth}:train"
    rows = step_games(spec)[:3]
    walks = [json.loads(Path(json.loads(r["prompt"])["game_file"]).read_text())["walkthrough"] for r in rows]
    # episode 0 plays its walkthrough; 1 wastes a step on a non-command first; 2 only looks
    max_steps = max(len(walks[0]), len(walks[1]) + 1, 3)
    scripts = [walks[0], ["<think>x</think><action>dance</action>"] + walks[1], ["look"] * max_steps]
    policy = _Scripted(tok, scripts)
    summary = evaluate_episodes(None, tok, {"train": rows}, "alfworld", {"history_window": 2}, tmp_path,
                                max_steps=max_steps, max_step_tokens=400, policy=policy, model_name="scripted",
                                scorer=SCORE)
    recs = [json.loads(line) for line in (tmp_path / "alfworld_episodes.jsonl").read_text().splitlines()]
    assert [r["won"] for r in recs] == [True, True, False]
    assert recs[0]["steps"] == len(walks[0]) and recs[0]["invalid_actions"] == 0
    assert recs[1]["steps"] == len(walks[1]) + 1 and recs[1]["invalid_actions"] == 1 and recs[1]["actions"][0] == "dance"
    assert recs[2]["steps"] == max_steps and recs[2]["invalid_actions"] == 0 and recs[2]["end"] == "max_steps"
    assert len(recs[1]["texts"]) == recs[1]["steps"] and recs[0]["task_type"] == json.loads(rows[0]["prompt"])["task_type"]
    assert all(r["invalid_formats"] == 0 and r["truncated_generations"] == 0 for r in recs)
    m = summary["datasets"]["train"]
    assert m["success"] == pytest.approx(2 / 3)
    assert m["invalid_action_rate"] == pytest.approx(1 / sum(r["steps"] for r in recs))
    assert sum(t["episodes"] for t in m["per_task_type"].values()) == 3


def _cli(*args):
    from resrl.cli import main

    return main(list(args))


@pytest.mark.slow
def test_cli_eval_writes_reports_and_resumes(alfworld_engine, alfworld_synth, tiny, tmp_path, capsys):
    model_dir, _, _ = tiny
    out = tmp_path / "eval"
    data = [f"alfworld-synth:{alfworld_synth}:unseen", f"alfworld-synth:{alfworld_synth}:seen"]
    base = ["eval", "--model", str(model_dir), "--data", *data, "--max-steps", "2", "--max-new-tokens", "12",
            "--out", str(out), "--no-progress", "--prompt-style", "react", "--temperature", "0"]
    assert _cli(*base) == 0
    printed = capsys.readouterr().out
    assert "| Method | Data | Pick |" in printed and "(ReAct prompt)" in printed
    episodes = (out / "alfworld_episodes.jsonl").read_text().splitlines()
    assert len(episodes) == 2
    first = json.loads(episodes[0])
    assert first["steps"] == 2 and len(first["texts"]) == 2 and len(first["actions"]) == 2
    summary = json.loads((out / "alfworld_summary.json").read_text())
    assert set(summary["datasets"]) == {"alfworld-synth_valid_unseen", "alfworld-synth_valid_seen"}
    assert summary["throughput"]["new_episodes"] == 2
    assert "unseen (alfworld-synth)" in (out / "alfworld_results.md").read_text()
    # resume: nothing new; a torn / lost line is redone
    assert _cli(*base) == 0
    assert json.loads((out / "alfworld_summary.json").read_text())["throughput"]["new_episodes"] == 0
    (out / "alfworld_episodes.jsonl").write_text(episodes[0] + "\n" + episodes[1][:40])
    assert _cli(*base) == 0
    again = json.loads((out / "alfworld_summary.json").read_text())
    assert again["throughput"]["new_episodes"] == 1 and len((out / "alfworld_episodes.jsonl").read_text().splitlines()) == 2
    assert again["datasets"]["alfworld-synth_valid_unseen"]["episodes"] == 1
    # other settings in the same directory: refused with one line
    capsys.readouterr()
    assert _cli(*[a if a != "2" else "3" for a in base]) == 2
    assert "different settings" in capsys.readouterr().err


def test_concatenated_multi_turn_rollout(alfworld_engine, alfworld_synth, tiny):
    """AlfWorldEnv in the existing concatenated layout (resrl.engines.multiturn.rollout_multi_turn)."""
    from resrl.tasks.alfworld.data import load_alfworld_tasks
    from resrl.engines.multiturn import ChatRenderer, rollout_multi_turn
    from resrl.tasks.alfworld import AlfWorldSpec, alfworld_env_factory
    from resrl.tasks.alfworld import env as env_module

    _, _, tok = tiny
    rows = load_alfworld_tasks(f"alfworld-synth:{alfworld_synth}:valid_seen")
    walk = json.loads(Path(rows[0]["game_file"]).read_text())["walkthrough"]
    policy = _Scripted(tok, [["<think>x</think><action>jump</action>"] + walk, ["look"] * 3])
    envs = [alfworld_env_factory(rows[0], max_steps=len(walk) + 1), alfworld_env_factory(rows[0], max_steps=3)]
    trajs = rollout_multi_turn(envs, [rows[0], rows[0]], policy, ChatRenderer(tok), eos_token_ids=policy.eos_token_ids,
                               max_turns=60, max_total_tokens=200_000, max_step_tokens=400)
    assert trajs[0].reward == 1.0 and trajs[0].done and trajs[0].num_model_turns == len(walk) + 1
    assert trajs[0].info["won"] and trajs[0].info["invalid_actions"] == 1
    assert trajs[1].reward == 0.0 and trajs[1].done and not trajs[1].info["won"] and trajs[1].num_model_turns == 3
    observed = tok.decode([t for t, m in zip(trajs[0].completion_ids, trajs[0].env_mask) if m == 0])
    assert "Nothing happens." in observed and "admissible actions" in observed
    # both episodes ended: their engines are back on the free list, and a new env takes one of them
    free = len(env_module._FREE_ENGINES)
    assert free >= 2
    again = AlfWorldSpec().build()
    again.reset(rows[0])
    assert len(env_module._FREE_ENGINES) == free - 1
    again.close()
