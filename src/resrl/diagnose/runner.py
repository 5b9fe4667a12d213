"""`run_diagnose(config)`: sample, score, measure every mixed group, LLD steps, write the evidence.

    for each prompt: G samples -> rewards -> one forward (penultimate states, head input, logits)
        -> Lemma 1 (autograd on a few token pairs), Theorem 1 (every pair), interference and
           ResRL's R / ω for both hidden alignments (resrl.core)
    -> LLD: one optimizer step per algorithm on copies of the model, from the mixed groups
    -> diagnose.json, report.md, plots
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from resrl.diagnose.measure import ALIGNMENTS, pooled


@dataclass
class DiagnoseConfig:
    model: str
    data: str
    out: str = "runs/diagnose"
    limit: int | None = 32            # prompts
    group_size: int = 8
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 64
    seed: int = 0
    reward: str | None = None         # for data files (default math)
    data_dir: str | None = None
    instruction: str | None = None
    use_chat_template: bool | None = None
    lemma1_pairs: int = 4             # token pairs checked by autograd (V × d gradients), over the first groups
    lld_algorithms: tuple[str, ...] | None = None  # None = every single-response algorithm of the core registry
    lld_lr: float = 1e-4
    lld_optimizer: str = "sgd"
    lld_groups: int = 16              # mixed groups in the LLD batch
    resrl: dict = field(default_factory=dict)  # ResRLConfig overrides
    bootstrap: int = 1000
    threads: int | None = None
    progress: bool = True

    def validate(self) -> None:
        if self.group_size < 2:
            raise ValueError(f"group_size must be >= 2 (a group needs a positive and a negative), got {self.group_size}")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"limit must be >= 1, got {self.limit}")
        if self.max_new_tokens < 1 or self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ValueError("bad sampling settings: max_new_tokens >= 1, temperature >= 0, top_p in (0, 1]")
        if self.lld_optimizer not in ("sgd", "adamw"):
            raise ValueError(f"lld_optimizer must be sgd or adamw, got {self.lld_optimizer!r}")
        if not self.lld_lr > 0:
            raise ValueError(f"lld_lr must be > 0, got {self.lld_lr}")


def _bar(total, desc, enabled):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, disable=not enabled, dynamic_ncols=True)


def _token_classes(tokenizer, group, rewards, target: str, eos_text: str):
    """(G, C) int64: 0 shared prefix, 1 first wrong token, 2 after it, on incorrect rows; −1 elsewhere."""
    import torch

    from resrl.data.synthetic import first_error_index

    G, C = group.completion_mask.shape
    out = torch.full((G, C), -1, dtype=torch.long)
    for i in range(G):
        if rewards[i] > 0:
            continue
        n = int(group.completion_mask[i].sum())
        tokens = [tokenizer.decode([t], skip_special_tokens=False) for t in group.completion_ids[i, :n].tolist()]
        e = first_error_index(tokens, target, eos_text)
        if e is None:
            continue
        t = torch.arange(n)
        out[i, :n] = torch.where(t < e, 0, torch.where(t == e, 1, 2))
    return out


def run_diagnose(cfg: DiagnoseConfig) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from resrl.core import ALGORITHMS, ResRLConfig, sketch_from_logits
    from resrl.diagnose.lld import LLDBatch, lld_step
    from resrl.diagnose.measure import lemma1_check, measure_group
    from resrl.diagnose.model_pass import forward_group, output_head, sample_group, stable_seed
    from resrl.diagnose.tasks import load_task
    from resrl.engines.hidden import align_response_hidden
    from resrl.models.generators import eos_token_ids

    cfg.validate()
    resrl_cfg = ResRLConfig(**cfg.resrl)
    # (step-level algorithms — gigpo, empg — need agent trajectories, not single responses; ppo needs a
    # trained critic's values, which one measured step does not have)
    single = tuple(a for a, spec in ALGORITHMS.items() if not spec.step_level and not spec.needs_values)
    algorithms = tuple(cfg.lld_algorithms) if cfg.lld_algorithms else single
    for a in algorithms:
        if a not in single:
            raise ValueError(f"unknown algorithm {a!r} for LLD: choose from {sorted(single)}")
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    out_dir = Path(cfg.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.time()

    tokenizer = AutoTokenizer.from_pretrained(cfg.model)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(cfg.model, dtype=torch.float32)
    model.eval()
    head = output_head(model)
    weight, bias = head.weight, getattr(head, "bias", None)
    eos_ids = eos_token_ids(model, tokenizer)
    eos_text = tokenizer.decode([eos_ids[0]], skip_special_tokens=False)
    task = load_task(cfg.data, tokenizer, cfg.limit, cfg.seed, cfg.reward, cfg.data_dir, cfg.instruction,
                     cfg.use_chat_template)

    measurements, lemma1, rewards_all = [], [], []
    lld_batch = LLDBatch([], [], [], [])
    bar = _bar(len(task.prompts), "diagnose: sample + measure groups", cfg.progress)
    samples_log = open(out_dir / "samples.jsonl", "w")  # what was sampled and how it scored, for inspection
    try:
        for i, prompt in enumerate(task.prompts):
            group = sample_group(model, tokenizer, prompt, cfg.group_size, cfg.temperature, cfg.top_p,
                                 cfg.max_new_tokens, stable_seed(cfg.seed, task.seed_key or task.name, i), eos_ids,
                                 task.add_special_tokens)
            texts = tokenizer.batch_decode(
                [row[:int(m.sum())] for row, m in zip(group.completion_ids.tolist(), group.completion_mask)],
                skip_special_tokens=True)
            rewards = torch.tensor(task.reward(texts, [task.answers[i]] * len(texts)), dtype=torch.float64)
            rewards_all.append(rewards)
            for text, r in zip(texts, rewards.tolist()):
                samples_log.write(json.dumps({"prompt_index": i, "completion": text, "reward": r}) + "\n")
            fw = forward_group(model, group)
            classes = (_token_classes(tokenizer, group, rewards, task.targets[i], eos_text)
                       if task.targets is not None else None)
            m = measure_group(i, group, fw, rewards, weight, bias, resrl_cfg, classes, ALIGNMENTS)
            if m is not None:
                measurements.append(m)
                if len(lemma1) < cfg.lemma1_pairs:
                    lemma1.extend(lemma1_check(group, fw, rewards, weight, bias, pairs=1, offset=len(lemma1)))
                if len(lld_batch.groups) < cfg.lld_groups:
                    lld_batch.groups.append(group)
                    lld_batch.rewards.append(rewards)
                    lld_batch.hidden.append(align_response_hidden(fw.penultimate, group.completion_length,
                                                                  resrl_cfg.hidden_alignment))
                    lld_batch.heads.append(sketch_from_logits(fw.head_input[:, :-1], fw.logits, group.completion_ids,
                                                              resrl_cfg.interference_topk))
            bar.update(1)
            bar.set_postfix(mixed=len(measurements))
    finally:
        bar.close()
        samples_log.close()
        if task.close is not None:
            task.close()

    lld = {}
    if lld_batch.groups:
        from resrl.diagnose.model_pass import sequence_logprobs

        with torch.no_grad():
            before = [sequence_logprobs(model, g) for g in lld_batch.groups]
        bar = _bar(len(algorithms), "diagnose: LLD step per algorithm", cfg.progress)
        for a in algorithms:
            lld[a] = lld_step(model, lld_batch, a, cfg.lld_lr, cfg.lld_optimizer, resrl_cfg,
                              max_response_length=cfg.max_new_tokens, logprobs_before=before)
            if a == "resrl" and resrl_cfg.weighting == "residual":  # the other weighting, same batch
                import dataclasses

                lld["resrl/resrl.weighting=interference"] = lld_step(
                    model, lld_batch, a, cfg.lld_lr, cfg.lld_optimizer,
                    dataclasses.replace(resrl_cfg, weighting="interference"),
                    max_response_length=cfg.max_new_tokens, logprobs_before=before)
            bar.update(1)
        bar.close()

    result = summarise(measurements, lemma1, rewards_all, lld, cfg)
    result["seconds"] = round(time.time() - t0, 1)
    result["config"] = {k: v for k, v in asdict(cfg).items()}
    result["config"]["resrl"] = asdict(resrl_cfg)
    (out_dir / "diagnose.json").write_text(json.dumps(_finite(result), indent=1))
    from resrl.diagnose.report import write_plots, write_report

    write_plots(measurements, result, out_dir)
    write_report(result, out_dir / "report.md")
    return result


def _finite(obj):
    """NaN / inf -> None, so diagnose.json is strict JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def summarise(measurements, lemma1, rewards_all, lld, cfg: DiagnoseConfig) -> dict:
    from resrl.diagnose.measure import TOKEN_CLASSES
    from resrl.statistics import spearman_with_interval

    clusters = np.concatenate([np.full(len(m.interference), m.group_id) for m in measurements]) if measurements \
        else np.zeros(0)
    inter = pooled(measurements, None, "interference")
    repr_term = pooled(measurements, None, "head_repr_term")
    cls = pooled(measurements, None, "token_class").astype(int) if measurements else np.zeros(0, dtype=int)
    rewards = np.concatenate([r.numpy() for r in rewards_all]) if rewards_all else np.zeros(0)

    def corr(x, y, keep):
        ok = keep & np.isfinite(x) & np.isfinite(y)
        return spearman_with_interval(x[ok], y[ok], clusters[ok], num_boot=cfg.bootstrap, seed=cfg.seed)

    by_alignment = {}
    for a in ALIGNMENTS:
        R = pooled(measurements, a, "residual")
        omega = pooled(measurements, a, "omega")
        align = pooled(measurements, a, "alignment")
        everything = np.ones(len(R), dtype=bool)
        entry = {
            "spearman_residual_vs_interference": corr(R, inter, everything),
            # the theorem bounds a magnitude |⟨x−, x+⟩|: the sign of the interference comes from δ
            "spearman_residual_vs_abs_interference": corr(R, np.abs(inter), everything),
            "spearman_residual_vs_alignment": corr(R, align, everything),
            "spearman_residual_vs_head_representation_term": corr(R, repr_term, everything),
            "spearman_omega_vs_interference": corr(omega, inter, everything),
            "theorem1_pairs": int(sum(m.by_alignment[a].theorem1_pairs for m in measurements)),
            "theorem1_violations": int(sum(m.by_alignment[a].theorem1_violations for m in measurements)),
            "residual_max_abs_error": max((m.by_alignment[a].residual_max_abs_error for m in measurements),
                                          default=float("nan")),
            "mean_omega": float(np.nanmean(omega)) if len(omega) else float("nan"),
            "mean_effective_rank": float(np.mean([m.by_alignment[a].effective_rank for m in measurements]))
            if measurements else float("nan"),
            "mean_positive_tokens": float(np.mean([m.by_alignment[a].num_pos_tokens for m in measurements]))
            if measurements else float("nan"),
        }
        ratios = pooled(measurements, a, "tightness_sample")
        entry["theorem1_tightness"] = ({"median": float(np.median(ratios)), "p10": float(np.quantile(ratios, 0.1)),
                                        "p90": float(np.quantile(ratios, 0.9))} if len(ratios) else {})
        if (cls >= 0).any():
            entry["by_token_class"] = {}
            for c, cname in enumerate(TOKEN_CLASSES):
                keep = cls == c
                entry["by_token_class"][cname] = {
                    "tokens": int(keep.sum()),
                    "mean_omega": float(np.nanmean(omega[keep])) if keep.any() else float("nan"),
                    "mean_residual": float(np.mean(R[keep])) if keep.any() else float("nan"),
                    "mean_interference": float(np.mean(inter[keep])) if keep.any() else float("nan"),
                    "spearman_residual_vs_interference": corr(R, inter, keep),
                    "spearman_residual_vs_abs_interference": corr(R, np.abs(inter), keep),
                    "spearman_residual_vs_alignment": corr(R, align, keep),
                }
        by_alignment[a] = entry

    est = pooled(measurements, None, "interference_estimate")
    omega_i = pooled(measurements, None, "omega_interference")
    sel = pooled(measurements, None, "nthr_selected").astype(bool) if measurements else np.zeros(0, dtype=bool)
    everything = np.ones(len(inter), dtype=bool)
    err = np.abs(est - inter)
    weighting = {
        "topk": int(cfg.resrl.get("interference_topk", 32)),
        "spearman_estimate_vs_interference": corr(est, inter, everything),
        "spearman_omega_vs_interference": corr(omega_i, inter, everything),
        "estimate_max_abs_error_rel": float(err.max() / np.abs(inter).max()) if len(inter) else float("nan"),
        "estimate_median_abs_error_rel": float(np.median(err) / np.median(np.abs(inter))) if len(inter) else float("nan"),
        "mean_omega": float(np.nanmean(omega_i)) if len(omega_i) else float("nan"),
        "nthr_selected_frac": float(sel.mean()) if len(sel) else float("nan"),
    }
    if (cls >= 0).any():
        weighting["by_token_class"] = {}
        for c, cname in enumerate(TOKEN_CLASSES):
            keep = cls == c
            weighting["by_token_class"][cname] = {
                "tokens": int(keep.sum()),
                "mean_omega": float(np.nanmean(omega_i[keep])) if keep.any() else float("nan"),
                "mean_interference": float(np.mean(inter[keep])) if keep.any() else float("nan"),
                "frac_positive_interference": float(np.mean(inter[keep] > 0)) if keep.any() else float("nan"),
                "nthr_selected_frac": float(sel[keep].mean()) if keep.any() else float("nan"),
                "spearman_estimate_vs_interference": corr(est, inter, keep),
                "spearman_omega_vs_interference": corr(omega_i, inter, keep),
            }

    lemma_errs = [max(e.values()) for e in lemma1]
    main = by_alignment["predicting"]
    result = {
        "data": cfg.data, "model": cfg.model,
        "prompts": len(rewards_all), "group_size": cfg.group_size,
        "accuracy": float((rewards > 0).mean()) if len(rewards) else float("nan"),  # correct = reward > 0
        "mean_reward": float(rewards.mean()) if len(rewards) else float("nan"),
        "mixed_groups": len(measurements),
        "negative_tokens": int(len(inter)),
        "lemma1_max_rel_error": max(lemma_errs) if lemma_errs else float("nan"),
        "lemma1_pairs_checked": len(lemma1),
        "head_logits_max_rel_error": max((m.head_logits_rel_error for m in measurements), default=float("nan")),
        "theorem1_violations": sum(by_alignment[a]["theorem1_violations"] for a in ALIGNMENTS),
        "theorem1_pairs": sum(by_alignment[a]["theorem1_pairs"] for a in ALIGNMENTS),
        "residual_max_abs_error": max(by_alignment[a]["residual_max_abs_error"] for a in ALIGNMENTS),
        "theorem1_tightness_median": main["theorem1_tightness"].get("median", float("nan")),
        "spearman_residual_vs_interference": main["spearman_residual_vs_interference"]["rho"],
        "spearman_residual_vs_interference_low": main["spearman_residual_vs_interference"]["low"],
        "spearman_residual_vs_interference_high": main["spearman_residual_vs_interference"]["high"],
        "spearman_residual_vs_abs_interference": main["spearman_residual_vs_abs_interference"]["rho"],
        "spearman_residual_vs_alignment": main["spearman_residual_vs_alignment"]["rho"],
        "spearman_residual_vs_alignment_low": main["spearman_residual_vs_alignment"]["low"],
        "spearman_residual_vs_alignment_high": main["spearman_residual_vs_alignment"]["high"],
        "by_alignment": by_alignment,
        "interference_weighting": weighting,
        "lld": lld,
        "lld_settings": {"lr": cfg.lld_lr, "optimizer": cfg.lld_optimizer,
                         "groups": min(len(measurements), cfg.lld_groups)},
    }
    return result


__all__ = ["DiagnoseConfig", "run_diagnose", "summarise", "ALIGNMENTS"]
