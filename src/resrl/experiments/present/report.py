"""The experiments' reports: OUT/report.md and the PNGs of each kind (`supervised_report`,
`pretrained_report`, `steps_report`), from OUT/summary.json's fields, the runs' logs and the
evaluation records."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from resrl.experiments.present.omega import REGIONS

TRAINING_PNG = "training_curves.png"
PASSK_PNG = "pass_at_k.png"
OMEGA_PNG = "omega_tokens.png"


def _evals_and_runs(exp, summary: dict) -> tuple[dict, dict]:
    """{policy: EvalResult} from the evaluation records, {method: its logged steps} from result.json."""
    from resrl.experiments.layout import read_result
    from resrl.experiments.method import EvalResult, eval_dir

    evals = {policy: EvalResult.read(eval_dir(exp.out, policy)) for policy in summary["results"]}
    runs = {label: read_result(exp.out, label)["metrics"] for label in exp.cfg.algorithms}
    return evals, runs


def supervised_report(exp, summary: dict, plots: bool = True) -> list[Path]:
    """The supervised kind's PNGs (unless plots=False) and report.md; returns their paths."""
    from resrl.eval.plots import plot_passk
    from resrl.experiments.present.omega import OmegaAnalysis, plot_omega
    from resrl.experiments.present.plots import plot_training_curves

    out, cfg = exp.out, exp.cfg
    evals, runs = _evals_and_runs(exp, summary)
    omega = OmegaAnalysis.from_dict(summary["omega"])
    files = [out / "report.md", out / TRAINING_PNG, out / PASSK_PNG, out / OMEGA_PNG]
    if plots:
        plot_training_curves(runs, out / TRAINING_PNG)
        plot_passk([r.summary for r in evals.values()], list(evals), out / PASSK_PNG,
                   title=f"{exp.task.title}, {next(iter(evals.values())).num_problems} "
                         f"{'held-out' if cfg.eval_split == 'test' else 'dev'} problems, T = {cfg.eval.temperature}")
        plot_omega(omega, out / OMEGA_PNG)
    (out / "report.md").write_text(render_report(cfg, exp.task, summary, evals, runs, omega))
    return files


def _is_chain(task) -> bool:
    """Whether the task's correct completion is a worked addition chain (math, math-hard)."""
    from resrl.data.synthetic import chain_target

    return task.target is chain_target


def _reward_name(task) -> str:
    return getattr(task.reward, "__name__", type(task.reward).__name__)


def _last(metrics: list[dict], key: str, window: int = 10) -> float | None:
    # (NaN: a step where the statistic is undefined, e.g. ω with no correct response in the round)
    vals = [m[key] for m in metrics if key in m and m[key] is not None and not np.isnan(m[key])]
    return float(np.mean(vals[-window:])) if vals else None


def render_report(cfg, task, summary: dict, evals: dict, runs: dict, omega) -> str:
    """report.md of the supervised kind: `cfg` the ExperimentConfig, `task` its DemoTask."""
    first = next(iter(evals.values()))
    ks = sorted(first.pass_at)
    n = cfg.eval.n
    P = first.num_problems
    rl = cfg.shared_training().train
    ws = summary["warm_start"]
    timings = summary["timings"]
    split = "held-out" if cfg.eval_split == "test" else "dev"
    lines = [
        f"# ResRL demo: {task.title} on a tiny Qwen3 model",
        "",
        f"Task: {task.description(cfg.task)}, e.g. prompt "
        f"`{summary['example']['prompt']}` → completion `{summary['example']['target']}` "
        + ("(the worked chain: one addition at a time); reward 1 for the right final number. " if _is_chain(task) else
           f"(the reference completion); reward 1 when the task's reward (`{_reward_name(task)}`) accepts the completion, else 0. ")
        + (f"Held-out split: {P} problems never seen in training." if split == "held-out" else
           f"Dev split: {P} problems never seen in training, disjoint from the held-out split."),
        f"Model: Qwen3 architecture, {summary.get('num_parameters', 0) / 1e6:.2f} M parameters, "
        f"character tokenizer, built offline.",
        f"Warm start: {ws['steps']} supervised steps (batch {cfg.start.batch_size}, lr {cfg.start.learning_rate:g}), "
        f"stopped when greedy accuracy on a dev split reached {cfg.start.target_accuracy:.0%} "
        f"(last check: {ws['dev_accuracy'][-1][1]:.0%})." if ws["dev_accuracy"] else
        f"Warm start: {ws['steps']} supervised steps.",
        f"RL: every algorithm starts from the same warm start with the same seed and budget: {rl.max_steps} steps of "
        f"{rl.rollout_prompts} prompts × {rl.group_size} samples (temperature {rl.temperature}), lr {rl.learning_rate:g} "
        "(constant), one update per generation round, KL 0, entropy 0, through `resrl.train.run_training` "
        "(TRL `GRPOTrainer` + the project's core).",
        f"Evaluation: greedy accuracy, Avg@{n} and unbiased Pass@k (spec §5) from {n} samples per problem at "
        f"temperature {cfg.eval.temperature}, top-p {cfg.eval.top_p}, on the same {split} split for every policy, "
        "by the project's evaluator (`resrl.eval.runner.evaluate`, as `resrl eval`; per-sample records in `eval/`). "
        f"± is one standard error over problems.",
        "",
        f"## Results ({split} split)",
        "",
        "| policy | greedy | Avg@%d | " % n + " | ".join(f"Pass@{k}" for k in ks) + " | mean length | RL time |",
        "|---" * (5 + len(ks)) + "|",
    ]
    for name, r in evals.items():
        rl_time = summary["results"].get(name, {}).get("rl_seconds")
        lines.append(
            f"| {name} | {r.greedy:.3f} | {r.avg:.3f} ± {_fmt(r.avg_stderr)} | "
            + " | ".join(f"{r.pass_at[k]:.3f}" for k in ks)
            + f" | {r.mean_length:.1f} | " + (f"{rl_time:.0f} s" if rl_time is not None else "–") + " |"
        )
    lines += ["", f"![Pass@k]({PASSK_PNG})", "", "## Training curves", "",
              "Per RL step (faint: raw, bold: moving average). Reward is the fraction of correct samples of the "
              "step's rollout; ResRL's panels are the statistics of its token weights (spec §2).", "",
              f"![training curves]({TRAINING_PNG})", ""]
    end_rows, grad_norms = [], {}
    for algo, metrics in runs.items():
        vals = [_last(metrics, k) for k in ("accuracy", "completions/mean_length", "entropy", "resrl/omega_mean",
                                             "resrl/frac_downweighted")]
        if vals[1] is None:  # runs logged before the TRL metric names
            vals[1] = _last(metrics, "response_length")
        grad_norms[algo] = _last(metrics, "grad_norm", window=len(metrics))
        vals.append(grad_norms[algo])
        end_rows.append(f"| {algo} | " + " | ".join("–" if v is None else f"{v:.3f}" for v in vals) + " |")
    if end_rows:
        lines += ["Averages over the last 10 logged steps (gradient norm: over all steps):", "",
                  "| algorithm | reward | length | entropy | mean ω | fraction down-weighted | grad norm |",
                  "|---|---|---|---|---|---|---|", *end_rows, ""]
    if grad_norms.get("resrl") and grad_norms.get("grpo"):
        lines += [
            f"Step size: ResRL's token advantages are smaller than GRPO's by construction (λ_pos = 0.1 on "
            f"positives, ω ∈ [0.1, 1] on negatives), so at the same learning rate its mean gradient norm was "
            f"{grad_norms['resrl'] / grad_norms['grpo']:.2f}× GRPO's here (see also how much less its reward and "
            "entropy moved). Every algorithm gets the same learning rate, as in the paper.", ""]

    lines += _omega_section(omega, chain=_is_chain(task))
    lines += ["", "## Timing", "", "| phase | seconds |", "|---|---|"]
    lines += [f"| {phase} | {sec:.1f} |" for phase, sec in timings.items()]
    quick = " --quick" if cfg.is_quick else ""
    task_flag = "" if cfg.task_name == "math" else f" --task {cfg.task_name}"
    lines += ["", f"Reproduce: `resrl demo{task_flag}{quick} --seed {cfg.seed}` (bit for bit given the seed, the CPU and the "
              "library versions, with any --workers; another CPU moves the numbers about as much as another "
              "seed: docs/reproducibility.md).", ""]
    return "\n".join(lines)


def _omega_section(omega, chain: bool = True) -> list[str]:
    means, counts = omega.alignment_means, omega.alignment_counts
    alignments = list(means)
    lines = [
        "## What ResRL does to negative completions",
        "",
        f"On the warm-start policy, {omega.num_groups} prompt groups were sampled ({omega.groups_with_pos} with at "
        f"least one correct completion); ResRL's weights ω were computed by `resrl.core.resrl_token_advantages` "
        f"(the trainer's function, spec defaults) for the {omega.num_negatives} negative completions of those "
        "groups. " + ("The task knows the correct chain, so each token of a negative completion is exactly in one of "
                      "three regions: shared with the correct chain, the first wrong token, or after it." if chain else
                      "Each token of a negative completion is in one of three regions, measured against the task's "
                      "correct completion (the one the warm start imitates): shared with it, the first token that "
                      "leaves it, or after it. (Where the task accepts other completions too, e.g. the arguments of "
                      "a call in another order, the first token that leaves the reference is not always wrong by "
                      "itself.)"),
        "",
        "| hidden_alignment | " + " | ".join(f"mean ω: {r} (n={counts[r]})" for r in REGIONS) + " |",
        "|---" * (1 + len(REGIONS)) + "|",
    ]
    for a in alignments:
        lines.append(f"| `{a}` | " + " | ".join(_fmt(means[a][r]) for r in REGIONS) + " |")
    lines += [
        "",
        f"![ω per token]({OMEGA_PNG})",
        "",
        "Each negative token's advantage is ω · Â (ω ∈ [ξ, 1] = [0.1, 1]): tokens whose penultimate-layer state "
        "lies in the subspace spanned by the group's correct completions are down-weighted, so the shared, "
        "correct prefix of a wrong answer is pushed down much less than GRPO would push it.",
        "",
        "**`hidden_alignment` (spec §2).** With the default `\"predicting\"` the weight of token t comes from "
        "the state at t−1, the one that feeds the output head for token t (the paper's Lemma 1). The first wrong "
        "token is then predicted from a state the correct completions share (same prefix), so it tends to get a "
        "small weight, and full weight arrives only one token later. With `\"token\"` the state at t is used, "
        "the first state that has read the wrong token. The table above measures both on the same samples; "
        "which one trains better is an open question the project lets users measure "
        "(`algorithm.resrl.hidden_alignment` in a training config).",
    ]
    return lines


def _fmt(v: float | None) -> str:
    return "–" if v is None or v != v else f"{v:.3f}"



# -- the pretrained kind ------------------------------------------------------------------------------

def pretrained_report(exp, summary: dict, plots: bool = True) -> list[Path]:
    """report.md (accuracy, format, accuracy among formatted, Pass@k per policy), training.png (the
    per-step training curves), passk.png."""
    from resrl.eval.plots import plot_passk
    from resrl.demo.config import START
    from resrl.experiments.present.plots import plot_training_curves

    out, cfg = exp.out, exp.cfg
    evals, runs = _evals_and_runs(exp, summary)
    files = [out / "report.md", out / "passk.png"]
    if runs:
        if plots:
            plot_training_curves(runs, out / "training.png")
        files.append(out / "training.png")
    if plots:
        plot_passk([r.summary for r in evals.values()], list(evals), out / "passk.png",
                   title=f"SmolLM2-135M-Instruct, {next(iter(evals.values())).num_problems} problems, "
                         f"T = {cfg.eval.temperature}")
    n, ks = cfg.eval.n, sorted(next(iter(evals.values())).pass_at)
    config = cfg.shared_training()
    rl, trainable_layers = config.train, config.model.trainable_layers
    split = "held-out" if cfg.eval_split == "test" else "dev"
    lines = [f"# Pretrained model: SmolLM2-135M-Instruct, seed {cfg.seed}", "",
             f"Task: {summary['example']['prompt'][0]['content']!r} -> {summary['example']['answer']} "
             f"({cfg.task.num_test} {split} problems). RL: "
             f"{rl.max_steps} steps of {rl.rollout_prompts} prompts x {rl.group_size} samples, at most "
             f"{rl.max_completion_length} new tokens, temperature {rl.temperature}, lr {rl.learning_rate} "
             "(a method's own where its label sets train.learning_rate), "
             + (f"the last {trainable_layers} decoder layers and the final norm training (the rest frozen)"
                if trainable_layers else "full fine-tuning") + ", from the base model."
             + (f" A method whose run finished in {cfg.reuse_training} with the same training is evaluated from "
                "that run's model (its OUT/<run>/reused_from)." if cfg.reuse_training else ""), "",
             f"| policy | greedy | Avg@{n} (accuracy) | format rate | accuracy among formatted | truncated | "
             "accuracy among finished | " + " | ".join(f"Pass@{k}" for k in ks) + " |",
             "|---|" + "---|" * (6 + len(ks))]

    def rate(x) -> str:
        return "—" if x is None or x != x else f"{x:.3f}"  # NaN (none formatted / none finished): a dash

    for policy, r in summary["results"].items():
        name = "base model" if policy == START else policy
        lines.append(f"| {name} | {r['greedy']:.3f} | {r['avg']:.3f} | {r['format_rate']:.3f} | "
                     f"{rate(r['accuracy_formatted'])} | {r['truncated']:.3f} | {rate(r.get('accuracy_finished'))} | "
                     + " | ".join(f"{r['pass_at'][str(k)]:.3f}" for k in ks) + " |")
    lines += ["", "Accuracy is the verifier's on every sample; the format rate counts samples with a `\\boxed{}` "
              "answer, so a policy that only learns the format shows up there and not in accuracy. Truncated "
              "samples hit the token budget; accuracy among finished is the correct ones among the others, so a "
              "policy that only learns to stop inside the budget shows up in truncation, not there.", ""]
    if runs:
        lines += ["![training curves](training.png)", ""]
    lines += ["![Pass@k](passk.png)", ""]
    (out / "report.md").write_text("\n".join(lines))
    return files


# -- the step-layout kind -----------------------------------------------------------------------------

def steps_report(exp, summary: dict, plots: bool = True) -> list[Path]:
    """report.md and training_success.png (training success and invalid-format rate per round)."""
    from resrl.demo.config import START
    from resrl.experiments.present.plots import plot_training_success

    out, cfg = exp.out, exp.cfg
    if plots and summary["training"]:
        plot_training_success(summary["training"], out / "training_success.png")
    res = summary["results"]
    n = cfg.eval.n
    # an environment with a graded reward (WebShop's score) gets its columns; the corridor's is 0 or 1
    scored = cfg.train["env"]["name"] != "resrl.envs.toy:make_toy_env" and all("score" in r for r in res.values())
    lines = [*cfg.task.report_header(cfg, summary), "",
             f"| policy | greedy | sampled success ± s.e. ({n}/game) | Pass@{n} | sampled − warm start [95 %] | "
             + ("greedy score | sampled score | " if scored else "")
             + "invalid format | training success, first → last 3 rounds | RL s |",
             "|---|---|---|---|---|---|---|---|" + ("---|---|" if scored else "")]
    for p, r in res.items():
        diff = "—" if p == START else "{mean:+.3f} [{low:+.3f}, {high:+.3f}]".format(**r["paired_vs_warm_start"])
        tr = "—"
        if p in summary["training"]:
            s = summary["training"][p]["train_success"]
            k = max(1, min(3, len(s) // 2))
            tr = f"{sum(s[:k]) / k:.2f} → {sum(s[-k:]) / k:.2f}"
        secs = summary["training"].get(p, {}).get("rl_seconds", "—")
        score = f"{r['greedy_score']:.3f} | {r['score']:.3f} | " if scored else ""
        lines.append(f"| {p} | {r['greedy']:.3f} | {r['avg']:.3f} ± {r['avg_se']:.3f} | {r['pass_at'][str(n)]:.3f} | "
                     f"{diff} | {score}{r['invalid_format_rate']:.3f} | {tr} | {secs} |")
    lines += ["", "Standard errors and intervals are over held-out games (each game's sampled success is one value; "
              "the difference is paired per game with the warm start).", "",
              "![training success](training_success.png)", ""]
    (out / "report.md").write_text("\n".join(lines))
    return [out / "report.md", out / "training_success.png"]
