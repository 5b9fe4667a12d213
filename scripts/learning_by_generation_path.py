"""The single-turn learning checks of tests/test_learning.py along every generation path resrl runs (issue 42):
the same task, seed and thresholds, with generation.backend / shared_prefill set per row; the top-layer-only
check with and without the frozen layers reused. Prints one line per run.

    OMP_NUM_THREADS=1 python scripts/learning_by_generation_path.py     # from the repository root, ~1 min
"""
import sys, tempfile, time
from pathlib import Path
sys.path.insert(0, "tests")
import torch
torch.set_num_threads(1)
from learning_tasks import choice_probability, pick_prompts, tool_contexts, step_prompts, warm_start
from test_learning import EXPECTED, TOP_LAYER_ONLY, train_layout
from transformers import AutoModelForCausalLM, AutoTokenizer
tmp = Path(tempfile.mkdtemp())
first, second = tool_contexts()
warm = warm_start(tmp / "warm", pick_prompts() + first + second + step_prompts(), steps=100)
tok = AutoTokenizer.from_pretrained(warm)
PATHS = {"hf (TRL's call)": ["generation.backend=hf", "generation.shared_prefill=false", "generation.reuse_frozen=false"],
         "hf+shared": ["generation.backend=hf", "generation.shared_prefill=true"],
         "compiled": ["generation.backend=compiled", "generation.shared_prefill=false"],
         "compiled+shared": ["generation.backend=compiled", "generation.shared_prefill=true"]}
for name, keys in PATHS.items():
    for algo in ("grpo", "resrl"):
        steps, measured, _, threshold = EXPECTED["single-turn", algo]
        t0 = time.perf_counter()
        model, contexts = train_layout("single-turn", algo, warm, tmp / f"{name}-{algo}".replace(" ", "_"), steps, keys)
        end = choice_probability(model, tok, contexts)
        print(f"{name:18s} {algo:6s} end {end:.3f} (threshold {threshold}, measured at seed 0 {measured}) "
              f"{'PASS' if end >= threshold else 'FAIL'} {time.perf_counter() - t0:.0f} s", flush=True)
for algo in ("grpo", "resrl"):
    steps, measured, _, threshold = TOP_LAYER_ONLY[algo]
    for name, keys in (("hf (TRL's call)", PATHS["hf (TRL's call)"]), ("auto (reuse_frozen)", [])):
        model, contexts = train_layout("single-turn", algo, warm, tmp / f"top-{algo}-{len(keys)}", steps,
                                       ["model.trainable_layers=1", *keys])
        end = choice_probability(model, tok, contexts)
        print(f"top layer only {name:20s} {algo:6s} end {end:.3f} (threshold {threshold}, measured {measured}) "
              f"{'PASS' if end >= threshold else 'FAIL'}", flush=True)
