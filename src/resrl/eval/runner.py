"""`evaluate`: sample n completions per problem, score them, write per-sample records and reports.

Output directory (`out_dir`):
    config.json     the settings (checked on resume: sampling settings must match)
    samples.jsonl   one record per sample, appended and flushed after every batch:
                    benchmark, problem_id, sample_index, answer, completion, extracted, normalized,
                    correct, timed_out, error, num_tokens, truncated, gen_seconds, score_seconds,
                    correct_base (HumanEval+: the base inputs passed); an answer over 20,000
                    characters is stored as its length and sha256
    summary.json    metrics per benchmark and overall (see resrl.eval.report)
    results.md      the Markdown table
    passk.png       Pass@k curves, log2 k on x

Resume: records already in samples.jsonl (same benchmark, problem id and sample index) are
kept and only the missing samples are generated; a torn last line (killed mid-write) is dropped.
Resumed samples are fresh draws of the same distribution, not replays of the lost ones.
"""

from __future__ import annotations

from resrl.errors import InputError

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from resrl.data.loaders import Problem
from resrl.data.prompts import DEFAULT_INSTRUCTION, render_prompt
from resrl.eval.report import benchmark_metrics, markdown_table, overall_metrics
from resrl.eval.scoring import Scorer
from resrl.metrics import ks_up_to
from resrl.models.generators import GenerationJob, Generator, HFGenerator, VLLMGenerator, vllm_available

logger = logging.getLogger(__name__)

# settings that change what a sample means: a resumed run must use the same ones
_RESUME_KEYS = ("model", "temperature", "top_p", "max_new_tokens", "instruction", "use_chat_template", "raw_prompts",
                "reward")
_RESUME_DEFAULTS = {"raw_prompts": False}  # keys added later: what an older config.json meant


@dataclass
class EvalConfig:
    """Evaluation settings (defaults: the paper's, spec §5).

    n                  samples per problem (Avg@n, Pass@k for k <= n)
    ks                 k shown in the table and used for maj@k (Pass@k is stored for every k <= n);
                       None = powers of two up to n, plus n
    temperature/top_p  sampling (temperature 0 = greedy)
    max_new_tokens     generation budget per sample (samples hitting it count as truncated)
    batch_size         rows per generate call
    seed               sampling seed
    instruction        appended to string prompts ("" for none)
    use_chat_template  None = when the tokenizer has one
    raw_prompts        feed each (string) prompt to the model exactly as it is: no instruction, no chat
                       template, no trailing newline (tasks trained on raw text, e.g. the demo's
                       chained addition, whose prompts are `17+45+38=`)
    reward             "math" (Math-Verify), "exact" or "module:function" (ignored if a scorer is passed)
    reward_timeout_s   per-item timeout of the Math-Verify pool; reward_workers its processes
    correct_threshold  a reward value above it counts as correct (for float-valued reward functions);
                       0, the training rule (AlgorithmConfig.correct_threshold): one meaning of "correct"
    backend            "hf", "vllm" or "auto" (vLLM when installed and a GPU is present)
    limit              evaluate only the first `limit` problems of each benchmark
    progress           show a progress bar
    plot               write passk.png
    """

    n: int = 16
    ks: Sequence[int] | None = None  # None: 1, 2, 4, ... up to n, and n
    temperature: float = 0.6
    top_p: float = 0.95
    max_new_tokens: int = 1024
    batch_size: int = 16
    seed: int = 0
    instruction: str | None = DEFAULT_INSTRUCTION
    use_chat_template: bool | None = None
    raw_prompts: bool = False
    reward: str = "math"
    reward_timeout_s: float = 5.0
    reward_workers: int = 2
    correct_threshold: float = 0.0  # = AlgorithmConfig.correct_threshold (tested): reward > 0 is correct
    backend: str = "hf"
    limit: int | None = None
    progress: bool = True
    plot: bool = True
    extra: dict = field(default_factory=dict)  # free-form, stored in config.json

    def __post_init__(self) -> None:
        def bad(key, why):
            raise ValueError(f"EvalConfig.{key}: {why}")

        if not isinstance(self.n, int) or self.n < 1:
            bad("n", f"must be an int >= 1, got {self.n!r}")
        if self.ks is None or len(self.ks) == 0:
            self.ks = tuple(ks_up_to(self.n))
        self.ks = tuple(sorted({int(k) for k in self.ks}))
        if self.ks[0] < 1:
            bad("ks", f"every k must be >= 1, got {self.ks}")
        if self.ks[-1] > self.n:
            bad("ks", f"k={self.ks[-1]} exceeds n={self.n}")
        if self.temperature < 0:
            bad("temperature", f"must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            bad("top_p", f"must be in (0, 1], got {self.top_p}")
        for key in ("max_new_tokens", "batch_size", "reward_workers"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 1:
                bad(key, f"must be an int >= 1, got {getattr(self, key)!r}")
        if self.backend not in ("hf", "vllm", "auto"):
            bad("backend", f"must be 'hf', 'vllm' or 'auto', got {self.backend!r}")
        if self.limit is not None and (not isinstance(self.limit, int) or self.limit < 1):
            bad("limit", f"must be a positive int or None, got {self.limit!r}")


# ---- records on disk ----------------------------------------------------------------------------
def _key(benchmark: str, problem_id: str, sample_index: int) -> tuple:
    return (benchmark, str(problem_id), int(sample_index))


def read_records(path: Path) -> dict[tuple, dict]:
    """Finished records of samples.jsonl by (benchmark, problem_id, sample_index).

    A torn last line (the process was killed mid-write) is cut off the file so appends stay valid.
    """
    if not path.exists():
        return {}
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        logger.warning("%s: dropping a torn last line (%d bytes) left by an interrupted run", path, len(data) - cut)
        with path.open("r+b") as f:
            f.truncate(cut)
        data = data[:cut]
    records = {}
    for lineno, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            records[_key(r["benchmark"], r["problem_id"], r["sample_index"])] = r
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise InputError(f"{path}: row {lineno}: not a sample record ({exc}); "
                             f"remove the file or use another --out") from None
    return records


def _check_resume(out_dir: Path, settings: dict) -> None:
    path = out_dir / "config.json"
    if not path.exists():
        return
    old = json.loads(path.read_text())
    diffs = [f"{k}: {old.get(k, _RESUME_DEFAULTS.get(k))!r} (saved) vs {settings.get(k)!r} (now)"
             for k in _RESUME_KEYS if old.get(k, _RESUME_DEFAULTS.get(k)) != settings.get(k)]
    if diffs:
        raise InputError(f"{out_dir} holds an evaluation with different settings ({'; '.join(diffs)}); "
                         f"use another --out directory or delete it")


# ---- the evaluation -----------------------------------------------------------------------------
def _load_model(model_or_dir, tokenizer):
    if not isinstance(model_or_dir, (str, Path)):
        if tokenizer is None:
            raise ValueError("evaluate: pass the tokenizer together with a model object")
        return model_or_dir, tokenizer
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(model_or_dir)
    if not (path / "config.json").is_file():
        raise InputError(f"model directory {path} has no config.json (convert or build a model first)")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device).eval()
    tokenizer = tokenizer or AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def evaluate(model_or_dir, problems_by_benchmark: dict[str, list[Problem]], config: EvalConfig | None = None,
             out_dir: str | Path | None = None, *, tokenizer=None, scorer=None,
             generator: Generator | None = None, on_progress: Callable[[int], None] | None = None,
             seed_names: dict[str, str] | None = None) -> dict:
    """Evaluate a model on several benchmarks; return the summary dict (also written to out_dir).

    model_or_dir: a local model directory or a loaded model (then pass `tokenizer`); may be None
    when `generator` is given. problems_by_benchmark: {name: problems} (see
    resrl.tasks.data.load_benchmarks). scorer: see resrl.eval.scoring.Scorer (default: the
    config's reward). generator: jobs -> samples, replaces model generation (tests, custom engines).
    on_progress(samples_done): the number of finished samples of this evaluation, resumed ones
    included, once before generating and after every batch (a caller's own progress display;
    config.progress shows the built-in bar). seed_names: {benchmark: the name its samples' seeds are
    derived from} (default: the benchmark's own name; see GenerationJob.seed_name).
    """
    config = config or EvalConfig()
    if not problems_by_benchmark:
        raise InputError("evaluate: no benchmarks given")
    out = Path(out_dir) if out_dir is not None else None
    if isinstance(model_or_dir, (str, Path)):
        model_name = str(model_or_dir)
    elif model_or_dir is None:
        model_name = f"generator:{type(generator).__name__}"
    else:
        model_name = getattr(getattr(model_or_dir, "config", None), "name_or_path", None) or type(model_or_dir).__name__
    scorer_name = config.reward if scorer is None else (scorer if isinstance(scorer, str) else
                                                        getattr(scorer, "__name__", type(scorer).__name__))
    settings = {**asdict(config), "ks": list(config.ks), "model": model_name, "reward": scorer_name,
                "benchmarks": {b: len(ps) for b, ps in problems_by_benchmark.items()}}
    done: dict[tuple, dict] = {}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        _check_resume(out, settings)
        (out / "config.json").write_text(json.dumps(settings, indent=2, default=str) + "\n")
        done = read_records(out / "samples.jsonl")

    problems_by_benchmark = {b: ps[: config.limit] if config.limit else list(ps)
                             for b, ps in problems_by_benchmark.items()}
    score = Scorer(scorer if scorer is not None else config.reward, correct_threshold=config.correct_threshold,
                   timeout_s=config.reward_timeout_s, num_workers=config.reward_workers)
    try:
        if generator is None:
            pending_any = any(_key(b, p.id, s) not in done for b, ps in problems_by_benchmark.items()
                              for p in ps for s in range(config.n))
            if pending_any:
                score.warm_up()  # fork the scoring workers before tokenizers start threads
                generator, tokenizer = _make_generator(model_or_dir, tokenizer, config)
        jobs, answers = _pending_jobs(problems_by_benchmark, done, config, tokenizer, seed_names or {})
        report = None
        if on_progress is not None:
            already = sum(len(ps) for ps in problems_by_benchmark.values()) * config.n - len(jobs)
            on_progress(already)

            def report(new: int) -> None:
                on_progress(already + new)
        throughput = _run_jobs(jobs, answers, generator, score, config, out, done, report)
    finally:
        score.close()

    summary = summarize(problems_by_benchmark, done, config, with_majority=score.has_answers)
    summary["throughput"] = throughput
    summary["settings"] = settings
    if out is not None:
        write_reports(summary, out, config)
    return summary


def _make_generator(model_or_dir, tokenizer, config: EvalConfig):
    use_vllm = config.backend == "vllm" or (config.backend == "auto" and isinstance(model_or_dir, (str, Path))
                                            and vllm_available())
    if use_vllm:
        if not isinstance(model_or_dir, (str, Path)):
            raise ValueError("backend 'vllm' needs a model directory, not a loaded model")
        from transformers import AutoTokenizer

        tokenizer = tokenizer or AutoTokenizer.from_pretrained(model_or_dir)
        logger.info("generating with vLLM")
        return VLLMGenerator(str(model_or_dir), config.temperature, config.top_p, config.max_new_tokens,
                             config.seed), tokenizer
    model, tokenizer = _load_model(model_or_dir, tokenizer)
    return HFGenerator(model, tokenizer, config.temperature, config.top_p, config.max_new_tokens,
                       config.seed), tokenizer


def _pending_jobs(problems_by_benchmark, done, config: EvalConfig, tokenizer, seed_names: dict[str, str]):
    """The samples still to draw, in (benchmark, problem, sample) order, and their answers."""
    jobs, answers = [], []
    for bench, problems in problems_by_benchmark.items():
        for p in problems:
            missing = [s for s in range(config.n) if _key(bench, p.id, s) not in done]
            if not missing:
                continue
            if config.raw_prompts:
                if not isinstance(p.prompt, str):
                    raise InputError(f"{bench}/{p.id}: raw_prompts needs string prompts, not chat lists")
                prompt = p.prompt
            elif tokenizer is not None:
                prompt = render_prompt(p, tokenizer, config.instruction, config.use_chat_template)
            else:  # a custom generator without a tokenizer gets the plain text
                prompt = render_prompt(p, None, config.instruction, use_chat_template=False)
            for s in missing:
                jobs.append(GenerationJob(prompt=prompt, benchmark=bench, problem_id=p.id, sample_index=s,
                                          seed_name=seed_names.get(bench)))
                answers.append(p.answer)
    return jobs, answers


def _run_jobs(jobs, answers, generator, score: Scorer, config: EvalConfig, out: Path | None, done: dict,
              on_progress: Callable[[int], None] | None = None) -> dict:
    """Generate + score in batches; append each batch's records to samples.jsonl and flush."""
    stats = {"new_samples": len(jobs), "generated_tokens": 0, "generation_seconds": 0.0,
             "scoring_seconds": 0.0, "wall_seconds": 0.0}
    if not jobs:
        return stats
    bar = None
    if config.progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(jobs), desc="eval", unit="sample", dynamic_ncols=True)
    sink = (out / "samples.jsonl").open("a", encoding="utf-8") if out is not None else None
    start = time.perf_counter()
    try:
        for i in range(0, len(jobs), config.batch_size):
            batch, batch_answers = jobs[i:i + config.batch_size], answers[i:i + config.batch_size]
            t0 = time.perf_counter()
            samples = generator(batch)
            t1 = time.perf_counter()
            if len(samples) != len(batch):
                raise RuntimeError(f"generator returned {len(samples)} samples for {len(batch)} jobs")
            verdicts = score([s.text for s in samples], batch_answers)
            t2 = time.perf_counter()
            for job, answer, sample, v in zip(batch, batch_answers, samples, verdicts):
                record = {
                    "benchmark": job.benchmark, "problem_id": job.problem_id, "sample_index": job.sample_index,
                    "answer": _answer_field(answer), "completion": sample.text, "extracted": v.extracted,
                    "normalized": v.normalized, "correct": v.correct, "timed_out": v.timed_out, "error": v.error,
                    "num_tokens": sample.num_tokens, "truncated": sample.truncated,
                    "gen_seconds": round((t1 - t0) / len(batch), 5), "score_seconds": round(v.seconds, 5),
                }
                if v.correct_base is not None:  # HumanEval+: correct on the base inputs (EvalPlus's "base")
                    record["correct_base"] = v.correct_base
                done[_key(job.benchmark, job.problem_id, job.sample_index)] = record
                if sink is not None:
                    sink.write(json.dumps(record, ensure_ascii=False) + "\n")
            if sink is not None:
                sink.flush()  # a kill loses at most the batch in flight
            stats["generated_tokens"] += sum(s.num_tokens for s in samples)
            stats["generation_seconds"] += t1 - t0
            stats["scoring_seconds"] += t2 - t1
            if bar is not None:
                bar.update(len(batch))
                bar.set_postfix(acc=f"{sum(v.correct for v in verdicts) / len(verdicts):.2f}")
            if on_progress is not None:
                on_progress(min(i + config.batch_size, len(jobs)))
    finally:
        if sink is not None:
            sink.close()
        if bar is not None:
            bar.close()
    wall = time.perf_counter() - start
    stats["wall_seconds"] = wall
    stats["samples_per_s"] = len(jobs) / wall if wall > 0 else None
    stats["tokens_per_s"] = stats["generated_tokens"] / stats["generation_seconds"] if stats["generation_seconds"] else None
    return stats


_ANSWER_CHARS = 20000


def _answer_field(answer: str) -> str:
    """The reference answer as stored in samples.jsonl: whole when short; a long one (HumanEval+'s
    tests run to megabytes) as its length and sha256, so the file does not grow by the answer per sample."""
    if len(answer) <= _ANSWER_CHARS:
        return answer
    import hashlib

    return f"<{len(answer)} characters, sha256 {hashlib.sha256(answer.encode('utf-8', 'surrogatepass')).hexdigest()}>"


def summarize(problems_by_benchmark, done: dict, config: EvalConfig, with_majority: bool = True) -> dict:
    """Metrics from the finished records (all samples of every problem must be there)."""
    per_benchmark = {}
    for bench, problems in problems_by_benchmark.items():
        rows = []
        for p in problems:
            row = [done.get(_key(bench, p.id, s)) for s in range(config.n)]
            if any(r is None for r in row):
                raise RuntimeError(f"{bench}/{p.id}: samples missing after generation")
            rows.append(row)
        per_benchmark[bench] = benchmark_metrics(rows, config.ks, with_majority=with_majority)
        if all(r.get("correct_base") is not None for row in rows for r in row):  # HumanEval+: EvalPlus's "base"
            base_rows = [[{**r, "correct": r["correct_base"]} for r in row] for row in rows]
            per_benchmark[bench]["base"] = benchmark_metrics(base_rows, config.ks, with_majority=with_majority)
    return {"benchmarks": per_benchmark, "overall": overall_metrics(per_benchmark), "ks": list(config.ks)}


def write_reports(summary: dict, out: Path, config: EvalConfig) -> None:
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "results.md").write_text(markdown_table(summary, config.ks))
    if config.plot:
        from resrl.eval.plots import plot_passk

        plot_passk([summary], [""], out / "passk.png", title=f"Pass@k — {Path(str(summary['settings']['model'])).name}")


__all__ = ["EvalConfig", "evaluate", "summarize", "write_reports", "read_records"]
