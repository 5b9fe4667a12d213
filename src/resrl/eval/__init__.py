"""Evaluation: scoring, Avg@k / Pass@k / maj@k, reports, plots; the samples come from resrl.models.generators
(HF generate / optional vLLM), whose names are also importable from here.

    from resrl.eval import EvalConfig, evaluate
    from resrl.tasks.data import load_benchmarks
    summary = evaluate("path/to/model", load_benchmarks(["aime24", "math500"]), EvalConfig(n=16), "runs/eval")

Nothing heavy is imported here (torch / transformers load inside the functions), so that
`resrl --help` stays fast.
"""

from resrl.eval.runner import EvalConfig, evaluate
from resrl.eval.scoring import Scorer, Verdict
from resrl.models.generators import GenerationJob, HFGenerator, Sample, generate_samples

__all__ = ["EvalConfig", "evaluate", "generate_samples", "Sample", "GenerationJob", "HFGenerator",
           "Scorer", "Verdict"]
