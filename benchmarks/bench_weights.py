"""Speed, memory and subspace quality of ResRL's token weights (issue 2, item 5).

Times `resrl.core.resrl_token_advantages` (randomized and exact SVD) against a faithful
restatement of the authors' per-group loop on the same inputs in the same process:
uniform subsample, `torch.pca_lowrank(q=k, niter=4)`, an explicit `(n, T, d)` float32 residual
tensor, `torch.quantile` 0.2/0.8 and a per-sample copy loop. Prints a table with speed-ups, the
peak memory of each method above its inputs (a fresh child process per method) and the fraction of the exact
top-k energy that the randomized subspace captures on states with a decaying spectrum.

    python benchmarks/bench_weights.py            # both shapes, 2 threads
    python benchmarks/bench_weights.py --quick    # small shape only
    python benchmarks/bench_weights.py --negative # ResRL vs weighting=interference vs NTHR (issue 19)

`--negative` times, in one process on the same batch, ResRL's default weights (the baseline), the
head sketch the two head-space methods need (the head product x̂Wᵀ over the response tokens and
its top-K, the capture-path cost that ResRL does not have), ResRL with weighting="interference"
and NTHR from that sketch, with their ratios to the baseline.
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing as mp
import statistics
import time

import torch
import torch.nn.functional as F

from resrl.core import ResRLConfig, grpo_advantages, resrl_token_advantages
from resrl.core.linalg import layer_norm_no_affine, top_right_singular_vectors

SHAPES = {
    "large": dict(groups=32, group_size=4, T=512, d=1024),
    "small": dict(groups=16, group_size=4, T=256, d=512),
}


def make_inputs(groups, group_size, T, d, seed=0):
    """Hidden states with a decaying spectrum (as real LM states have), variable lengths, right padding."""
    g = torch.Generator().manual_seed(seed)
    B = groups * group_size
    n_basis = min(d, 256)
    basis = torch.randn(n_basis, d, generator=g) / d ** 0.5
    scales = 20.0 / (1.0 + torch.arange(n_basis, dtype=torch.float32))   # power-law decay σ_j ∝ 1/j
    hidden = (torch.randn(B, T, n_basis, generator=g) * scales) @ basis * d ** 0.5
    hidden += 0.2 * torch.randn(B, T, d, generator=g)
    lengths = torch.randint(T // 4, T + 1, (B,), generator=g)
    mask = torch.arange(T)[None, :] < lengths[:, None]
    rewards = (torch.rand(B, generator=g) < 0.5).float()
    rewards[::group_size] = 1.0
    rewards[1::group_size] = 0.0
    group_index = torch.arange(groups).repeat_interleave(group_size)
    adv = grpo_advantages(rewards, group_index)
    return hidden, mask, adv, group_index


def authors_weights(hidden, mask, adv, group_index, rank=64, max_pos=4096, q=(0.2, 0.8), xi=0.1, pos_scale=0.1,
                    eps=1e-6):
    """The authors' per-group loop, restated (with their defaults: quantiles 0.2/0.8, uniform subsample)."""
    B, T, d = hidden.shape
    weights = torch.ones(B, T, device=hidden.device)                # (on the states' device: CUDA runs too)
    for gval in torch.unique(group_index).tolist():                  # Python loop over groups
        rows = (group_index == gval).nonzero().flatten().tolist()
        pos = [i for i in rows if adv[i].item() > 0]                 # host sync per sample
        neg = [i for i in rows if adv[i].item() <= 0]
        if not pos or not neg:
            continue
        pos_h = hidden[pos][mask[pos]].float()
        if pos_h.shape[0] > max_pos:
            pos_h = pos_h[torch.randperm(pos_h.shape[0])[:max_pos]]
        pos_ln = F.layer_norm(pos_h, (d,))
        mu = pos_ln.mean(0)
        X = pos_ln - mu
        k = min(rank, X.shape[0] - 1, d)
        _, _, V = torch.pca_lowrank(X, q=k, center=False, niter=4)
        x = F.layer_norm(hidden[neg].float(), (d,)) - mu              # (n, T, d) float32, padding included
        resid = x - (x @ V) @ V.T                                     # explicit residual tensor
        R = resid.pow(2).mean(-1)
        valid = R[mask[neg]]
        q_low, q_high = torch.quantile(valid, q[0]), torch.quantile(valid, q[1])
        w = xi + (1 - xi) * ((R - q_low) / (q_high - q_low + eps)).clamp(0, 1)
        for j, i in enumerate(neg):                                   # per-sample copy loop
            weights[i] = torch.where(mask[i], w[j], weights[i])
    return torch.where(adv[:, None] > 0, pos_scale * adv[:, None], weights * adv[:, None]) * mask


METHODS = {
    "authors' loop (pca_lowrank)": lambda h, m, a, g: authors_weights(h, m, a, g),
    "resrl randomized (default)": lambda h, m, a, g: resrl_token_advantages(h, m, a, g, ResRLConfig()),
    "resrl exact": lambda h, m, a, g: resrl_token_advantages(h, m, a, g, ResRLConfig(svd="exact")),
}


def time_method(fn, inputs, repeats):
    """Best of `repeats` after a warm-up (as timeit: the least-disturbed run of each method)."""
    fn(*inputs)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(*inputs)
        times.append(time.perf_counter() - t0)
    return min(times)


def _status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _peak_child(name, shape, threads, queue):
    torch.set_num_threads(threads)
    inputs = make_inputs(**shape)
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:  # reset the peak (VmHWM) to the current RSS
        f.write("5")
    base = _status_kib("VmRSS")
    METHODS[name](*inputs)
    queue.put((_status_kib("VmHWM") - base) / 1024.0)  # MiB above the inputs


def peak_memory_mib(name, shape, threads):
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_peak_child, args=(name, shape, threads, queue))
    proc.start()
    proc.join()
    return queue.get() if proc.exitcode == 0 else float("nan")


def captured_energy_ratio(hidden, mask, adv, group_index, cfg=ResRLConfig()):
    """Per group: energy of X+ captured by the randomized top-k subspace / by the exact top-k subspace."""
    ratios = []
    d = hidden.shape[-1]
    gen = torch.Generator().manual_seed(cfg.seed)
    for gval in torch.unique(group_index).tolist():
        rows = ((group_index == gval) & (adv > 0)).nonzero().flatten()
        X = layer_norm_no_affine(hidden[rows][mask[rows]], cfg.ln_eps)[: cfg.max_pos_tokens]
        X = (X - X.mean(0))[None]
        k = min(cfg.rank, X.shape[1] - 1, d)
        omega = torch.randn(d, k + cfg.oversample, generator=gen)
        V_r = top_right_singular_vectors(X, k, "randomized", cfg.oversample, cfg.power_iters, omega)
        V_e = top_right_singular_vectors(X, k, "exact", 0, 0)
        ratios.append(float((X @ V_r).square().sum() / (X @ V_e).square().sum()))
    return min(ratios), statistics.mean(ratios)


NEGATIVE_VOCAB = 8192  # V of the synthetic output head (the sketch's product costs B·T·d·V)


def negative_methods_table(shapes, threads, repeats, topk=32):
    from resrl.core import NTHRConfig, head_sketch, interference_token_advantages, nthr_token_advantages

    header = f"{'shape':<40}{'method':<44}{'time (s)':>10}{'x ResRL':>9}"
    print(header)
    print("-" * len(header))
    for label, shape in shapes.items():
        hidden, mask, adv, gidx = make_inputs(**shape)
        d = hidden.shape[-1]
        g = torch.Generator().manual_seed(1)
        W = torch.randn(NEGATIVE_VOCAB, d, generator=g) / d ** 0.5
        targets = torch.randint(0, NEGATIVE_VOCAB, mask.shape, generator=g)
        sketch_box = {}

        def make_sketch():
            sketch_box["s"] = head_sketch(hidden, W, None, targets, topk)
            return sketch_box["s"]

        make_sketch()
        rows = [
            ("resrl residual (default, baseline)", lambda: resrl_token_advantages(hidden, mask, adv, gidx, ResRLConfig())),
            (f"head sketch: x̂Wᵀ + top-{topk} (V={NEGATIVE_VOCAB})", make_sketch),
            ("resrl weighting=interference (sketch given)",
             lambda: interference_token_advantages(sketch_box["s"], mask, adv, gidx, ResRLConfig(weighting="interference"))),
            ("nthr, top-K sketch (sketch given)",
             lambda: nthr_token_advantages(sketch_box["s"], mask, adv, gidx, NTHRConfig(vocabulary="topk", topk=topk))),
            ("nthr, exact V*ₓ (default; sketch given)",
             lambda: nthr_token_advantages(sketch_box["s"], mask, adv, gidx, NTHRConfig())),
        ]
        desc = f"{label}: {shape['groups']}x{shape['group_size']}x{shape['T']}, d={d}"
        base = None
        for name, fn in rows:
            t = time_method(lambda *a: fn(), (), repeats)
            base = base or t
            print(f"{desc:<40}{name:<44}{t:>10.3f}{t / base:>8.2f}x")
            desc = ""
        print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small shape only, fewer repeats")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--no-memory", action="store_true", help="skip the child-process memory peaks")
    ap.add_argument("--negative", action="store_true",
                    help="ResRL vs weighting=interference vs NTHR, with the head-sketch capture cost")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    shapes = {"small": SHAPES["small"]} if args.quick else SHAPES
    repeats = 1 if args.quick else args.repeats
    if args.negative:
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, best of {repeats} run(s)\n")
        negative_methods_table(shapes, args.threads, repeats)
        return

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, best of {repeats} run(s)\n")
    header = f"{'shape':<34}{'method':<30}{'time (s)':>10}{'speed-up':>10}{'peak MiB':>10}"
    print(header)
    print("-" * len(header))
    for label, shape in shapes.items():
        inputs = make_inputs(**shape)
        desc = f"{label}: {shape['groups']}x{shape['group_size']}x{shape['T']}, d={shape['d']}"
        base_time = None
        for name, fn in METHODS.items():
            t = time_method(fn, inputs, repeats)
            base_time = base_time or t
            mem = float("nan") if args.no_memory else peak_memory_mib(name, shape, args.threads)
            print(f"{desc:<34}{name:<30}{t:>10.3f}{base_time / t:>9.2f}x{mem:>10.0f}")
            desc = ""
        # agreement of the default (randomized) with exact, and subspace quality
        ours_r, stats_r = resrl_token_advantages(*inputs, ResRLConfig())
        ours_e, stats_e = resrl_token_advantages(*inputs, ResRLConfig(svd="exact"))
        lo, mean = captured_energy_ratio(*inputs)
        print(f"{'':<34}randomized/exact captured energy: min {lo:.5f}, mean {mean:.5f} over groups"
              f" (exact subspace captures {stats_e['captured_energy']:.3f} of the positives' energy)")
        neg = (inputs[2] <= 0)[:, None] & inputs[1]
        diff = (ours_r - ours_e).abs()[neg]
        print(f"{'':<34}|Ã_randomized − Ã_exact| on negative tokens: mean {float(diff.mean()):.4f},"
              f" max {float(diff.max()):.3f} (max |Â| = {float(inputs[2].abs().max()):.2f})\n")


if __name__ == "__main__":
    main()
