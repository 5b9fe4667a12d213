"""`resrl diagnose --model DIR --data FILE_OR_NAME`: theory checks and proxy quality on a real model."""

from __future__ import annotations

import argparse


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "diagnose",
        help="check ResRL's theory on a model: Lemma 1, Theorem 1, residual vs interference, LLD per algorithm",
        description="Samples G responses for N prompts, scores them and, on every group with a positive and a "
                    "negative, checks Lemma 1 (autograd vs δxᵀ), Theorem 1 (every token pair), the rank "
                    "correlation of ResRL's residual with the true head-gradient interference (both "
                    "hidden_alignment settings), and the change of the positives' likelihood after one "
                    "optimizer step per algorithm. Writes diagnose.json, report.md and plots.",
    )
    p.add_argument("--model", required=True, help="local Hugging Face causal-LM directory")
    p.add_argument("--data", required=True, metavar="FILE_OR_NAME",
                   help="chain | chain-1digit (the demo's task, with token classes) | rg:TASK | a benchmark name "
                        "or jsonl/parquet file")
    p.add_argument("--out", default="runs/diagnose", help="output directory (default runs/diagnose)")
    p.add_argument("--limit", type=int, default=32, help="prompts (default 32)")
    p.add_argument("--group-size", type=int, default=8, help="samples per prompt G (default 8)")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--reward", default=None, help="for data files: math (default), exact or module:function")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--instruction", default=None)
    p.add_argument("--no-chat-template", action="store_true")
    p.add_argument("--lemma1-pairs", type=int, default=4, help="token pairs checked by autograd (default 4)")
    p.add_argument("--lld-algorithms", default=None,
                   help="comma-separated algorithms for the LLD step (default: every registered one)")
    p.add_argument("--lld-lr", type=float, default=1e-4)
    p.add_argument("--lld-optimizer", choices=["sgd", "adamw"], default="sgd")
    p.add_argument("--lld-groups", type=int, default=16, help="mixed groups in the LLD batch (default 16)")
    p.add_argument("--rank", type=int, default=None, help="ResRL rank k (default the core's, 64)")
    p.add_argument("--interference-topk", type=int, default=None,
                   help="K of the top-K softmax sketch of weighting=interference and NTHR (default the core's, 32)")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples (default 1000)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from resrl.diagnose.report import _f
    from resrl.diagnose.runner import DiagnoseConfig, run_diagnose

    cfg = DiagnoseConfig(
        model=args.model, data=args.data, out=args.out, limit=args.limit, group_size=args.group_size,
        temperature=args.temperature, top_p=args.top_p, max_new_tokens=args.max_new_tokens, seed=args.seed,
        reward=args.reward, data_dir=args.data_dir, instruction=args.instruction,
        use_chat_template=False if args.no_chat_template else None, lemma1_pairs=args.lemma1_pairs,
        lld_algorithms=tuple(a.strip() for a in args.lld_algorithms.split(",") if a.strip())
        if args.lld_algorithms else None,
        lld_lr=args.lld_lr, lld_optimizer=args.lld_optimizer, lld_groups=args.lld_groups,
        resrl={**({"rank": args.rank} if args.rank else {}),
               **({"interference_topk": args.interference_topk} if args.interference_topk else {})}, bootstrap=args.bootstrap, threads=args.threads,
        progress=not args.no_progress)
    r = run_diagnose(cfg)
    print(f"lemma1_max_rel_error {_f(r['lemma1_max_rel_error'])}  theorem1_violations {r['theorem1_violations']}"
          f"/{r['theorem1_pairs']}  residual_max_abs_error {_f(r['residual_max_abs_error'])}  spearman(R, interference) {_f(r['spearman_residual_vs_interference'])} "
          f"[{_f(r['spearman_residual_vs_interference_low'])}, {_f(r['spearman_residual_vs_interference_high'])}]")
    print(f"wrote {cfg.out}/diagnose.json, report.md and plots")
    return 0
