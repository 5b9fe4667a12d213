"""How many negatives get a ResRL weight from their own group's positives, under the authors'
micro-batch grouping (`algorithm.resrl.grouping: micro-batch`, resrl.core.grouping) and under whole
groups (spec §2).

For every negative response of a mixed prompt group (a correct and a wrong response), it counts
whether its weight group holds (a) at least one positive of its prompt — it gets a residual weight,
against a partial group when (b) fails — and (b) all of its prompt's positives — the weight of the
paper's method. Otherwise it keeps ω = 1 (plain GRPO penalty). Whole groups give (a) = (b) = 1.

    # the authors' batch (256 prompts × 4 rollouts over 8 ranks, micro-batches of 4 rows), synthetic lengths
    python benchmarks/resrl_grouping.py --layout authors
    # the demo's batch (16 prompts × 8 per round), groups sampled from a demo warm start
    python benchmarks/resrl_grouping.py --layout demo --model runs/demo-warm/warm_start

The synthetic layout draws, per prompt, a prompt length (log-normal, median 160 tokens, as math
word problems) and a success rate (Beta(0.6, 0.6): many easy and hard prompts, some mixed), and per
response a correctness and a length (log-normal, median 1500, capped at 4096; wrong answers 30 %
longer). The fractions barely depend on these choices: what sets them is that veRL's balance deals
a prompt's rows to different ranks (its partitions are made by length, not by prompt) and that a
micro-batch holds 4 rows.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from resrl.core.grouping import grouping_coverage, micro_batch_groups


def coverage(gidx: torch.Tensor, positive: torch.Tensor, lengths: torch.Tensor, micro: int, ranks: int) -> dict:
    ids = micro_batch_groups(gidx, lengths, micro, ranks)
    return grouping_coverage(gidx, ids, positive)


def synthetic_batch(prompts: int, n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    prompt_len = torch.exp(torch.log(torch.tensor(160.0)) + 0.5 * torch.randn(prompts, generator=g)).long().clamp(20, 2048)
    torch.manual_seed(seed)                              # torch.distributions draws from the global RNG
    p = torch.distributions.Beta(0.6, 0.6).sample((prompts,))
    correct = torch.rand(prompts, n, generator=g) < p[:, None]
    resp = torch.exp(torch.log(torch.tensor(1500.0)) + 0.7 * torch.randn(prompts, n, generator=g))
    resp = torch.where(correct, resp, 1.3 * resp).long().clamp(16, 4096)
    gidx = torch.arange(prompts).repeat_interleave(n)
    return gidx, correct.flatten(), resp.flatten(), prompt_len.repeat_interleave(n)


def summarize(rows: list[dict]) -> dict:
    out = {}
    for key in ("grouping_neg_with_own_positive_frac", "grouping_neg_with_all_positives_frac"):
        vals = [r[key] for r in rows]
        out[key] = {"mean": round(statistics.mean(vals), 4), "sd": round(statistics.pstdev(vals), 4)}
    out["mixed_negatives_per_batch"] = round(statistics.mean(r["grouping_mixed_negatives"] for r in rows), 1)
    out["batches"] = len(rows)
    return out


def authors(batches: int, seed: int) -> dict:
    res = {}
    settings = {"authors: 256 prompts x 4, 8 ranks, micro 4 (prompt + response lengths)": (256, 4, 4, 8, True),
                "same, response lengths only (what the TRL engine passes)": (256, 4, 4, 8, False),
                "one rank (no reorder), micro 4 = rollout_n": (256, 4, 4, 1, True),
                "8 rollouts per prompt, 8 ranks, micro 4": (256, 8, 4, 8, True)}
    for name, (prompts, n, micro, ranks, with_prompt) in settings.items():
        rows = []
        for b in range(batches):
            gidx, pos, resp, plen = synthetic_batch(prompts, n, seed + b)
            lengths = resp + plen if with_prompt else resp
            rows.append(coverage(gidx, pos, lengths, micro, ranks))
        res[name] = summarize(rows)
    return res


def demo(model_dir: str, rounds: int, prompts: int, n: int, seed: int) -> dict:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from resrl.diagnose.model_pass import sample_group, stable_seed
    from resrl.diagnose.tasks import load_task
    from resrl.models.generators import eos_token_ids

    tok = AutoTokenizer.from_pretrained(model_dir)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    eos = eos_token_ids(model, tok)
    task = load_task("chain", tok, rounds * prompts, seed, None, None, None, None)
    gidx, pos, resp, plen = [], [], [], []
    for i, prompt in enumerate(task.prompts):
        group = sample_group(model, tok, prompt, n, 1.0, 1.0, 16, stable_seed(seed, task.name, i), eos,
                             task.add_special_tokens)
        texts = tok.batch_decode([row[:int(m.sum())] for row, m in zip(group.completion_ids.tolist(),
                                                                        group.completion_mask)], skip_special_tokens=True)
        r = torch.tensor(task.reward(texts, [task.answers[i]] * len(texts)))
        gidx.append(torch.full((n,), i))
        pos.append(r > 0)
        resp.append(group.completion_mask.sum(dim=1))
        plen.append(torch.full((n,), int(group.input_ids.shape[1] - group.completion_length)))
    gidx, pos, resp, plen = (torch.cat(x) for x in (gidx, pos, resp, plen))
    res = {"success_rate": round(float(pos.double().mean()), 3)}
    for name, (micro, ranks) in {"demo round (16 x 8), 8 ranks, micro 4": (4, 8),
                                 "demo round, one rank, micro 4": (4, 1),
                                 "demo round, one rank, micro 8 = G": (8, 1)}.items():
        rows = []
        for k in range(rounds):
            sl = slice(k * prompts * n, (k + 1) * prompts * n)
            rows.append(coverage(gidx[sl], pos[sl], resp[sl] + plen[sl], micro, ranks))
        res[name] = summarize(rows)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layout", choices=("authors", "demo"), default="authors")
    ap.add_argument("--model", help="demo warm start directory (--layout demo)")
    ap.add_argument("--batches", type=int, default=20, help="synthetic batches (authors) / rounds (demo)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    t0 = time.time()
    if args.layout == "authors":
        res = authors(args.batches, args.seed)
    else:
        if not args.model:
            ap.error("--layout demo needs --model")
        res = demo(args.model, args.batches, 16, 8, args.seed)
    res["seconds"] = round(time.time() - t0, 1)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
