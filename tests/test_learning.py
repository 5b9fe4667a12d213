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
one of a, b, c, d uniformly and stop (start: P = 0.245 in every task); seed 0; 4 prompts x G = 4
per round and two optimiser updates per round (train.update_prompts = 2: the second update is
off-policy, so the old log-probs matter); AdamW at lr 1e-3; temperature 1; 40 updates (60 for
ResRL multi-turn). A run takes 1-6 s on one core, the file about 45 s (warm start included).

`EXPECTED` holds, per check, the end value measured on the development machine with seeds 0-4
(seed 0 is the test's) and the threshold: at least 0.10 below the lowest of the five seeds, and
at least 0.12 above every value the planted bugs of the table below reached where they fail the
check, so a correct pipeline clears it with room on another machine and those bugs fall short.

Planted bugs (issue 23), each alone in a copy of src/ (scripts/plant_learning_bugs.py), seed 0;
end values in the check order single grpo / resrl / flowrl / nthr, multi grpo / resrl,
step grpo / gigpo / empg / resrl:

    advantage sign flipped, first half of the rows (core)   all 10 fail: .235 .160 .245 .068, .210 .206,
                                                             .279 .348 .284 .322
    response mask shifted right by one token (loss mask)    all 10 fail: .282 .236 .263 .265, .257 .136,
                                                             .113 .141 .216 .223
    step rows paired with another trajectory's advantage    all 4 step checks fail: .089 .061 .065 .141
    reward not reaching the rows:
      single/multi-turn rewards zero                        all 6 fail: .245 .245 .247 .245, .245 .245
      single/multi-turn rewards rolled by one row           all 6 fail: .039 .081 .105 .046, .095 .130
      step: the episode reward not on the step rows         grpo .254, empg .252, resrl .221 fail;
                                                             gigpo .769 passes (its step advantage reads
                                                             the step rewards, which still carry it)
      step: the environment's reward lost                   all 4 fail: .254 .222 .252 .221
    old log-probs from the wrong rows (rolled in the loss)  9 fail: .469 .307 - .425, .305 .241,
                                                             .124 .152 .106 .001; flowrl .787 passes

Not caught (reported, not claimed): a quarter of the rows' signs flipped only slows learning
(single grpo .642 and flowrl .531 fall below, the other 8 stay above); the mask shifted LEFT drops
each segment's last token (EOS), which these first-token tasks do not need (multi grpo .487 and
single resrl .428 fall below, 8 pass); step rows paired with the PREVIOUS row's advantage is, in
these 2-step episodes, mostly the same trajectory's other step (all 10 pass).

PPO (`ppo`, its critic at the defaults; issue 45), each plant alone, seed 0, end values single / multi /
step (scripts/plant_learning_bugs.py -k ppo):

    GAE sign flipped (the whitened advantages, every row)   all 3 fail: .008 .027 .000
    GAE off by one: the reward one position after the last  single .575 and multi .108 fail; step .776 passes
      valid token                                           (its GAE runs over steps on the step rewards)
    the GAE chain reset at masked positions                 multi .180 fails (no credit across the tool
                                                             answer); single .818 and step .776 pass (no holes)
    response mask shifted right by one token                all 3 fail: .155 .092 .170
    step rows paired with another trajectory's advantage    step .117 fails
    single/multi-turn rewards zero / rolled by one row      fail: .169 .108 / .247 .180
    step: the environment's reward lost                     step .229 fails
    old log-probs from the wrong rows                       multi .176 and step .282 fail; single .760 passes

Not caught by these checks, for PPO: the separate critic reading token t's value after token t (a
baseline that sees the action) — single .643 falls just below its threshold, multi .798 and step .674
stay above — tests/test_engine_ppo.py checks the critic's alignment directly; the half-rows sign plant
above sits in compute_token_advantages, which PPO's engine path (compute_ppo_targets) does not take,
and the episode-reward plant changes nothing for PPO's step GAE (it reads the step rewards).
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
    ("multi-turn", "grpo"): (40, 0.770, [0.751, 0.732, 0.740, 0.757], 0.55),
    ("multi-turn", "resrl"): (60, 0.831, [0.840, 0.793, 0.663, 0.612], 0.45),
    ("step", "grpo"): (40, 0.800, [0.760, 0.718, 0.798, 0.771], 0.55),
    ("step", "gigpo"): (40, 0.803, [0.759, 0.735, 0.798, 0.745], 0.55),
    ("step", "empg"): (40, 0.774, [0.760, 0.745, 0.773, 0.755], 0.55),
    ("step", "resrl"): (40, 0.747, [0.704, 0.609, 0.617, 0.557], 0.45),
    # PPO with its critic at the defaults (separate trunk, critic lr 10x the policy's, γ = λ = 1, whitened)
    ("single-turn", "ppo"): (40, 0.818, [0.795, 0.832, 0.809, 0.820], 0.695),
    ("multi-turn", "ppo"): (40, 0.807, [0.796, 0.787, 0.791, 0.769], 0.60),
    ("step", "ppo"): (40, 0.776, [0.783, 0.779, 0.779, 0.767], 0.60),
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


def train_layout(layout: str, algorithm: str, model_dir, out_dir, steps: int, extra=(), on_log=None):
    """Train one check's run; returns (the trained model, the contexts whose rewarded choice is checked).
    on_log: run_training's, called with each logged step's metrics."""
    common = _common(model_dir, out_dir, algorithm, steps) + list(extra)
    if layout == "single-turn":
        cfg = load_config(None, common + ["train.max_completion_length=4"])
        result = run_training(cfg, train_dataset=pick_dataset(), reward_fn=pick_reward, save_final=False,
                              on_log=on_log)
        return result.model, pick_prompts()
    if layout == "multi-turn":
        cfg = load_config(None, common + ["env.name=learning_tasks:make_tool_env", "reward.function=env",
                                          "env.max_turns=2", "env.max_step_tokens=3",
                                          "train.max_completion_length=40"])
        result = run_training(cfg, train_dataset=tool_dataset(), save_final=False, on_log=on_log)
        return result.model, tool_contexts()[0]
    games = write_step_games(out_dir.parent / f"{out_dir.name}-games.jsonl")
    cfg = load_config(None, common + [f"data.train={games}", "env.name=learning_tasks:make_two_step_env",
                                      "env.layout=step", "reward.function=env", "env.max_steps=2",
                                      "env.max_step_tokens=3", "env.history_window=0", "env.num_workers=1",
                                      "train.max_prompt_length=100"])
    result = run_training(cfg, save_final=False, on_log=on_log)
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


# (algorithm) -> (optimiser updates, end value at seed 0, [seeds 1-3], threshold): the single-turn check
# with only the top decoder layer and the final norm training (model.trainable_layers=1: embeddings and
# output head frozen). It learns slower than the whole model (GRPO 0.83 at seed 0) but always rises
# from START (0.245): nothing training, or the wrong sign, stays at or below it
TOP_LAYER_ONLY = {"grpo": (40, 0.328, [0.321, 0.327, 0.315], 0.28), "resrl": (40, 0.316, [0.309, 0.306, 0.291], 0.27)}


@pytest.mark.parametrize("algorithm", list(TOP_LAYER_ONLY))
def test_rewarded_choice_becomes_more_likely_training_the_top_layer_only(algorithm, warm_model, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    steps, measured, other_seeds, threshold = TOP_LAYER_ONLY[algorithm]
    tokenizer = AutoTokenizer.from_pretrained(warm_model)
    model, contexts = train_layout("single-turn", algorithm, warm_model, tmp_path / "out", steps,
                                   extra=("model.trainable_layers=1",))
    end = choice_probability(model, tokenizer, contexts)
    start = choice_probability(AutoModelForCausalLM.from_pretrained(warm_model), tokenizer, contexts)
    print(f"top layer only / {algorithm}: P(rewarded choice) {start:.3f} -> {end:.3f} (threshold {threshold})")
    assert not model.get_input_embeddings().weight.requires_grad  # the situation claimed: a partial fine-tune
    assert start == pytest.approx(START, abs=0.02)
    assert end >= threshold, (f"top layer only / {algorithm}: P(rewarded choice) {start:.3f} -> {end:.3f} after "
                              f"{steps} updates; needs >= {threshold} (measured {measured} at seed 0, "
                              f"{other_seeds} at 1-3)")


# The policy losses of the registry (resrl.core.loss.SURROGATES) other than the clipped surrogate, each
# with GRPO's advantages and with ResRL's token weights, on the single-turn check (two updates per round:
# the second is off-policy, where the losses differ), at the algorithm's aggregation (seq-mean-token-mean)
# and each loss's own defaults (CISPO: no lower bound and the cap 5 of ScaleRL / TRL's recommendation).
LOSS_SETTINGS = {
    "cispo": ("loss.policy_loss=cispo", "loss.clip_eps_low=1.0", "loss.clip_eps_high=4.0"),
    "sapo": ("loss.policy_loss=sapo",),
    "clip-cov": ("loss.policy_loss=clip-cov",),
    "kl-cov": ("loss.policy_loss=kl-cov",),
    "vespo": ("loss.policy_loss=vespo",),
}
# (loss, algorithm) -> (optimiser updates, end value at seed 0, [seeds 1-4], threshold), as EXPECTED: the
# threshold at least 0.10 below the lowest of the five seeds (ResRL's are lower: with these losses it is
# as fragile on this task as without; sapo / vespo with ResRL clear a pipeline that does not learn,
# 0.245, by 0.105 only).
#
# Planted bugs (scripts/plant_learning_bugs.py -k with_each_loss PLANT), seed 0, end values in the order
# cispo grpo / resrl, sapo, clip-cov, kl-cov, vespo:
#     advantage sign flipped, first half of the rows  all 10 fail: .004 .178, .004 .178, .230 .242, .182 .182,
#                                                      .264 .183
#     response mask shifted right by one token         all 10 fail: .280 .206, .283 .204, .219 .258, .221 .289,
#                                                      .238 .235
#     rewards zero                                     all 10 fail: .245 each
#     rewards rolled by one row                        all 10 fail: .039 .078, .039 .078, .097 .121, .075 .105,
#                                                      .040 .078
#     the loss term's sign flipped, first half of the  all 10 fail: .258 .313, .258 .313, .278 .319, .082 .232,
#       rows (resrl/core/loss.py)                      .277 .318
#     old log-probs from the wrong rows                4 fail (cispo resrl .365, clip-cov grpo .443 and resrl
#                                                      .307, kl-cov resrl .312); 6 pass: CISPO's capped, SAPO's
#                                                      soft and VESPO's smooth weights barely read π_old here
# The margin between a threshold and the planted values it must exclude is smaller here than for the
# checks above (cispo / resrl: 0.39 against 0.365): ResRL's spread over seeds leaves no more room.
EXPECTED_LOSSES = {
    ("cispo", "grpo"): (40, 0.825, [0.801, 0.805, 0.813, 0.809], 0.65),
    ("cispo", "resrl"): (40, 0.689, [0.585, 0.605, 0.635, 0.498], 0.39),
    ("sapo", "grpo"): (40, 0.829, [0.801, 0.806, 0.797, 0.809], 0.65),
    ("sapo", "resrl"): (40, 0.703, [0.584, 0.597, 0.456, 0.491], 0.35),
    ("clip-cov", "grpo"): (40, 0.746, [0.770, 0.774, 0.766, 0.817], 0.60),
    ("clip-cov", "resrl"): (40, 0.764, [0.575, 0.600, 0.725, 0.556], 0.45),
    ("kl-cov", "grpo"): (40, 0.795, [0.806, 0.799, 0.808, 0.798], 0.65),
    ("kl-cov", "resrl"): (40, 0.716, [0.548, 0.540, 0.645, 0.509], 0.40),
    ("vespo", "grpo"): (40, 0.820, [0.783, 0.791, 0.800, 0.787], 0.65),
    ("vespo", "resrl"): (40, 0.679, [0.454, 0.601, 0.608, 0.524], 0.35),
}


@pytest.mark.parametrize("loss,algorithm", list(EXPECTED_LOSSES), ids=[f"{a}-{b}" for a, b in EXPECTED_LOSSES])
def test_rewarded_choice_becomes_more_likely_with_each_loss(loss, algorithm, warm_model, tmp_path):
    _assert_single_turn_rises(f"{loss} / {algorithm}", algorithm, EXPECTED_LOSSES[loss, algorithm],
                              LOSS_SETTINGS[loss], warm_model, tmp_path)


def _assert_single_turn_rises(name: str, algorithm: str, expected: tuple, extra, warm_model, tmp_path,
                              on_log=None) -> None:
    """The single-turn check with `extra` settings: P(rewarded choice) from START to at least the
    threshold of `expected` = (updates, end value at seed 0, [seeds 1-4], threshold)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    steps, measured, other_seeds, threshold = expected
    tokenizer = AutoTokenizer.from_pretrained(warm_model)
    model, contexts = train_layout("single-turn", algorithm, warm_model, tmp_path / "out", steps, extra=extra,
                                   on_log=on_log)
    start = choice_probability(AutoModelForCausalLM.from_pretrained(warm_model), tokenizer, contexts)
    end = choice_probability(model, tokenizer, contexts)
    print(f"{name}: P(rewarded choice) {start:.3f} -> {end:.3f} (threshold {threshold})")
    assert start == pytest.approx(START, abs=0.02)
    assert end >= threshold, (f"{name}: P(rewarded choice) {start:.3f} -> {end:.3f} after {steps} "
                              f"updates; needs >= {threshold} (measured {measured} at seed 0, {other_seeds} at 1-4)")


# The loss options that are not a registry entry but act on every policy loss (resrl.core.loss.policy_loss),
# each with GRPO's advantages on the single-turn check, at a setting where it acts on this task (the
# seed-0 run's metrics show it, and the test asserts it):
#   delta            INTELLECT-2's two-sided clip in its regime δ > 1 + ε_high: ratios here stay within
#                    ±2% (lr 1e-3), so a tight trust region (ε_high = 0.01) and δ = 1.02; the δ cap
#                    changed the loss of 6 negative-advantage tokens at seed 0 (counted by a probe
#                    comparing each token's loss with δ = None); loss/delta_clip_frac > 0 on 15 of 40 updates
#   off-policy-mask  DeepSeek-V3.2's sequence mask at threshold 0.01: the second (off-policy) update of
#                    each round masks some negative sequences (loss/off_policy_masked_frac 0.17 on average
#                    over the 40 updates, > 0 on all 20 off-policy ones; the on-policy first update masks none)
#   entropy-bonus    β_H = 0.05: the mean entropy over the run rises from 0.81 (no bonus) to 1.10 and the
#                    end value drops from 0.829 to 0.753, but the rewarded choice still rises (β_H = 0.2
#                    keeps it at 0.23); the logged loss is the policy term − β_H · entropy at every update
OPTION_SETTINGS = {
    "delta": ("loss.delta=1.02", "loss.clip_eps_high=0.01"),
    "off-policy-mask": ("loss.off_policy_mask_threshold=0.01",),
    "entropy-bonus": ("loss.entropy_coef=0.05",),
}


def _option_acted(option: str, metrics: list[dict]) -> str:
    """Assert from the run's logged metrics that `option` acted; returns the evidence as text."""
    updates = [m for m in metrics if "loss/pg_loss" in m]
    assert updates, "no update logged its loss metrics"
    if option == "delta":
        acted = [m["loss/delta_clip_frac"] for m in updates if m["loss/delta_clip_frac"] > 0]
        assert acted, "no token's ratio exceeded delta in any update"
        return f"ratio > delta on {len(acted)} of {len(updates)} updates"
    if option == "off-policy-mask":
        acted = [m["loss/off_policy_masked_frac"] for m in updates if m["loss/off_policy_masked_frac"] > 0]
        assert acted, "the off-policy mask dropped no sequence in any update"
        return f"sequences masked on {len(acted)} of {len(updates)} updates"
    coef = float(OPTION_SETTINGS[option][0].split("=")[1])
    for m in updates:  # the logged loss = the policy term − β_H · entropy (β = 0: no KL term)
        assert m["loss"] == pytest.approx(m["loss/pg_loss"] - coef * m["loss/entropy"], abs=1e-4), m
    return f"loss = pg_loss - {coef} * entropy on every update, entropy {updates[0]['loss/entropy']:.2f} -> " \
           f"{updates[-1]['loss/entropy']:.2f}"


# (option, algorithm) -> (optimiser updates, end value at seed 0, [seeds 1-4], threshold), as EXPECTED_LOSSES
# (scripts/measure_learning_seeds.py options measures them).
#
# Planted bugs (scripts/plant_learning_bugs.py -k with_each_loss_option PLANT), seed 0, end values in the
# order delta grpo, off-policy-mask grpo / resrl, entropy-bonus grpo:
#     advantage sign flipped, first half of the rows  all 4 fail: .019, .235 .173, .001
#     response mask shifted right by one token         all 4 fail: .244, .267 .224, .181
#     rewards zero                                     all 4 fail: .245, .245 .245, .008 (the bonus alone
#                                                      spreads the choice)
#     rewards rolled by one row                        all 4 fail: .047, .101 .117, .003
#     the loss term's sign flipped, first half of the  all 4 fail: .210, .266 .315, .000
#       rows (resrl/core/loss.py)
#     old log-probs from the wrong rows                2 fail (off-policy-mask resrl .000, entropy-bonus .004);
#                                                      delta grpo .611 and off-policy-mask grpo .695 pass
# Not caught, reported: the options that read π_old (δ, the mask) learn with GRPO from old log-probs of the
# wrong rows, delta only just above its threshold (.611 against 0.60, which the seed spread does not let rise).
EXPECTED_OPTIONS = {
    ("delta", "grpo"): (40, 0.768, [0.738, 0.723, 0.745, 0.720], 0.60),
    ("off-policy-mask", "grpo"): (40, 0.832, [0.818, 0.802, 0.825, 0.811], 0.65),
    ("off-policy-mask", "resrl"): (40, 0.725, [0.750, 0.638, 0.740, 0.738], 0.50),
    ("entropy-bonus", "grpo"): (40, 0.753, [0.751, 0.771, 0.723, 0.773], 0.60),
}


@pytest.mark.parametrize("option,algorithm", list(EXPECTED_OPTIONS), ids=[f"{a}-{b}" for a, b in EXPECTED_OPTIONS])
def test_rewarded_choice_becomes_more_likely_with_each_loss_option(option, algorithm, warm_model, tmp_path):
    metrics: list[dict] = []
    _assert_single_turn_rises(f"{option} / {algorithm}", algorithm, EXPECTED_OPTIONS[option, algorithm],
                              OPTION_SETTINGS[option], warm_model, tmp_path, on_log=metrics.append)
    print(f"{option} / {algorithm}: the option acted: {_option_acted(option, metrics)}")
