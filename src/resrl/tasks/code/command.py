"""`resrl code-report RUN --data SPEC [SPEC ...] [--k 1,5,16]`: LiveCodeBench's per-difficulty
table and a CodeForces rating estimate from a finished `resrl eval` run on code problems
(`resrl.tasks.code.report`). Writes RUN/code_report.json and RUN/code_report.md."""

from __future__ import annotations


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "code-report", help="per-difficulty Pass@k (LiveCodeBench) and a CodeForces rating from a resrl eval run",
        description="Read RUN/samples.jsonl of a `resrl eval` run on code problems and the same --data it was "
                    "run on; print and write pass@1 (= Avg@n) and Pass@k per difficulty and platform, as "
                    "LiveCodeBench reports them, and, for problems with a CodeForces difficulty rating, the "
                    "maximum-likelihood Elo rating with its standard error (docs/tasks/code.md).")
    p.add_argument("run", metavar="RUN", help="the output directory of `resrl eval` (holds samples.jsonl)")
    p.add_argument("--data", nargs="+", required=True, help="the data sets the run evaluated (files or names)")
    p.add_argument("--k", default="1,5,10", help="comma-separated k for Pass@k (default 1,5,10; k <= n shown)")
    p.set_defaults(func=run)


def run(args) -> int:
    import json
    from pathlib import Path

    from resrl.errors import InputError
    from resrl.tasks.code.report import code_report, report_markdown
    from resrl.tasks.data import load_benchmarks

    out = Path(args.run)
    samples = out / "samples.jsonl"
    if not samples.is_file():
        raise InputError(f"code-report: {samples} not found (RUN must be a `resrl eval` output directory)")
    try:
        ks = [int(k) for k in str(args.k).split(",") if k.strip()]
    except ValueError:
        raise InputError(f"code-report: --k must be comma-separated integers, got {args.k!r}") from None
    records = []
    lines = samples.read_text(encoding="utf-8").splitlines()
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if lineno == len(lines):
                continue  # a torn last line (the run was killed mid-write)
            raise InputError(f"code-report: {samples}: line {lineno} is not JSON") from None
    if not records:
        raise InputError(f"code-report: {samples} holds no records")
    extras = {(bench, p.id): p.extra for bench, problems in load_benchmarks(args.data).items() for p in problems}
    try:
        report = code_report(records, extras, ks)
    except ValueError as exc:
        raise InputError(f"code-report: {exc}") from None
    (out / "code_report.json").write_text(json.dumps(report, indent=2) + "\n")
    text = report_markdown(report, ks)
    (out / "code_report.md").write_text(text)
    print(text, end="")
    print(f"wrote {out / 'code_report.json'} and {out / 'code_report.md'}")
    return 0
