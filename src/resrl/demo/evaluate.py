"""Held-out evaluation of the demo: greedy accuracy, Avg@n, unbiased Pass@k, length, truncation (spec §5).

Every number comes from the project's evaluator, `resrl.eval.runner.evaluate` (what `resrl eval`
runs): its per-sample random streams, its scorer (here the task's reward, `chain_reward`, so
"correct" means what it means in training) and its metrics (`resrl.eval.report`). A policy is
evaluated twice by that one function: greedy = a temperature-0 run with n = 1, sampled = n
samples per problem at the config's temperature. This module only picks the demo's settings and
reads the two summaries into an `EvalResult`.

With `out_dir`, the two runs write their usual outputs (config.json, samples.jsonl, summary.json,
results.md) to `out_dir/greedy` and `out_dir/sampled`, and an interrupted evaluation resumes
from them. An out_dir belongs to one model: the runner checks the settings, not the weights.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

from resrl.data.loaders import Problem
from resrl.eval.runner import EvalConfig

HELD_OUT = "held-out split"  # the benchmark name of the demo's test split (records, plot panel)
DEV = "dev split"            # the warm start's stopping split


def demo_eval_config(**overrides) -> EvalConfig:
    """The demo's evaluation settings, as the runner's EvalConfig.

    n 16 samples per problem at temperature 1.0, top-p 1.0 (the RL sampling distribution: what the
    policy itself would draw), 24 new tokens, raw prompts (`17+45+38=`, as in training), 512 rows
    per generate call (the tiny model on CPU is fastest in large batches), no tqdm bar (the demo
    shows its own), no per-run PNG."""
    settings = dict(n=16, temperature=1.0, top_p=1.0, max_new_tokens=24, batch_size=512, seed=1234,
                    instruction="", use_chat_template=False, raw_prompts=True, progress=False, plot=False)
    settings.update(overrides)
    if "n" in overrides and "ks" not in overrides:
        settings["ks"] = None  # powers of two up to the new n
    return EvalConfig(**settings)


def greedy_config(config: EvalConfig) -> EvalConfig:
    """The same settings as one greedy sample per problem."""
    return replace(config, n=1, ks=None, temperature=0.0)


@dataclass
class EvalResult:
    """A view of the runner's summaries of one policy (greedy run + sampled run)."""

    greedy: float  # greedy accuracy (avg@1 of the temperature-0 run)
    avg: float  # Avg@n
    avg_stderr: float | None  # standard error of Avg@n over problems
    pass_at: dict[int, float]  # k -> mean unbiased Pass@k, for the config's ks
    mean_length: float  # sampled completion tokens
    truncated: float  # fraction of samples that hit max_new_tokens
    num_problems: int
    summary: dict  # the sampled run's summary (resrl.eval.runner.evaluate), e.g. for plot_passk

    @classmethod
    def from_summaries(cls, greedy: dict, sampled: dict, benchmark: str = HELD_OUT) -> "EvalResult":
        g, m = greedy["benchmarks"][benchmark], sampled["benchmarks"][benchmark]
        return cls(greedy=g["avg@1"], avg=m[f"avg@{m['n']}"], avg_stderr=m["avg_stderr"],
                   pass_at={int(k): m["pass@k"][str(k)] for k in sampled["ks"]},
                   mean_length=m["mean_response_tokens"], truncated=m["truncation_rate"],
                   num_problems=m["num_problems"], summary=sampled)

    def to_dict(self) -> dict:
        return {"greedy": self.greedy, "avg": self.avg, "pass_at": {str(k): v for k, v in self.pass_at.items()},
                "mean_length": self.mean_length, "truncated": self.truncated}


def run(model, tokenizer, problems: Sequence[Problem], config: EvalConfig, out_dir: str | Path | None = None,
        benchmark: str = HELD_OUT, on_progress: Callable[[int], None] | None = None, scorer=None) -> dict:
    """One `resrl.eval.runner.evaluate` call on the demo task's problems, scored by the task's reward
    (`scorer`; None: `chain_reward`, the chained-addition tasks' reward)."""
    from resrl.eval.runner import evaluate as run_evaluation

    if scorer is None:
        from resrl.data.synthetic import chain_reward as scorer
    return run_evaluation(model, {benchmark: list(problems)}, config, out_dir, tokenizer=tokenizer,
                          scorer=scorer, on_progress=on_progress)


def evaluate(model, tokenizer, problems: Sequence[Problem], config: EvalConfig, out_dir: str | Path | None = None,
             on_progress: Callable[[int], None] | None = None, scorer=None) -> EvalResult:
    """Greedy accuracy plus config.n samples per problem at config.temperature -> EvalResult.

    on_progress(samples_done) is called after every batch, counting the greedy run's P samples
    first, then the P × n sampled ones (the demo's progress bar). scorer: the task's reward (`run`)."""
    out = Path(out_dir) if out_dir is not None else None
    P = len(problems)
    greedy = run(model, tokenizer, problems, greedy_config(config), out / "greedy" if out else None,
                 on_progress=on_progress, scorer=scorer)
    sampled = run(model, tokenizer, problems, config, out / "sampled" if out else None,
                  on_progress=None if on_progress is None else (lambda done: on_progress(P + done)), scorer=scorer)
    return EvalResult.from_summaries(greedy, sampled)


def greedy_accuracy(model, tokenizer, problems: Sequence[Problem], config: EvalConfig, scorer=None) -> float:
    """Greedy accuracy on `problems` (the warm start's dev split), by the same evaluator."""
    summary = run(model, tokenizer, problems, greedy_config(config), benchmark=DEV, scorer=scorer)
    return summary["benchmarks"][DEV]["avg@1"]


__all__ = ["HELD_OUT", "DEV", "EvalConfig", "EvalResult", "demo_eval_config", "greedy_config", "evaluate",
           "greedy_accuracy", "run"]
