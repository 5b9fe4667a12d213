"""One way to sample (issue 53): the package's only `generate` call is resrl.models.generation's
`generate_with`, the eos cut is written once (`cut_after_eos`), and per-row seeded sampling
(the evaluation's) follows the config's temperature and top-p or refuses what it cannot apply.
That every site samples what it sampled before is shown on their own tests (test_rollout,
test_eval_sampling, test_sampling_settings, test_diagnose, the quick demo's identity)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from resrl.models.generation import completion_mask, cut_after_eos, per_row_sampling, sampling_config

SRC = Path(__file__).resolve().parents[1] / "src"
GENERATE = ("generate", "generate_batch")  # transformers' sampling calls on a model
# calls of a method named like them that are not a model's: (module, the receiver's source)
NOT_A_MODEL = {("resrl.models.generators", "self.llm"): "vLLM's own engine (LLM.generate with SamplingParams)",
               ("resrl.engines.trl.trainer", "self.rollout_path"): "TrainerGeneration.generate, resrl's own method"}


def generate_calls(src: Path = SRC) -> list[tuple[str, int, str]]:
    """(module, line, receiver) of every `<receiver>.generate(...)` / `.generate_batch(...)` call
    in the package, the ones in NOT_A_MODEL left out."""
    found = []
    for path in sorted((src / "resrl").rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in GENERATE:
                receiver = ast.unparse(node.func.value)
                if (module, receiver) not in NOT_A_MODEL:
                    found.append((module, node.lineno, receiver))
    return found


def test_the_package_calls_generate_in_one_place():
    calls = generate_calls()
    assert [(m, r) for m, _, r in calls] == [("resrl.models.generation", "model")], calls
    # the exceptions are still there (a stale entry would let a real call hide behind its name)
    text = {m: (SRC / Path(*m.split("."))).with_suffix(".py").read_text() for m, _ in NOT_A_MODEL}
    for module, receiver in NOT_A_MODEL:
        assert f"{receiver}.generate(" in text[module], (module, receiver)


def test_the_scan_sees_a_generate_call_elsewhere(tmp_path):
    files = {"resrl/__init__.py": "", "resrl/models/generation.py": "def g(model):\n    return model.generate()\n",
             "resrl/diagnose/x.py": "def f(self):\n    with ctx():\n        return self.model.generate(ids)\n",
             "resrl/bench/y.py": "def h(m, rows):\n    return m.generate_batch(rows)\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert generate_calls(tmp_path) == [("resrl.bench.y", 2, "m"), ("resrl.diagnose.x", 3, "self.model"),
                                        ("resrl.models.generation", 2, "model")]


def test_the_eos_cut_by_hand():
    rows = [[5, 1, 2], [3, 4, 9], [9], [], [1, 9, 9, 2], [1, 2]]
    assert cut_after_eos(rows, [9, 5]) == ([1, 3, 1, 0, 2, 2], [True, True, True, False, True, False])
    assert cut_after_eos(rows, []) == ([3, 3, 1, 0, 4, 2], [False] * 6)
    assert cut_after_eos(torch.tensor([[7, 9, 9]]).tolist(), torch.tensor([9])) == ([2], [True])


def test_the_eos_cut_of_a_tensor_is_the_cut_of_its_rows():
    g = torch.Generator().manual_seed(0)
    completion = torch.randint(0, 6, (64, 9), generator=g)  # eos ids 0 and 1: most rows have one, some not
    mask, ended = completion_mask(completion, [0, 1])
    lengths, has = cut_after_eos(completion.tolist(), [0, 1])
    assert mask.dtype == torch.bool and mask.shape == completion.shape and ended.dtype == torch.bool
    assert mask.sum(1).tolist() == lengths and ended.tolist() == has and not all(has) and any(has)
    # the cumulative-sum form the diagnostics and the omega analysis used before (issue 53)
    is_eos = torch.isin(completion, torch.tensor([0, 1]))
    assert torch.equal(mask, ~((torch.cumsum(is_eos.long(), 1) - is_eos.long()) > 0))
    assert torch.equal(ended, is_eos.any(1))


def test_per_row_sampling_follows_the_config_or_refuses():
    cfg = sampling_config(temperature=0.7, top_p=0.9, top_k=0, max_new_tokens=5, eos_token_id=[2], pad_token_id=0,
                          repetition_penalty=1.2)
    greedy, sampler = per_row_sampling(cfg, [11, 12, 13])
    assert (sampler.temperature, sampler.top_p, len(sampler.generators)) == (0.7, 0.9, 3)
    assert greedy.do_sample is False and cfg.do_sample is True  # the caller's config is not changed
    assert all(getattr(greedy, k) is None for k in ("temperature", "top_p", "top_k", "min_p"))
    # a logits processor runs before the sampler, as it does in generate's own sampling
    assert (greedy.repetition_penalty, greedy.max_new_tokens, greedy.eos_token_id) == (1.2, 5, [2])
    for change in (dict(top_k=5), dict(min_p=0.1)):
        bad = sampling_config(temperature=0.7, max_new_tokens=5, **change)
        with pytest.raises(ValueError, match=f"temperature and top-p only; {next(iter(change))}="):
            per_row_sampling(bad, [1])
