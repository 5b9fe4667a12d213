"""`resrl eval` and `resrl plot-passk`.

    resrl eval --model DIR --data aime24 math500 [more names or .jsonl/.parquet files]
               [--n 16] [--k 1,2,4,8,16] [--temperature 0.6] [--top-p 0.95] [--max-new-tokens 1024]
               [--batch-size 16] [--out runs/eval] [--limit N] [--seed 0] [--instruction TEXT]
               [--reward math|exact|code|code-fraction|tool_call_exact|tool_call|module:function]
               [--backend hf|vllm|auto] [--data-dir DIR] [--max-turns 40] [--max-total-tokens 8192]
               [--threads N] [--no-chat-template] [--no-progress]
               [--prompt-style verl-agent|react] [--max-steps 50] [--history-window 2] [--label NAME]
                                  (ALFWorld: --data alfworld:valid_unseen, alfworld-synth:DIR:SPLIT)
    resrl eval --model DIR --env NAME_OR_MODULE:FUNCTION --data GAMES [GAMES ...] [--n 8] [--temperature 1]
               [--max-steps 10] [--history-window 0] [--max-step-tokens 32] [--env-option KEY=VALUE]
                                  (a step-layout policy on a step environment: resrl.eval.steps)
    resrl plot-passk RUN_DIR [RUN_DIR ...] --out passk.png [--labels GRPO NSR ResRL]
"""

from __future__ import annotations

from resrl.errors import InputError

import argparse


def _int_list(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers like 1,2,4,8, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "eval", help="sample n completions per problem and report Avg@n, Pass@k, maj@k",
        description="Evaluate a local model directory on math benchmarks (Math-Verify scoring) or any "
                    "jsonl/parquet data set. Re-running with the same --out resumes an interrupted run.")
    p.add_argument("--model", required=True, help="local Hugging Face model directory")
    p.add_argument("--data", required=True, nargs="+", metavar="NAME_OR_FILE",
                   help="benchmark names (aime24 aime25 amc23 math500 minerva olympiadbench gsm8k humaneval "
                        "humanevalplus: EvalPlus's two rows, base and base + plus), files, bfcl:<category> "
                        "(simple, multiple, parallel, ..., multi_turn_base, ...), "
                        "alfworld:<split> (ALFWorld's games under $ALFWORLD_DATA) or alfworld-synth:DIR:<split>, "
                        "webshop:DIR:<split>, webshop:<split> ($WEBSHOP_DATA) or webshop-small:<split>; with --env: "
                        "game sets of that environment")
    p.add_argument("--data-dir", default=None, help="directory searched first for NAME.jsonl / .jsonl.gz / .parquet (then "
                                                    "$RESRL_DATA_DIR, then the copies shipped in the package)")
    p.add_argument("--n", type=int, default=None, help="samples per problem (default 16; ALFWorld: episodes per game, "
                                                       "default 1)")
    p.add_argument("--k", type=_int_list, default=None, help="k for the table and maj@k, e.g. 1,2,4,8,16 "
                                                             "(default: powers of two up to n)")
    p.add_argument("--temperature", type=float, default=0.6)
    p.add_argument("--top-p", type=float, default=0.95)
    p.add_argument("--max-new-tokens", type=int, default=1024)
    p.add_argument("--batch-size", type=int, default=16, help="rows per generate call")
    p.add_argument("--out", default="runs/eval", help="output directory (default runs/eval)")
    p.add_argument("--limit", type=int, default=None, help="only the first N problems of each data set")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--instruction", default=None,
                   help="text appended to each problem (default: the \\boxed{} instruction; '' for none)")
    p.add_argument("--no-chat-template", action="store_true", help="plain-text prompts even if the tokenizer "
                                                                   "has a chat template")
    p.add_argument("--reward", default=None, help="math (Math-Verify), exact, code (sandboxed tests), code-fraction, "
                                                  "tool_call_exact, tool_call, or module:function (default: code for "
                                                  "code data sets, tool_call_exact for bfcl:* data, else math)")
    p.add_argument("--correct-threshold", type=float, default=0.0,
                   help="a sample is correct when its reward is above this (default 0, training's "
                        "algorithm.correct_threshold; e.g. 0.99 to count only full credit of a partial-credit reward)")
    p.add_argument("--reward-timeout", type=float, default=5.0, help="seconds per Math-Verify item / per code test")
    p.add_argument("--reward-workers", type=int, default=2, help="Math-Verify worker processes / code sandboxes at once")
    p.add_argument("--max-turns", type=int, default=40, help="BFCL multi-turn: model steps per conversation")
    p.add_argument("--max-total-tokens", type=int, default=8192,
                   help="BFCL multi-turn: model + environment tokens per conversation (--max-new-tokens is per step)")
    p.add_argument("--backend", choices=["hf", "vllm", "auto"], default="auto",
                   help="generation engine; auto = vLLM when installed and a GPU is present, else HF generate")
    p.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads (default: torch's choice). On a busy machine 1 can be much faster")
    p.add_argument("--no-progress", action="store_true")
    from resrl.tasks.registry import families

    for family in families():  # the task families' own options (e.g. ALFWorld's argument group)
        if family.evaluator is not None and family.evaluator.arguments is not None:
            family.evaluator.arguments(p)
    from resrl.eval.steps import step_arguments

    step_arguments(p)  # after the families': it reuses their --max-steps / --history-window
    p.set_defaults(func=run_eval)

    q = subparsers.add_parser("plot-passk", help="overlay the Pass@k curves of several `resrl eval` runs",
                              description="One panel per benchmark, one line per run, log2 k on x.")
    q.add_argument("runs", nargs="+", metavar="RUN_DIR", help="--out directories of `resrl eval`")
    q.add_argument("--out", required=True, help="PNG file to write")
    q.add_argument("--labels", nargs="+", default=None, help="one label per run (default: directory names)")
    q.add_argument("--title", default=None)
    q.set_defaults(func=run_plot)


def run_eval(args) -> int:
    from resrl.tasks.data import load_benchmarks
    from resrl.data.prompts import DEFAULT_INSTRUCTION
    from resrl.eval.runner import EvalConfig, evaluate
    from resrl.tasks.registry import family_for_data, families, reward_for_data

    if args.threads is not None:
        if args.threads < 1:
            raise InputError(f"--threads must be >= 1, got {args.threads}")
        import torch

        torch.set_num_threads(args.threads)
    if getattr(args, "env", None):  # a step-layout policy: every --data value is a game set of the environment
        from pathlib import Path

        from resrl.eval.steps import run_step_eval

        run_step_eval(args, Path(args.out))
        return 0
    # data sets a task family's evaluator plays itself (ALFWorld games, BFCL multi-turn
    # conversations) go to it; the others are sampled as single prompts
    played: dict[str, list[str]] = {}
    specs = []
    for d in args.data:
        family = family_for_data(d)
        if family is not None and family.evaluator is not None and family.evaluator.takes(d):
            played.setdefault(family.name, []).append(d)
        else:
            specs.append(d)
    n = args.n if args.n is not None else 16
    benchmarks = load_benchmarks(specs, data_dir=args.data_dir) if specs else {}
    reward = args.reward or reward_for_data(args.data, benchmarks)
    config = EvalConfig(
        n=n, ks=args.k, temperature=args.temperature, top_p=args.top_p, max_new_tokens=args.max_new_tokens,
        batch_size=args.batch_size, seed=args.seed,
        instruction=DEFAULT_INSTRUCTION if args.instruction is None else args.instruction,
        use_chat_template=False if args.no_chat_template else None, reward=reward,
        reward_timeout_s=args.reward_timeout, reward_workers=args.reward_workers, backend=args.backend,
        correct_threshold=args.correct_threshold,
        limit=args.limit, progress=not args.no_progress,
    )
    from pathlib import Path

    out = Path(args.out)
    summary = None
    if specs:
        summary = evaluate(args.model, benchmarks, config, args.out)
        print((out / "results.md").read_text(), end="")
        t = summary["throughput"]
        if t.get("new_samples"):
            print(f"{t['new_samples']} samples in {t['wall_seconds']:.1f} s: {t['samples_per_s']:.2f} samples/s, "
                  f"{t['tokens_per_s']:.0f} generated tokens/s")
        print(f"wrote {out / 'samples.jsonl'}, {out / 'summary.json'}, {out / 'results.md'}, {out / 'passk.png'}")
    from resrl.eval.episodes import EngineTools
    from resrl.tasks.registry import EvalRun

    for family in families():  # each family whose data was given: its episodes and its report
        if family.evaluator is not None and any(family.serves(d) for d in args.data):
            family.evaluator.run(EvalRun(args=args, config=config, specs=played.get(family.name, []), summary=summary,
                                         out=out, tools=EngineTools()))
    return 0


def run_plot(args) -> int:
    from resrl.eval.plots import plot_runs

    path = plot_runs(args.runs, args.out, labels=args.labels, title=args.title)
    print(f"wrote {path}")
    return 0
