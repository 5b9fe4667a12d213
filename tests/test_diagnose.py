"""`resrl diagnose`: the theory checks on random float64 data, the interference against brute-force
autograd on a tiny model, the LLD step on a copy, and the command end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from resrl.core import ResRLConfig, resrl_residual_details, resrl_token_advantages
from resrl.diagnose import theory
from resrl.diagnose.lld import LLDBatch, lld_step, micro_batch_weight
from resrl.diagnose.measure import measure_group
from resrl.diagnose.model_pass import SampledGroup, forward_group
from resrl.engines.hidden import align_response_hidden


# ---- Lemma 1 -------------------------------------------------------------------------------------

@pytest.mark.parametrize("bias", [False, True])
def test_lemma1_autograd_equals_outer_product_float64(bias):
    g = torch.Generator().manual_seed(0)
    V, d = 40, 12
    W = torch.randn(V, d, generator=g, dtype=torch.float64)
    b = torch.randn(V, generator=g, dtype=torch.float64) if bias else None
    xs = torch.randn(5, d, generator=g, dtype=torch.float64)
    ys = torch.randint(0, V, (5,), generator=g)
    deltas = theory.logit_gradients(xs, W, b, ys)
    assert torch.allclose(deltas.sum(dim=1), torch.zeros(5, dtype=torch.float64), atol=1e-12)  # softmax − onehot
    worst = 0.0
    for i in range(5):
        for j in range(i + 1, 5):
            gi = theory.head_gradient_autograd(xs[i], W, b, int(ys[i]))
            gj = theory.head_gradient_autograd(xs[j], W, b, int(ys[j]))
            errs = theory.lemma1_errors(gi, gj, deltas[i], xs[i], deltas[j], xs[j])
            worst = max(worst, *errs.values())
    assert worst <= 1e-9


def test_lemma1_check_detects_a_wrong_delta():
    g = torch.Generator().manual_seed(1)
    W = torch.randn(30, 8, generator=g, dtype=torch.float64)
    x = torch.randn(2, 8, generator=g, dtype=torch.float64)
    y = torch.tensor([3, 7])
    d = theory.logit_gradients(x, W, None, y)
    ga = theory.head_gradient_autograd(x[0], W, None, 3)
    gb = theory.head_gradient_autograd(x[1], W, None, 7)
    wrong = torch.softmax(x[0] @ W.T, dim=-1)  # forgot the − onehot(y)
    errs = theory.lemma1_errors(ga, gb, wrong, x[0], d[1], x[1])
    assert errs["grad_a"] > 1e-3


# ---- Theorem 1 -------------------------------------------------------------------------------------

def _low_rank_group(seed=0, G=6, T=24, d=16, rank=3):
    """float64 penultimate states of one group: positives near a low-rank subspace, negatives mixed."""
    g = torch.Generator().manual_seed(seed)
    basis = torch.randn(rank, d, generator=g, dtype=torch.float64)
    h = torch.randn(G, T, rank, generator=g, dtype=torch.float64) @ basis
    h = h + 0.3 * torch.randn(G, T, d, generator=g, dtype=torch.float64)
    h[G // 2:] += 0.8 * torch.randn(G - G // 2, T, d, generator=g, dtype=torch.float64)
    mask = torch.ones(G, T, dtype=torch.bool)
    mask[1, T - 5:] = False
    adv = torch.tensor([1.0, 0.5, 0.2, -0.4, -0.6, -0.7], dtype=torch.float64)[:G]
    return h, mask, adv, torch.zeros(G, dtype=torch.long)


def _x_and_details(h, mask, adv, gidx, cfg):
    det = resrl_residual_details(h, mask, adv, gidx, cfg)
    x = torch.nn.functional.layer_norm(h, h.shape[-1:], eps=cfg.ln_eps) - det.mean[0]
    neg = mask & (adv <= 0)[:, None]
    pos = mask & (adv > 0)[:, None]
    k = int(det.effective_rank[0])
    return det, x[neg], x[pos], det.basis[0][:, :k], det.residual[neg], det.residual[pos]


@pytest.mark.parametrize("svd", ["exact", "randomized"])
@pytest.mark.parametrize("rank", [2, 5, 64])
def test_theorem1_holds_on_every_pair_float64(svd, rank):
    h, mask, adv, gidx = _low_rank_group()
    cfg = ResRLConfig(rank=rank, svd=svd)
    _, xn, xp, V, rn, rp = _x_and_details(h, mask, adv, gidx, cfg)
    bound, actual = theory.theorem1_bound(xn, xp, V)
    s = theory.theorem1_summary(bound, actual, xn, xp)
    assert s["pairs"] == xn.shape[0] * xp.shape[0] > 1000
    assert s["violations"] == 0
    assert s["tightness_median"] >= 1.0
    # ResRL's residual is the explicit projection's, to float64 rounding, on negatives and positives
    assert float(theory.residual_abs_errors(torch.cat([xn, xp]), V, torch.cat([rn, rp])).max()) <= 1e-12


def test_residual_check_reports_a_planted_wrong_projector():
    h, mask, adv, gidx = _low_rank_group()
    _, xn, xp, V, rn, rp = _x_and_details(h, mask, adv, gidx, ResRLConfig(rank=3, svd="exact"))
    # a projector onto another subspace than the one the residuals were computed against
    wrong = torch.linalg.qr(torch.randn(V.shape[0], V.shape[1], generator=torch.Generator().manual_seed(5),
                                        dtype=torch.float64)).Q
    assert float(theory.residual_abs_errors(xn, wrong, rn).max()) > 1e-2
    assert float(theory.residual_abs_errors(xn, V, rn).max()) <= 1e-12


def test_theorem1_counts_a_pair_above_the_bound():
    """The summary's comparison itself: a pair whose |⟨x_n, x_p⟩| exceeds the bound by more than the
    rounding scale is a violation; by less, it is not."""
    xn, xp = torch.tensor([[1.0, 0.0]], dtype=torch.float64), torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    actual = torch.tensor([[1.0]], dtype=torch.float64)
    tol = theory.theorem1_rtol(2, torch.float64)
    assert theory.theorem1_summary(actual - 10 * tol, actual, xn, xp)["violations"] == 1
    assert theory.theorem1_summary(actual - tol / 10, actual, xn, xp)["violations"] == 0


def test_residual_details_match_an_explicit_projection():
    """R from the core (fused ‖x‖² − ‖Vᵀx‖², never materialising x) = ‖(I − VVᵀ)x‖²/d computed
    explicitly; and the negatives' R is what the gate of resrl_token_advantages saw (ω ordering)."""
    h, mask, adv, gidx = _low_rank_group(seed=3)
    cfg = ResRLConfig(rank=4, svd="exact")
    det = resrl_residual_details(h, mask, adv, gidx, cfg)
    x = torch.nn.functional.layer_norm(h, h.shape[-1:], eps=cfg.ln_eps) - det.mean[0]
    V = det.basis[0][:, :int(det.effective_rank[0])]
    explicit = (x - x @ V @ V.T).square().sum(-1) / h.shape[-1]
    assert torch.allclose(det.residual[mask], explicit[mask], rtol=1e-9, atol=1e-12)
    assert torch.isnan(det.residual[~mask]).all()
    token_adv, _ = resrl_token_advantages(h, mask, adv, gidx, cfg)
    neg = mask & (adv < 0)[:, None]
    omega = (token_adv.double() / adv[:, None])[neg]
    R = det.residual[neg]
    order = torch.argsort(R)
    assert bool((omega[order].diff() >= -1e-6).all())  # ω is non-decreasing in R (the gate)


# ---- interference on a tiny model vs brute-force autograd -------------------------------------------

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from train_helpers import build_small_model
    from transformers import AutoModelForCausalLM

    path = build_small_model(tmp_path_factory.mktemp("tiny") / "model")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.eval()
    return path, model


def _handmade_group(vocab, G=4, prompt_len=5, C=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    prompt = torch.randint(5, vocab, (1, prompt_len), generator=g).repeat(G, 1)
    completion = torch.randint(5, vocab, (G, C), generator=g)
    cmask = torch.ones(G, C, dtype=torch.bool)
    cmask[1, C - 3:] = False
    cmask[3, C - 1:] = False
    ids = torch.cat([prompt, completion], dim=1)
    attn = torch.cat([torch.ones(G, prompt_len, dtype=torch.long), cmask.long()], dim=1)
    return SampledGroup(ids, attn, C, cmask, torch.zeros(G, dtype=torch.bool))


def test_interference_equals_brute_force_autograd(tiny):
    _, model = tiny
    head = model.get_output_embeddings()
    group = _handmade_group(head.weight.shape[0])
    rewards = torch.tensor([1.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    fw = forward_group(model, group)
    m = measure_group(0, group, fw, rewards, head.weight, None, ResRLConfig(rank=4))
    assert m is not None and m.head_logits_rel_error < 1e-5

    # brute force: the base model's own last hidden state (not our hook), autograd per token
    with torch.no_grad():
        last = model.model(input_ids=group.input_ids, attention_mask=group.attention_mask).last_hidden_state
    C = group.completion_length
    xh = last[:, -C - 1:-1].double()
    y = group.completion_ids
    W = head.weight.detach().double()

    def grad(b, t):
        Wl = W.clone().requires_grad_(True)
        loss = -torch.log_softmax(Wl @ xh[b, t], dim=-1)[y[b, t]]
        return torch.autograd.grad(loss, Wl)[0]

    mask = group.completion_mask
    pos = [(b, t) for b in (0, 2) for t in range(C) if mask[b, t]]
    neg = [(b, t) for b in (1, 3) for t in range(C) if mask[b, t]]
    g_pos_sum = sum(grad(b, t) for b, t in pos)
    brute = torch.tensor([float((grad(b, t) * g_pos_sum).sum()) for b, t in neg], dtype=torch.float64)
    assert m.interference.shape == brute.shape
    assert torch.allclose(m.interference, brute, rtol=1e-9, atol=1e-12 * float(brute.abs().max()))
    # ResRL's side for both alignments: finite residuals and weights, zero Theorem 1 violations
    for a in ("predicting", "token"):
        am = m.by_alignment[a]
        assert am.residual.shape == brute.shape and torch.isfinite(am.residual).all()
        assert am.theorem1_violations == 0 and am.theorem1_pairs == len(neg) * len(pos)
        assert ((am.omega >= 0.1 - 1e-6) & (am.omega <= 1 + 1e-6)).all()


def test_measure_group_skips_groups_without_both_signs(tiny):
    _, model = tiny
    head = model.get_output_embeddings()
    group = _handmade_group(head.weight.shape[0])
    fw = forward_group(model, group)
    assert measure_group(0, group, fw, torch.ones(4, dtype=torch.float64), head.weight, None, ResRLConfig()) is None


# ---- LLD ---------------------------------------------------------------------------------------------

def test_lld_step_runs_on_a_copy_and_moves_the_positives(tiny):
    _, model = tiny
    before = {k: v.clone() for k, v in model.state_dict().items()}
    groups = [_handmade_group(model.get_output_embeddings().weight.shape[0], seed=s) for s in (0, 1)]
    rewards = [torch.tensor([1.0, 0.0, 1.0, 0.0]), torch.tensor([0.0, 1.0, 0.0, 0.0])]
    hidden = [align_response_hidden(forward_group(model, g).penultimate, g.completion_length) for g in groups]
    batch = LLDBatch(groups, rewards, hidden)
    results = {a: lld_step(model, batch, a, lr=0.5, resrl_config=ResRLConfig(rank=4), max_response_length=7)
               for a in ("grpo", "psr", "resrl")}
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), f"{k} changed"
    for r in results.values():
        assert r["num_positive"] == 3 and np.isfinite(r["mean_delta"]) and 0 <= r["frac_positive_decreased"] <= 1
    # PSR pushes only the positives up: at a small step their likelihood must rise
    small = lld_step(model, batch, "psr", lr=1e-3, max_response_length=7)
    assert small["mean_delta"] > 0 and small["frac_positive_decreased"] == 0.0
    assert results["grpo"]["mean_delta"] != results["resrl"]["mean_delta"]


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"])
def test_micro_batch_weights_reproduce_the_full_batch_loss(agg):
    from resrl.core.loss import aggregate_loss

    g = torch.Generator().manual_seed(0)
    loss = torch.randn(6, 9, generator=g, dtype=torch.float64)
    mask = torch.rand(6, 9, generator=g) > 0.3
    mask[4] = False  # a sequence with no token
    full = aggregate_loss(loss, mask, agg, 9)
    n_seq, n_tok = int((mask.sum(1) > 0).sum()), int(mask.sum())
    parts = sum(aggregate_loss(loss[s], mask[s], agg, 9) * micro_batch_weight(mask[s], n_seq, n_tok, agg)
                for s in (slice(0, 2), slice(2, 5), slice(5, 6)))
    assert torch.allclose(parts, full, rtol=1e-12)


# ---- the command -------------------------------------------------------------------------------------

def test_diagnose_command_end_to_end(tiny, tmp_path):
    from resrl.cli import main

    path, _ = tiny
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"problem": f"{i}+1=", "answer": str(i + 1)}) + "\n" for i in range(5)))
    out = tmp_path / "out"
    rc = main(["diagnose", "--model", path, "--data", str(data), "--reward", "train_helpers:length_reward",
               "--limit", "5", "--group-size", "4", "--max-new-tokens", "6", "--out", str(out), "--bootstrap", "50",
               "--lld-algorithms", "grpo,resrl,nthr", "--no-progress", "--rank", "8",
               # K >= the vocabulary: the sketch holds the whole softmax, so Î must equal I (to the
               # float32 model's logits); a smaller K makes the error depend on what was sampled
               "--interference-topk", "1000"])
    assert rc == 0
    r = json.loads((out / "diagnose.json").read_text())
    for key in ("lemma1_max_rel_error", "theorem1_violations", "theorem1_pairs", "spearman_residual_vs_interference",
                "spearman_residual_vs_interference_low", "spearman_residual_vs_interference_high",
                "spearman_residual_vs_alignment", "spearman_residual_vs_alignment_low",
                "spearman_residual_vs_alignment_high", "spearman_residual_vs_abs_interference", "lld"):
        assert key in r
    assert r["mixed_groups"] >= 1
    assert r["lemma1_max_rel_error"] <= 1e-9
    assert r["theorem1_violations"] == 0 and r["theorem1_pairs"] > 0
    assert r["residual_max_abs_error"] <= 1e-10  # ResRL's R = the explicit ‖(I − P)x‖²/d (float64)
    assert set(r["lld"]) == {"grpo", "resrl", "nthr", "resrl/resrl.weighting=interference"}
    assert "frac_positive_decreased" in r["lld"]["resrl"]
    assert set(r["by_alignment"]) == {"predicting", "token"}
    w = r["interference_weighting"]  # the new weighting's estimate is measured against the exact I
    assert w["spearman_estimate_vs_interference"]["n"] == r["negative_tokens"] > 0
    assert w["estimate_max_abs_error_rel"] < 1e-4 and 0.1 - 1e-9 <= w["mean_omega"] <= 1
    assert "interference" in (out / "report.md").read_text()
    assert len((out / "samples.jsonl").read_text().splitlines()) == 5 * 4
    for name in ("report.md", "residual_vs_interference.png", "omega_hist.png", "lld.png"):
        assert (out / name).stat().st_size > 0


def test_token_classes_of_the_chain_task():
    from resrl.diagnose.runner import _token_classes
    from resrl.models.tiny import IM_END, build_char_tokenizer

    tok = build_char_tokenizer("0123456789+=")
    rows = ["3+5=8" + IM_END, "3+4=7" + IM_END, "9" + IM_END + IM_END]
    ids = [tok(r, add_special_tokens=False)["input_ids"] for r in rows]
    C = max(map(len, ids))
    pad = tok.pad_token_id
    comp = torch.tensor([i + [pad] * (C - len(i)) for i in ids])
    cmask = torch.tensor([[j < len(i) - (1 if r.endswith(IM_END + IM_END) else 0) for j in range(C)]
                          for i, r in zip(ids, rows)])
    group = SampledGroup(comp, torch.ones_like(comp), C, cmask, torch.zeros(3, dtype=torch.bool))
    classes = _token_classes(tok, group, torch.tensor([0.0, 1.0, 0.0]), "3+4=7", IM_END)
    assert classes[0].tolist() == [0, 0, 1, 2, 2, 2]          # "3+" shared, "5" first wrong, rest after
    assert (classes[1] == -1).all()                            # a correct row has no classes
    assert classes[2, :2].tolist() == [1, 2]                   # wrong from the first token


def test_theorem1_in_blocks_counts_every_pair(tiny):
    _, model = tiny
    head = model.get_output_embeddings()
    group = _handmade_group(head.weight.shape[0], C=9)
    fw = forward_group(model, group)
    rewards = torch.tensor([1.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    whole = measure_group(0, group, fw, rewards, head.weight, None, ResRLConfig(rank=4))
    blocks = measure_group(0, group, fw, rewards, head.weight, None, ResRLConfig(rank=4), pair_block=3)
    for a in ("predicting", "token"):
        w, b = whole.by_alignment[a], blocks.by_alignment[a]
        assert (w.theorem1_pairs, w.theorem1_violations) == (b.theorem1_pairs, b.theorem1_violations)
        assert torch.allclose(torch.sort(w.tightness_sample).values, torch.sort(b.tightness_sample).values, rtol=1e-12)


def test_a_data_file_seeds_its_groups_by_content_not_path(tmp_path):
    """The same rows at two paths sample the same groups (the end-to-end test's data lives in a new
    temporary directory on every run; a seed from the path made its numbers differ run to run)."""
    from resrl.diagnose.tasks import load_task
    from resrl.models.tiny import build_char_tokenizer

    rows = "".join(json.dumps({"problem": f"{i}+1=", "answer": str(i + 1)}) + "\n" for i in range(3))
    keys = []
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "data.jsonl").write_text(rows)
        task = load_task(str(tmp_path / sub / "data.jsonl"), build_char_tokenizer(), reward="exact")
        keys.append(task.seed_key)
    assert keys[0] == keys[1] and keys[0].startswith("sha256:")
    (tmp_path / "a" / "data.jsonl").write_text(rows.replace("0+1", "5+1"))
    assert load_task(str(tmp_path / "a" / "data.jsonl"), build_char_tokenizer(), reward="exact").seed_key != keys[0]
