"""The theory ResRL rests on (spec §6), as checks on tensors. Pure functions, float64 in and out.

Notation (one prompt group): a negative token n and a positive token p, the output head
z = W x̂ (+ b) with W (V, d_head), and the gradient of the token's log-likelihood loss
ℓ = −log softmax(z)[y] with respect to the logits, δ = softmax(z) − onehot(y).

    Lemma 1      ∇_W ℓ = δ x̂ᵀ   and   ⟨∇_W ℓ_n, ∇_W ℓ_p⟩ = ⟨δ_n, δ_p⟩ · ⟨x̂_n, x̂_p⟩          (exact)
    interference I(n) = Σ_p ⟨g_n, g_p⟩ = Σ_p ⟨δ_n, δ_p⟩⟨x̂_n, x̂_p⟩   over the group's positive tokens
    Theorem 1    |⟨x_n, x_p⟩| ≤ ‖P x_p‖ √(‖x_n‖² − d e(x_n)) + ‖x_n‖ √(d e(x_p))
                 with P = V_k V_kᵀ, e(x) = ‖(I − P) x‖² / d (ResRL's residual energy R)

Two different representations appear, and they are not the same vector: x̂ is the input of the
output head (the final norm's output, what Lemma 1 is about); ResRL's x = LN(h) − μ+ is built from
the penultimate layer's state h (spec §2). The theorem is checked in ResRL's space (where R
lives); the interference is measured in the head's space (where the gradient lives). Each check
compares at the rounding scale of what it computes (`theorem1_rtol`, `residual_abs_errors`).

Memory: nothing here forms a `V × d` gradient. The interference uses the factorisation, in chunks
of negatives: (Δ_n Δ_pᵀ) ⊙ (X̂_n X̂_pᵀ) summed over p — O(chunk · (V + P)) memory.
"""

from __future__ import annotations

import torch
from torch import Tensor


def logit_gradients(head_input: Tensor, weight: Tensor, bias: Tensor | None, targets: Tensor) -> Tensor:
    """δ = softmax(z) − onehot(y) for z = x̂ Wᵀ + b: the gradient of −log softmax(z)[y] w.r.t. z.

    head_input (N, d_head), weight (V, d_head), bias (V,) or None, targets (N,) int64 -> (N, V),
    in the dtype of `head_input`."""
    z = head_input @ weight.to(head_input.dtype).T
    if bias is not None:
        z = z + bias.to(head_input.dtype)
    delta = torch.softmax(z, dim=-1)
    delta[torch.arange(targets.numel(), device=delta.device), targets] -= 1.0
    return delta


def head_gradient_autograd(head_input: Tensor, weight: Tensor, bias: Tensor | None, target: int) -> Tensor:
    """∇_W of −log softmax(W x̂ + b)[y] by autograd, for ONE token (a `V × d_head` tensor: use on a
    small subset only). head_input (d_head,), weight (V, d_head) -> (V, d_head) in float64."""
    W = weight.detach().double().clone().requires_grad_(True)
    x = head_input.detach().double()
    z = W @ x
    if bias is not None:
        z = z + bias.detach().double()
    loss = -torch.log_softmax(z, dim=-1)[int(target)]
    (grad,) = torch.autograd.grad(loss, W)
    return grad


def lemma1_errors(grad_a: Tensor, grad_b: Tensor, delta_a: Tensor, x_a: Tensor, delta_b: Tensor,
                  x_b: Tensor) -> dict[str, float]:
    """Relative errors of Lemma 1 for one pair of tokens.

    grad_a, grad_b (V, d) autograd head gradients; delta_* (V,), x_* (d,). Returns
    {"grad_a", "grad_b": ‖∇ − δxᵀ‖_F / ‖∇‖_F, "inner": |⟨∇a, ∇b⟩ − ⟨δa,δb⟩⟨xa,xb⟩| / (‖∇a‖‖∇b‖)}.
    The inner-product error is relative to ‖∇a‖‖∇b‖ (Cauchy-Schwarz scale): the product itself can
    be ~0 for nearly orthogonal gradients."""
    def rel(grad, delta, x):
        outer = torch.outer(delta.double(), x.double())
        return float(torch.linalg.norm(grad - outer) / torch.linalg.norm(grad).clamp(min=1e-300))

    inner_true = float((grad_a * grad_b).sum())
    inner_fact = float(delta_a.double() @ delta_b.double()) * float(x_a.double() @ x_b.double())
    scale = float(torch.linalg.norm(grad_a) * torch.linalg.norm(grad_b))
    return {"grad_a": rel(grad_a, delta_a, x_a), "grad_b": rel(grad_b, delta_b, x_b),
            "inner": abs(inner_true - inner_fact) / max(scale, 1e-300)}


def interference(delta_neg: Tensor, x_neg: Tensor, delta_pos: Tensor, x_pos: Tensor,
                 chunk: int = 256) -> tuple[Tensor, Tensor]:
    """I(n) = Σ_p ⟨δ_n, δ_p⟩⟨x̂_n, x̂_p⟩ for each negative token, and the representation term alone.

    delta_neg (N, V), x_neg (N, d), delta_pos (P, V), x_pos (P, d) -> (I (N,), Σ_p ⟨x̂_n, x̂_p⟩ (N,)).
    I(n) is the inner product of token n's head gradient with the sum of the positives' head
    gradients (the sign convention does not matter: both are gradients of the same kind); I > 0
    means that pushing token n down also pushes the positives down (spec §6, LLD)."""
    out_i, out_x = [], []
    x_pos_sum = x_pos.sum(dim=0)
    for s in range(0, delta_neg.shape[0], chunk):
        dn, xn = delta_neg[s:s + chunk], x_neg[s:s + chunk]
        out_i.append(((dn @ delta_pos.T) * (xn @ x_pos.T)).sum(dim=1))
        out_x.append(xn @ x_pos_sum)
    if not out_i:
        empty = delta_neg.new_zeros(0)
        return empty, empty
    return torch.cat(out_i), torch.cat(out_x)


def theorem1_bound(x_neg: Tensor, x_pos: Tensor, basis: Tensor) -> tuple[Tensor, Tensor]:
    """Theorem 1's bound and the actual |⟨x_n, x_p⟩| for every (negative, positive) pair.

    x_neg (N, d), x_pos (P, d) in ResRL's space; basis (d, k) the subspace V_k (orthonormal
    columns, zero columns allowed). Returns (bound (N, P), actual (N, P)).

    The bound's two factors ‖P x_n‖ = √(‖x_n‖² − d e(x_n)) and ‖(I − P) x_p‖ = √(d e(x_p)) are
    computed here from the projections themselves, not from ResRL's residual e: a square root
    turns e's absolute rounding error (≈ eps·d, the size of the terms that cancel in
    ‖x‖² − ‖V_kᵀx‖²) into an error ≈ √(eps·d) of the bound — 1e-8 of ‖x_n‖‖x_p‖ in float64 —
    which a check at the products' rounding scale would count as violations. So Theorem 1 checks
    the projector (it holds exactly for any orthogonal projector: a wrong one shows up as
    violations) and `residual_abs_errors` checks ResRL's e against ‖(I − P) x‖²/d on its own scale."""
    proj_neg = x_neg @ basis                                                           # (N, k)
    proj_pos = x_pos @ basis                                                           # (P, k)
    in_neg = torch.linalg.vector_norm(proj_neg, dim=1)                                 # ‖P x_n‖ (N,)
    in_pos = torch.linalg.vector_norm(proj_pos, dim=1)                                 # ‖P x_p‖ (P,)
    out_pos = torch.linalg.vector_norm(x_pos - proj_pos @ basis.T, dim=1)              # ‖(I − P) x_p‖ (P,)
    norm_neg = torch.linalg.vector_norm(x_neg, dim=1)
    bound = in_neg[:, None] * in_pos[None, :] + norm_neg[:, None] * out_pos[None, :]
    actual = (x_neg @ x_pos.T).abs()
    return bound, actual


def residual_abs_errors(x: Tensor, basis: Tensor, resid: Tensor) -> Tensor:
    """|e(x) − ‖(I − P) x‖²/d| per token: ResRL's residual energy (computed by resrl.core from
    per-token statistics, never forming x) against the explicit projection.

    x (N, d), basis (d, k), resid (N,) -> (N,). The terms that cancel in e are of size ~1 per
    feature (LN(h) has unit variance), so e's rounding error is ~eps of its dtype, absolute."""
    d = x.shape[1]
    explicit = (x - (x @ basis) @ basis.T).square().sum(dim=1) / d
    return (resid - explicit).abs()


def theorem1_rtol(d: int, dtype: torch.dtype) -> float:
    """The rounding scale of Theorem 1's two sides relative to ‖x_n‖‖x_p‖ in `dtype`: a length-d
    dot product errs by at most γ_d ≈ d·eps (Higham, Accuracy and Stability, §3.1), and the bound
    has a few such products and norms; 4·d·eps covers them (3e-14 at d = 32 in float64)."""
    return 4.0 * d * torch.finfo(dtype).eps


def theorem1_summary(bound: Tensor, actual: Tensor, x_neg: Tensor, x_pos: Tensor,
                     rtol: float | None = None) -> dict[str, float]:
    """Violations (actual > bound + rtol·‖x_n‖‖x_p‖, rtol by default `theorem1_rtol` of the inputs'
    dimension and dtype) and the tightness bound / actual over the pairs with a non-negligible
    actual (> 1e-6 of that scale).
    Returns python numbers: pairs, violations, tightness_median, tightness_p10, tightness_p90."""
    if rtol is None:
        rtol = theorem1_rtol(x_neg.shape[1], x_neg.dtype)
    scale = torch.linalg.vector_norm(x_neg, dim=1)[:, None] * torch.linalg.vector_norm(x_pos, dim=1)[None, :]
    violations = int((actual > bound + rtol * scale).sum())
    sig = actual > 1e-6 * scale
    ratio = (bound[sig] / actual[sig]).double()
    if ratio.numel():
        q = torch.quantile(ratio[:100_000] if ratio.numel() > 100_000 else ratio,
                           torch.tensor([0.1, 0.5, 0.9], dtype=ratio.dtype))
        p10, med, p90 = (float(v) for v in q)
    else:
        p10 = med = p90 = float("nan")
    return {"pairs": int(actual.numel()), "violations": violations, "tightness_median": med,
            "tightness_p10": p10, "tightness_p90": p90}


def representation_alignment(x_neg: Tensor, x_pos: Tensor, chunk: int = 1024) -> Tensor:
    """Mean squared cosine of each negative with the positives: (1/P) Σ_p cos²(x_n, x_p).

    x_neg (N, d), x_pos (P, d) -> (N,). A sign-free measure of how much of x_n lies along the
    positives' directions, the quantity Theorem 1 bounds (|⟨x_n, x_p⟩| relative to the norms)."""
    unit_pos = x_pos / torch.linalg.vector_norm(x_pos, dim=1, keepdim=True).clamp(min=1e-300)
    out = []
    for s in range(0, x_neg.shape[0], chunk):
        xn = x_neg[s:s + chunk]
        un = xn / torch.linalg.vector_norm(xn, dim=1, keepdim=True).clamp(min=1e-300)
        out.append((un @ unit_pos.T).square().mean(dim=1))
    return torch.cat(out) if out else x_neg.new_zeros(0)


__all__ = ["logit_gradients", "head_gradient_autograd", "lemma1_errors", "interference", "theorem1_bound",
           "residual_abs_errors", "theorem1_rtol", "theorem1_summary", "representation_alignment"]
