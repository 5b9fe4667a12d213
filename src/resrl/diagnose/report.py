"""report.md and the plots of `resrl diagnose` (R vs interference, ω histogram, LLD Δ per algorithm)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _f(x, digits=3) -> str:
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "n/a"
    if isinstance(x, float) and (abs(x) >= 1e4 or (x != 0 and abs(x) < 1e-3)):
        return f"{x:.2e}"
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def _ci(d: dict) -> str:
    return f"{_f(d['rho'])} [{_f(d['low'])}, {_f(d['high'])}] (n={d['n']}, groups={d['clusters']})"


def write_report(result: dict, path: Path) -> None:
    """Human-readable summary of diagnose.json."""
    r = result
    L = [f"# resrl diagnose: {r['data']} on {r['model']}", "",
         f"{r['prompts']} prompts × {r['group_size']} samples; accuracy (reward > 0) {_f(r['accuracy'])}, "
         f"mean reward {_f(r['mean_reward'])}; "
         f"{r['mixed_groups']} groups with both a positive and a negative response; "
         f"{r['negative_tokens']} negative tokens measured; {r.get('seconds', '?')} s.", "",
         "Two representations are involved and they are different vectors: Lemma 1 and the interference "
         "use x̂, the input of the output head (the final norm's output), and δ = softmax(z) − onehot(y); "
         "ResRL's residual R uses x = LN(h) − μ+ of the *penultimate* layer's state h (spec §2). Theorem 1 "
         "is checked in ResRL's space, the interference is measured in the head's space: the proxy "
         "question is whether R computed in one space ranks the interference in the other.", "",
         "## Theory checks", "",
         "| check | result |", "|---|---|",
         f"| Lemma 1: max relative error, autograd ∇_W vs δx̂ᵀ and inner products (float64, {r['lemma1_pairs_checked']} pairs) "
         f"| {_f(r['lemma1_max_rel_error'])} |",
         f"| head is z = W x̂ + b on the captured x̂: max relative logit error (float32 model) "
         f"| {_f(r['head_logits_max_rel_error'])} |",
         f"| Theorem 1: violations / (negative, positive) pairs, both alignments (at the products' rounding "
         f"scale, 4·d·eps) | {r['theorem1_violations']} / {r['theorem1_pairs']} |",
         f"| ResRL's residual R vs the explicit ‖(I − P)x‖²/d: max absolute error (float64) "
         f"| {_f(r.get('residual_max_abs_error'))} |",
         f"| Theorem 1 tightness, bound / actual, median (predicting) | {_f(r['theorem1_tightness_median'])} |",
         "", "## Does the residual track interference? (Spearman ρ, 95 % cluster-bootstrap interval over groups)", "",
         "ResRL gives *small* weight to negatives with *small* R, on the claim that they interfere most with the "
         "positives; the claim predicts a negative ρ(R, interference) and ρ(R, alignment). Theorem 1 bounds a "
         "magnitude, |⟨x−, x+⟩|, so ρ(R, |interference|) is shown too; the sign of the interference comes from "
         "the logit term ⟨δ−, δ+⟩, which ResRL does not model.", "",
         "| hidden_alignment | ρ(R, interference Σ₊⟨g−,g+⟩) | ρ(R, \\|interference\\|) | ρ(R, alignment mean cos²) | "
         "ρ(R, Σ₊⟨x̂−,x̂+⟩) | ρ(ω, interference) | Theorem 1 tightness median [p10, p90] | mean ω | mean k | mean M |",
         "|---|---|---|---|---|---|---|---|---|---|"]
    for a, e in r["by_alignment"].items():
        t = e.get("theorem1_tightness", {})
        L.append(f"| {a} | {_ci(e['spearman_residual_vs_interference'])} | "
                 f"{_ci(e['spearman_residual_vs_abs_interference'])} | {_ci(e['spearman_residual_vs_alignment'])} | "
                 f"{_ci(e['spearman_residual_vs_head_representation_term'])} | {_ci(e['spearman_omega_vs_interference'])} | "
                 f"{_f(t.get('median'))} [{_f(t.get('p10'))}, {_f(t.get('p90'))}] | {_f(e['mean_omega'])} | "
                 f"{_f(e['mean_effective_rank'], 1)} | {_f(e['mean_positive_tokens'], 1)} |")
    first = next(iter(r["by_alignment"].values()))
    if "by_token_class" in first:
        L += ["", "## Per token class (the task knows the correct chain)", "",
              "| hidden_alignment | class | tokens | mean ω | mean R | mean interference | ρ(R, interference) | "
              "ρ(R, \\|interference\\|) | ρ(R, alignment) |",
              "|---|---|---|---|---|---|---|---|---|"]
        for a, e in r["by_alignment"].items():
            for c, v in e["by_token_class"].items():
                L.append(f"| {a} | {c} | {v['tokens']} | {_f(v['mean_omega'])} | {_f(v['mean_residual'])} | "
                         f"{_f(v['mean_interference'])} | {_ci(v['spearman_residual_vs_interference'])} | "
                         f"{_ci(v['spearman_residual_vs_abs_interference'])} | "
                         f"{_ci(v['spearman_residual_vs_alignment'])} |")
    if r["lld"]:
        s = r["lld_settings"]
        L += ["", f"## Lazy likelihood displacement: one {s['optimizer']} step, lr {s['lr']}, {s['groups']} mixed groups",
              "", "Δ = log π_new(y+) − log π_old(y+) per positive response (sequence log-likelihood), each algorithm "
              "from the same batch on its own copy of the model.", "",
              "| algorithm | mean Δ (positives) | median Δ | fraction of positives whose likelihood fell | "
              "mean Δ (negatives) | grad norm |", "|---|---|---|---|---|---|"]
        for a, v in r["lld"].items():
            L.append(f"| {a} | {_f(v['mean_delta'])} | {_f(v['median_delta'])} | {_f(v['frac_positive_decreased'])} | "
                     f"{_f(v['mean_delta_negative'])} | {_f(v['grad_norm'])} |")
    w = r.get("interference_weighting")
    if w:
        L += ["", f"## ResRL weighting=\"interference\" and NTHR (top-{w['topk']} softmax sketch)", "",
              f"Estimate Î vs the exact interference I: Spearman {_ci(w['spearman_estimate_vs_interference'])}; "
              f"max |Î − I| / max |I| = {_f(w['estimate_max_abs_error_rel'])}, median |Î − I| / median |I| = "
              f"{_f(w['estimate_median_abs_error_rel'])}.",
              f"ω (weighting=interference) vs I: Spearman {_ci(w['spearman_omega_vs_interference'])}; mean ω "
              f"{_f(w['mean_omega'])}; NTHR lowers the penalty of {_f(w['nthr_selected_frac'])} of the negative tokens."]
        if "by_token_class" in w:
            L += ["", "| token class | tokens | mean ω | mean I | frac I > 0 | NTHR selected | ρ(Î, I) | ρ(ω, I) |",
                  "|---|---|---|---|---|---|---|---|"]
            for c, v in w["by_token_class"].items():
                L.append(f"| {c} | {v['tokens']} | {_f(v['mean_omega'])} | {_f(v['mean_interference'])} | "
                         f"{_f(v['frac_positive_interference'])} | {_f(v['nthr_selected_frac'])} | "
                         f"{_f(v['spearman_estimate_vs_interference']['rho'])} | "
                         f"{_f(v['spearman_omega_vs_interference']['rho'])} |")
    L += ["", "Plots: `residual_vs_interference.png`, `omega_hist.png`, `lld.png`. Raw numbers: `diagnose.json`; "
          "samples and rewards: `samples.jsonl`.", ""]
    path.write_text("\n".join(L))


def write_plots(measurements, result: dict, out_dir: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from resrl.diagnose.measure import ALIGNMENTS, pooled

    inter = pooled(measurements, None, "interference")
    fig, axes = plt.subplots(1, len(ALIGNMENTS), figsize=(5.2 * len(ALIGNMENTS), 4.2), squeeze=False)
    for ax, a in zip(axes[0], ALIGNMENTS):
        R = pooled(measurements, a, "residual")
        if len(R):
            ax.scatter(R, inter, s=4, alpha=0.4)
            ax.set_yscale("symlog", linthresh=max(1e-6, float(np.quantile(np.abs(inter), 0.1)) or 1e-6))
        rho = result["by_alignment"][a]["spearman_residual_vs_interference"]
        ax.set_title(f"{a}: Spearman ρ = {_f(rho['rho'])} [{_f(rho['low'])}, {_f(rho['high'])}]", fontsize=9)
        ax.set_xlabel("ResRL residual R of the negative token")
        ax.set_ylabel("interference Σ₊⟨g−, g+⟩ (head)")
    fig.tight_layout()
    fig.savefig(out_dir / "residual_vs_interference.png", dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for a in ALIGNMENTS:
        w = pooled(measurements, a, "omega")
        w = w[np.isfinite(w)]
        if len(w):
            ax.hist(w, bins=np.linspace(0, 1, 21), alpha=0.55, label=f"{a} (mean {w.mean():.2f})")
    ax.set_xlabel("ω of negative tokens")
    ax.set_ylabel("tokens")
    ax.legend(fontsize=8, title="hidden_alignment", title_fontsize=8)
    fig.tight_layout()
    fig.savefig(out_dir / "omega_hist.png", dpi=110)
    plt.close(fig)

    lld = result.get("lld") or {}
    if lld:
        names = list(lld)
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
        axes[0].bar(names, [lld[n]["mean_delta"] for n in names])
        axes[0].axhline(0, color="k", lw=0.8)
        axes[0].set_ylabel("mean Δ log π(y+)")
        axes[1].bar(names, [lld[n]["frac_positive_decreased"] for n in names], color="tab:red")
        axes[1].set_ylim(0, 1)
        axes[1].set_ylabel("fraction of positives whose likelihood fell")
        for ax in axes:
            ax.tick_params(axis="x", rotation=30)
        fig.suptitle(f"one {result['lld_settings']['optimizer']} step, lr {result['lld_settings']['lr']}", fontsize=10)
        fig.tight_layout()
        fig.savefig(out_dir / "lld.png", dpi=110)
        plt.close(fig)
