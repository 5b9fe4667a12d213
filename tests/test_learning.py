"""Learning checks, one per rollout layout: a small fixed-seed task trained through the public path
(`run_training` with a config, and a data set + reward function or an environment factory named in
`env.name`, written as a user writes them: tests/learning_tasks.py) must raise the rewarded
choice's probability — read EXACTLY from the model's logits on the task's fixed contexts — from
its start to at least a stated threshold.

    layout        task (learning_tasks.py)                          probability checked
    single-turn   pick box "c"                                      P(first token "c" | prompt), 8 prompts
    multi-turn    open(box): the tool call's argument decides the   P(argument "c" | prompt), the TOOL CALL;
                  reward, which arrives after a second, free message  (credit across a turn and tool tokens)
    step          two steps, only the second step's choice pays     P("c" | step-2 prompt)

Setting of every run: a tiny Qwen3 (d = 32, 2 layers, untied embeddings) warm-started to answer
one of a, b, c, d uniformly and stop (start: P = 0.25 in every context); seed 0; 4 prompts x G = 4
per round and two optimiser updates per round (train.update_prompts = 2: the second update is
off-policy, so the old log-probs matter); AdamW at lr 1e-3; temperature 1; 40 updates (60 for
ResRL multi-turn). One run takes 2-12 s on one core.

`EXPECTED` holds, per check, the end value measured on the development machine with seeds 0-4
(seed 0 is the test's) and the threshold: at least 0.07 below the lowest of the five seeds and at
least 0.09 above what any planted bug reached (table below), so a correct pipeline clears it with
room on another machine and each planted bug falls short.

Planted bugs (issue 23), each alone in a copy of src/, seed 0; end values (threshold in brackets):

    sign of the advantage flipped for the first half of the rows (core compute_token_advantages):
        every check fails: single 0.235 / 0.160 / 0.245 / 0.068, multi 0.227 / 0.260,
        step 0.246 / 0.385 / 0.214 / 0.360
    response mask shifted right by one token (the trainer's loss mask): every check fails,
        all <= 0.298
    step rows paired with another trajectory's advantage (step round, advantages rolled by one
        trajectory): every step check fails, <= 0.173
    reward not reaching the rows: single / multi-turn rewards zeroed in the adapter -> every check
        of those layouts stays at 0.245; rolled by one row -> every check fails (<= 0.262);
        step layout: episode reward dropped from the step rows -> grpo 0.261, empg 0.261,
        resrl 0.281 fail, gigpo 0.769 passes (its step advantage reads the step rewards, which
        still carry it); the environment's reward lost entirely -> every step check fails
    old log-probs from the wrong rows (rolled by one row in the loss): fails single grpo 0.469,
        resrl 0.307, nthr 0.425, multi 0.035 / 0.238, step 0.000 / 0.020 / 0.285 / 0.001;
        FlowRL 0.787 passes (its loss is insensitive to it here)

(Not caught: a quarter of the rows' signs flipped only slows learning — 0.50-0.67, all above
their thresholds but single-turn FlowRL; the mask shifted LEFT drops each message's EOS from the
loss, which these first-token tasks do not need — caught only by ResRL multi-turn 0.018 and
single-turn 0.428.)
"""

from __future__ import annotations

import pytest
from learning_tasks import (choice_probability, pick_dataset, pick_prompts, pick_reward, step_prompts, tool_contexts,
                            tool_dataset, warm_start, write_step_games)

from resrl.train import load_config, run_training

START = 0.25  # P of the rewarded choice after the warm start (measured: 0.245 in each task)

# (layout, algorithm) -> (optimiser updates, end value at seed 0, [seeds 1-4], threshold)
EXPECTED = {
    ("single-turn", "grpo"): (40, 0.829, [0.801, 0.798, 0.813, 0.812], 0.65),
    ("single-turn", "resrl"): (40, 0.662, [0.599, 0.621, 0.655, 0.568], 0.45),
    ("single-turn", "flowrl"): (40, 0.803, [0.797, 0.796, 0.812, 0.822], 0.60),
    ("single-turn", "nthr"): (40, 0.825, [0.826, 0.825, 0.817, 0.810], 0.65),
    ("multi-turn", "grpo"): (40, 0.775, [0.739, 0.793, 0.770, 0.772], 0.55),
    ("multi-turn", "resrl"): (60, 0.671, [0.608, 0.501, 0.518, 0.517], 0.40),
    ("step", "grpo"): (40, 0.775, [0.748, 0.746, 0.790, 0.758], 0.55),
    ("step", "gigpo"): (40, 0.775, [0.763, 0.749, 0.793, 0.768], 0.55),
    ("step", "empg"): (40, 0.763, [0.770, 0.767, 0.782, 0.730], 0.55),
    ("step", "resrl"): (40, 0.527, [0.587, 0.577, 0.585, 0.602], 0.45),
}


@pytest.fixture(scope="module")
def warm_model(tmp_path_factory):
    """One warm start for every context of the three tasks (about 8 s)."""
    first, second = tool_contexts()
    contexts = pick_prompts() + first + second + step_prompts()
    return warm_start(tmp_path_factory.mktemp("learning") / "warm", contexts, steps=100)


def _common(model_dir, out_dir, algorithm: str, steps: int) -> list[str]:
    return [f"model.path={model_dir}", f"train.output_dir={out_dir}", f"algorithm.name={algorithm}",
            f"train.max_steps={steps}", "train.rollout_prompts=4", "train.update_prompts=2", "train.group_size=4",
            "train.learning_rate=1e-3", "train.seed=0", "train.temperature=1.0",
            "log.progress=false", "log.report_to=[none]", "log.jsonl=false"]


def train_layout(layout: str, algorithm: str, model_dir, out_dir, steps: int, extra=()):
    """Train one check's run; returns (the trained model, the contexts whose rewarded choice is checked)."""
    common = _common(model_dir, out_dir, algorithm, steps) + list(extra)
    if layout == "single-turn":
        cfg = load_config(None, common + ["train.max_completion_length=4"])
        result = run_training(cfg, train_dataset=pick_dataset(), reward_fn=pick_reward, save_final=False)
        return result.model, pick_prompts()
    if layout == "multi-turn":
        cfg = load_config(None, common + ["env.name=learning_tasks:make_tool_env", "reward.function=env",
                                          "env.max_turns=2", "env.max_step_tokens=3",
                                          "train.max_completion_length=40"])
        result = run_training(cfg, train_dataset=tool_dataset(), save_final=False)
        return result.model, tool_contexts()[0]
    games = write_step_games(out_dir.parent / f"{out_dir.name}-games.jsonl")
    cfg = load_config(None, common + [f"data.train={games}", "env.name=learning_tasks:make_two_step_env",
                                      "env.layout=step", "reward.function=env", "env.max_steps=2",
                                      "env.max_step_tokens=3", "env.history_window=0", "env.num_workers=1",
                                      "train.max_prompt_length=100"])
    result = run_training(cfg, save_final=False)
    return result.model, step_prompts()[1:]


@pytest.mark.parametrize("layout,algorithm", list(EXPECTED), ids=[f"{a}-{b}" for a, b in EXPECTED])
def test_rewarded_choice_becomes_more_likely(layout, algorithm, warm_model, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    steps, measured, other_seeds, threshold = EXPECTED[layout, algorithm]
    tokenizer = AutoTokenizer.from_pretrained(warm_model)
    model, contexts = train_layout(layout, algorithm, warm_model, tmp_path / "out", steps)
    start = choice_probability(AutoModelForCausalLM.from_pretrained(warm_model), tokenizer, contexts)
    end = choice_probability(model, tokenizer, contexts)
    print(f"{layout} / {algorithm}: P(rewarded choice) {start:.3f} -> {end:.3f} (threshold {threshold})")
    assert start == pytest.approx(START, abs=0.02)
    assert end >= threshold, (f"{layout} / {algorithm}: P(rewarded choice) {start:.3f} -> {end:.3f} after {steps} "
                              f"updates; needs >= {threshold} (measured {measured} at seed 0, {other_seeds} at 1-4)")
