"""Where ResRL's token weights ω land on negative completions (spec §2), measured exactly.

The chained-addition task knows the correct chain, so every token of a negative completion is in
one of three regions: the part shared with the correct chain (before the first wrong token), the
first wrong token, and the tokens after it. This module samples groups from a policy, takes the
penultimate-layer states with the project's forward hook, computes ω with `resrl.core` (the
same function the trainer calls), and averages ω per region, for both `hidden_alignment`s:

    "predicting" (default)  the state at t−1, which feeds the output head for token t
    "token"                 the state at t, after token t has been read

With "predicting", the first wrong token is predicted from a state that the positives share
(same prefix), so it tends to get a small weight; with "token" it is the first state that
differs. The figure and the table make that visible.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from resrl.data.synthetic import Problem, chain_reward, chain_target, first_error_index

REGIONS = ("shared prefix", "first wrong token", "after it")


@dataclass
class OmegaAnalysis:
    """ω of the negative completions of groups that have a positive, per alignment."""

    alignment_means: dict[str, dict[str, float]]  # alignment -> region -> mean ω
    alignment_counts: dict[str, int]  # region -> number of tokens (same for both alignments)
    examples: list[dict] = field(default_factory=list)  # prompt, target, tokens, first_error, omega{alignment}
    num_groups: int = 0
    groups_with_pos: int = 0
    num_negatives: int = 0
    stats: dict[str, dict[str, float]] = field(default_factory=dict)  # alignment -> core stats

    def to_dict(self) -> dict:
        return {"mean_omega": self.alignment_means, "tokens_per_region": self.alignment_counts,
                "num_groups": self.num_groups, "groups_with_pos": self.groups_with_pos,
                "num_negatives": self.num_negatives, "core_stats": self.stats, "examples": self.examples}

    @classmethod
    def from_dict(cls, d: dict) -> "OmegaAnalysis":
        """Back from summary.json (e.g. to redraw the figure)."""
        return cls(alignment_means=d["mean_omega"], alignment_counts=d["tokens_per_region"],
                   examples=d.get("examples", []), num_groups=d["num_groups"], groups_with_pos=d["groups_with_pos"],
                   num_negatives=d["num_negatives"], stats=d.get("core_stats", {}))


def sample_groups(model, tokenizer, problems: Sequence[Problem], group_size: int, temperature: float,
                  max_new_tokens: int, seed: int):
    """G completions per problem. Returns (input_ids (B, S), attention_mask (B, S), completion
    length C, completion_mask (B, C) valid up to and including eos, group_index (B,))."""
    import torch

    from resrl.models.generation import completion_mask as valid_up_to_eos
    from resrl.models.generation import generate_with, sampling_config

    enc = tokenizer([p.prompt for p in problems], return_tensors="pt", padding=True, add_special_tokens=False)
    config = sampling_config(temperature=temperature, top_p=1.0, top_k=0, max_new_tokens=max_new_tokens,
                             eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                             extra={"num_return_sequences": group_size})
    torch.manual_seed(seed)
    out = generate_with(model, config, **enc)
    P = enc["input_ids"].shape[1]
    completion = out[:, P:]
    # valid = up to and including the first eos (positions after it are padding)
    completion_mask, _ = valid_up_to_eos(completion, [tokenizer.eos_token_id])
    prompt_mask = enc["attention_mask"].repeat_interleave(group_size, dim=0)
    attention_mask = torch.cat([prompt_mask, completion_mask.long()], dim=1)
    group_index = torch.arange(len(problems)).repeat_interleave(group_size)
    return out, attention_mask, completion.shape[1], completion_mask, group_index


def analyse_omega(model, tokenizer, problems: Sequence[Problem], group_size: int = 8, temperature: float = 1.0,
                  max_new_tokens: int = 16, seed: int = 0, resrl_config=None, num_examples: int = 6,
                  alignments: Sequence[str] = ("predicting", "token"), reward=chain_reward,
                  target=chain_target) -> OmegaAnalysis:
    """Sample groups on `problems`, compute ω with resrl.core for each alignment, average per region.

    reward, target: the demo task's reward and correct completion (default: chained addition's); the
    first wrong token of a negative completion is the first one that leaves `target(problem)`."""
    import dataclasses

    import torch

    from resrl.core import ResRLConfig, resrl_token_advantages
    from resrl.core.advantages import grpo_advantages
    from resrl.engines.hidden import PenultimateHidden, align_response_hidden

    model.eval()
    ids, attn, C, cmask, gidx = sample_groups(model, tokenizer, problems, group_size, temperature,
                                              max_new_tokens, seed)
    completion = ids[:, -C:]
    texts = tokenizer.batch_decode(completion * cmask, skip_special_tokens=True)
    answers = [p.answer for p in problems for _ in range(group_size)]
    rewards = torch.tensor(reward(texts, answers))
    adv = grpo_advantages(rewards, gidx)

    with PenultimateHidden(model).capture(keep_last=C + 1) as outs, torch.no_grad():
        model(input_ids=ids, attention_mask=attn)
    states = outs[0].float()

    base = resrl_config or ResRLConfig()
    omegas, stats = {}, {}
    for alignment in alignments:
        cfg = dataclasses.replace(base, hidden_alignment=alignment)
        hidden = align_response_hidden(states, C, alignment)
        token_adv, st = resrl_token_advantages(hidden, cmask, adv, gidx, cfg)
        # negatives: Ã = ω · Â with Â < 0 in groups that have a positive (ω = 1 elsewhere)
        omegas[alignment] = torch.where(adv[:, None] < 0, token_adv / adv[:, None].clamp(max=-1e-12), 1.0)
        stats[alignment] = st

    has_pos = torch.zeros(len(problems), dtype=torch.bool)
    has_pos[gidx[rewards > 0]] = True
    eos_text = tokenizer.decode([tokenizer.eos_token_id], skip_special_tokens=False)
    sums = {a: {r: 0.0 for r in REGIONS} for a in alignments}
    counts = {r: 0 for r in REGIONS}
    examples, num_neg, shown_groups = [], 0, set()
    for i in range(len(texts)):
        if rewards[i] > 0 or adv[i] >= 0 or not has_pos[gidx[i]]:
            continue
        length = int(cmask[i].sum())
        tok_ids = completion[i, :length].tolist()
        tokens = [tokenizer.decode([t], skip_special_tokens=False) for t in tok_ids]
        problem = problems[int(gidx[i])]
        e = first_error_index(tokens, target(problem), eos_text)
        if e is None:  # stays on the chain but is wrong (e.g. truncated): no first wrong token
            continue
        num_neg += 1
        region_of = ["shared prefix"] * e + ["first wrong token"] + ["after it"] * (length - e - 1)
        for t, region in enumerate(region_of):
            counts[region] += 1
            for a in alignments:
                sums[a][region] += float(omegas[a][i, t])
        # figure examples: ones that share a prefix with the correct chain, one per prompt group
        if len(examples) < num_examples and e >= 1 and int(gidx[i]) not in shown_groups:
            shown_groups.add(int(gidx[i]))
            examples.append({
                "prompt": problem.prompt, "target": target(problem), "tokens": tokens, "first_error": e,
                "omega": {a: [float(w) for w in omegas[a][i, :length]] for a in alignments},
            })
    means = {a: {r: (sums[a][r] / counts[r] if counts[r] else float("nan")) for r in REGIONS} for a in alignments}
    return OmegaAnalysis(alignment_means=means, alignment_counts=counts, examples=examples,
                         num_groups=len(problems), groups_with_pos=int(has_pos.sum()), num_negatives=num_neg,
                         stats=stats)


def plot_omega(analysis: OmegaAnalysis, path, eos_text: str = "<|im_end|>") -> None:
    """Negative completions with each token shaded by ω (one column per alignment) and the mean ω
    per region as bars. The first wrong token is outlined in red; the correct chain is below."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    alignments = list(analysis.alignment_means)
    examples = analysis.examples
    # x extent: prompt text (~0.6 box per character) plus one box per completion token
    width = max([len(ex["prompt"]) * 0.5 + 0.6 + len(ex["tokens"]) for ex in examples] +
                [len(ex["target"]) * 0.55 + 1 + len(ex["prompt"]) * 0.5 for ex in examples] + [12])
    rows = max(1, len(examples))
    panel = 0.28 * width + 0.6
    fig = plt.figure(figsize=(panel * len(alignments) + 4.0, 0.75 * rows + 1.9))
    grid = fig.add_gridspec(1, len(alignments) + 1, width_ratios=[panel] * len(alignments) + [3.4], wspace=0.15)
    cmap = plt.get_cmap("viridis")
    for col, alignment in enumerate(alignments):
        ax = fig.add_subplot(grid[0, col])
        ax.set_xlim(-0.5, width)
        ax.set_ylim(rows * 1.5 - 0.2, -0.9)
        ax.axis("off")
        ax.set_title(f'hidden_alignment = "{alignment}"', fontsize=10)
        for r, ex in enumerate(examples):
            y = r * 1.5
            x0 = len(ex["prompt"]) * 0.5 + 0.6
            ax.text(0, y, ex["prompt"], fontsize=9, family="monospace", va="center", color="0.35")
            for t, (tok, w) in enumerate(zip(ex["tokens"], ex["omega"][alignment])):
                # eos as ⏎; any other special token (a sampled pad, ...) as a middle dot
                label = "⏎" if tok == eos_text else (tok if len(tok) <= 2 else "·")
                ax.add_patch(Rectangle((x0 + t - 0.5, y - 0.42), 1.0, 0.84, facecolor=cmap(w),
                                       edgecolor="red" if t == ex["first_error"] else "white",
                                       linewidth=2.0 if t == ex["first_error"] else 0.5))
                ax.text(x0 + t, y, label, ha="center", va="center", fontsize=8, family="monospace",
                        color="white" if w < 0.6 else "black")
            ax.text(x0 - 0.5, y + 0.68, "correct: " + ex["target"], fontsize=7, family="monospace",
                    va="center", color="0.4")
        if not examples:
            ax.text(0, 0, "no negative completion with a shared prefix was sampled", fontsize=9)
    sm = plt.cm.ScalarMappable(cmap=cmap, norm=plt.Normalize(0, 1))
    cbar = fig.colorbar(sm, ax=fig.axes, location="bottom", fraction=0.05, pad=0.02, shrink=0.5)
    cbar.set_label("ω (token weight of a negative; red box = first wrong token)")

    ax = fig.add_subplot(grid[0, -1])
    x = np.arange(len(REGIONS))
    width = 0.8 / len(alignments)
    for j, alignment in enumerate(alignments):
        vals = [analysis.alignment_means[alignment][r] for r in REGIONS]
        ax.bar(x + (j - (len(alignments) - 1) / 2) * width, vals, width, label=alignment)
    ax.set_xticks(x, [f"{r.replace(' ', chr(10), 1)}\n(n={analysis.alignment_counts[r]})" for r in REGIONS],
                  fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("mean ω")
    ax.set_title("mean ω per region of negatives", fontsize=10)
    ax.legend(fontsize=8, title="hidden_alignment", title_fontsize=8)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
