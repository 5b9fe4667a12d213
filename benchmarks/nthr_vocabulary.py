"""NTHR's α over the exact V*ₓ vocabulary (the paper's, §7.4) against the top-K softmax sketch.

For every group with a correct and a wrong response, the wrong tokens' score s⁻ (Eq. 7) and NTHR's
selection (the paper's defaults: τ = min s̄⁺, η = 2|0.5 − p|) are computed three ways:

    exact V*ₓ   α over the token ids generated in the group's responses, exact probabilities (default)
    top-K       α over each token's K most probable ids plus its own id (vocabulary=topk), K = 32, 8, 4
    full V      α over the whole vocabulary (the Lemma 1 value neither method restricts)

and the top-K sketch is compared with exact V*ₓ: Spearman of s⁻, the largest error relative to the
largest |s⁻|, and the fraction of wrong tokens whose selection differs. Two sources of groups:

    python benchmarks/nthr_vocabulary.py --model runs/demo-warm/warm_start     # a trained model + the demo task
    python benchmarks/nthr_vocabulary.py --synthetic                            # a peaked softmax over V = 16384

The synthetic groups stand in for an LLM's head (none is on the machine this was written on): a
Zipf-like prior over the vocabulary plus a state-dependent part, tokens sampled from the softmax,
so that the top-K mass spreads like a language model's (its quartiles are printed with the result).
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from resrl.core import NTHRConfig, grpo_advantages, nthr_token_advantages
from resrl.core.interference import HeadSketch, head_sketch, interference_scores, sketch_from_logits
from resrl.core.negative_weighting import exact_vocabulary_scores


def spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    ra = torch.argsort(torch.argsort(a)).double()
    rb = torch.argsort(torch.argsort(b)).double()
    ra, rb = ra - ra.mean(), rb - rb.mean()
    return float((ra @ rb) / (ra.norm() * rb.norm()).clamp(min=1e-30))


def compare(sketch: HeadSketch, mask, rewards, gidx, ks=(32, 8, 4)) -> dict:
    """Scores and selections of the exact V*ₓ vocabulary against top-K sketches and the full vocabulary."""
    adv = grpo_advantages(rewards.double(), gidx).float()
    is_pos = adv > 0
    s_exact, _, vocab = exact_vocabulary_scores(sketch, mask, is_pos, gidx)
    neg = mask & ~is_pos[:, None] & torch.isfinite(s_exact)
    ref = s_exact[neg]
    sel_exact = nthr_token_advantages(sketch, mask, adv, gidx, NTHRConfig())[0][neg] != adv[:, None].expand_as(mask)[neg]
    out = {"wrong_tokens": int(neg.sum()), "vocab_star_mean": float(vocab[vocab > 0].mean()),
           "selected_frac_exact": float(sel_exact.double().mean())}
    V = sketch.logits.shape[-1] if sketch.logits is not None else sketch.weight.shape[0]
    for k in ks:
        sk = sketch if k == sketch.topk_ids.shape[-1] else resketch(sketch, k)
        s_k, _ = interference_scores(sk, mask, is_pos, gidx)
        sel_k = nthr_token_advantages(sk, mask, adv, gidx, NTHRConfig(vocabulary="topk"))[0][neg] \
            != adv[:, None].expand_as(mask)[neg]
        top_mass = sk.topk_probs[mask].double().sum(dim=-1)
        out[f"top{k}"] = {**errors(s_k[neg], ref), "selection_differs_frac": float((sel_k != sel_exact).double().mean()),
                          "selected_frac": float(sel_k.double().mean()),
                          "topk_mass_quartiles": [round(float(q), 4) for q in torch.quantile(
                              top_mass, torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64))]}
    out["full_V_vs_exact_vstar"] = errors(full_vocabulary_scores(sketch, mask, is_pos, gidx, V)[neg], ref)
    return out


def errors(est: torch.Tensor, ref: torch.Tensor) -> dict:
    return {"spearman_vs_exact": round(spearman(est, ref), 4),
            "max_abs_err_over_max_abs": round(float((est - ref).abs().max() / ref.abs().max()), 4),
            "median_abs_err_over_median_abs": round(float((est - ref).abs().median() / ref.abs().median()), 4)}


def full_vocabulary_scores(sketch: HeadSketch, mask, is_pos, gidx, V: int) -> torch.Tensor:
    """s⁻ with α over the whole vocabulary (dense, one group at a time): Lemma 1's own value."""
    out = torch.full(mask.shape, float("nan"), dtype=torch.float64)
    ids = torch.arange(V)
    for g in gidx.unique():
        b, t = (mask & (gidx == g)[:, None]).nonzero(as_tuple=True)
        E = -sketch.probs_at(b, t, ids, torch.float64)
        E[torch.arange(b.numel()), sketch.targets[b, t]] += 1.0
        H = sketch.states[b, t].double()
        p = is_pos[b]
        M = E[p].T @ H[p]
        out[b, t] = ((E @ M) * H).sum(dim=1)
    return out


def resketch(sketch: HeadSketch, k: int) -> HeadSketch:
    """The same tokens with a top-k sketch (exact probabilities kept for the V*ₓ path)."""
    if sketch.logits is not None:
        return sketch_from_logits(sketch.states, sketch.logits, sketch.targets, k)
    return head_sketch(sketch.states, sketch.weight, sketch.bias, sketch.targets, k, sketch.temperature)


def synthetic(groups: int, G: int, T: int, V: int, d: int, seed: int, ks) -> dict:
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(V, d, generator=g, dtype=torch.float64) / d ** 0.5
    prior = -1.1 * torch.log(torch.arange(1, V + 1, dtype=torch.float64))       # Zipf-like unigram prior
    prior = prior[torch.randperm(V, generator=g)]
    B = groups * G
    states = torch.randn(B, T, d, generator=g, dtype=torch.float64) * 2.0
    shared = torch.randn(groups, 1, 1, d, generator=g, dtype=torch.float64) * 2.0   # a group's common context
    states = (states.view(groups, G, T, d) + shared).view(B, T, d)
    logits = states @ W.T * 1.5 + prior
    targets = torch.multinomial(torch.softmax(logits.view(-1, V), -1), 1, generator=g).view(B, T)   # sampled from π
    mask = torch.ones(B, T, dtype=torch.bool)
    mask[:, T // 2:] = torch.rand(B, 1, generator=g) < 0.5                        # varied lengths
    rewards = (torch.rand(B, generator=g) < 0.5).double()
    gidx = torch.arange(groups).repeat_interleave(G)
    for k in range(groups):                                                      # every group mixed
        rewards[k * G], rewards[k * G + 1] = 1.0, 0.0
    sk = head_sketch(states, W * 1.5, prior, targets, max(ks))                  # the same logits, via the head
    return compare(sk, mask, rewards, gidx, ks)


def from_model(model_dir: str, data: str, limit: int, G: int, max_new_tokens: int, temperature: float, seed: int,
               ks) -> dict:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from resrl.diagnose.model_pass import forward_group, sample_group, stable_seed
    from resrl.diagnose.tasks import load_task
    from resrl.models.generators import eos_token_ids

    tok = AutoTokenizer.from_pretrained(model_dir)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    eos = eos_token_ids(model, tok)
    task = load_task(data, tok, limit, seed, None, None, None, None)
    sketches, masks, rewards, gidx, C = [], [], [], [], 0
    for i, prompt in enumerate(task.prompts):
        group = sample_group(model, tok, prompt, G, temperature, 1.0, max_new_tokens, stable_seed(seed, task.name, i),
                             eos, task.add_special_tokens)
        texts = tok.batch_decode([row[:int(m.sum())] for row, m in zip(group.completion_ids.tolist(),
                                                                        group.completion_mask)], skip_special_tokens=True)
        r = torch.tensor(task.reward(texts, [task.answers[i]] * len(texts)), dtype=torch.float64)
        if not (0 < int((r > 0).sum()) < len(r)):
            continue
        fw = forward_group(model, group)
        sketches.append(sketch_from_logits(fw.head_input[:, :-1].double(), fw.logits.double(), group.completion_ids,
                                           max(ks)))
        masks.append(group.completion_mask.bool())
        rewards.append(r)
        gidx.append(torch.full((len(r),), len(gidx), dtype=torch.long))
        C = max(C, group.completion_length)
    from resrl.core.interference import cat_sketches

    sk = cat_sketches(sketches, C)
    mask = torch.cat([torch.nn.functional.pad(m, (0, C - m.shape[1])) for m in masks])
    out = compare(sk, mask, torch.cat(rewards), torch.cat(gidx), ks)
    out["mixed_groups"] = len(masks)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="a local causal-LM directory (e.g. the demo's warm_start)")
    ap.add_argument("--data", default="chain")
    ap.add_argument("--limit", type=int, default=64)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--synthetic", action="store_true")
    ap.add_argument("--vocab", type=int, default=16384)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    t0 = time.time()
    ks = (32, 8, 4)
    if args.synthetic:
        res = synthetic(groups=8, G=8, T=64, V=args.vocab, d=128, seed=args.seed, ks=ks)
    elif args.model:
        res = from_model(args.model, args.data, args.limit, args.group_size, args.max_new_tokens, args.temperature,
                         args.seed, ks)
    else:
        ap.error("give --model DIR or --synthetic")
    res["seconds"] = round(time.time() - t0, 1)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
