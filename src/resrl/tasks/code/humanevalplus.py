"""HumanEval and HumanEval+ (EvalPlus v0.1.10), shipped with the package, as function-level tests.

    humanevalplus   164 problems; inputs = base + plus (1,570 + 122,683), `base_count` = the base
                    ones, so one run gives EvalPlus's two numbers: base and base + plus
    humaneval       the same 164 problems with the base inputs only (HumanEval+'s `base_input` are
                    HumanEval's own test inputs)

The data file is `resrl/data/packaged/code/HumanEvalPlus-v0.1.10.jsonl.gz` (read with
importlib.resources, its sha256 checked; license and provenance beside it). It has no expected
outputs: `expected_outputs()` computes them once, as EvalPlus does, by running the canonical
solution on every input — in the code sandbox, with EvalPlus's contract asserts (`contract`,
input validity) in front of the solution body. EvalPlus applies the contract when it generates
inputs and computes its ground truth without it; the released file still holds inputs that break
their contract (HumanEval/32, judged by a special oracle anyway): those get the output of the
canonical solution without the contract, as in EvalPlus, and are listed in the cache and the log.
A canonical solution that fails on any input is a data error naming the task and input. The
outputs are cached on disk keyed by the data's sha256
(`$RESRL_CACHE_DIR`, else `$XDG_CACHE_HOME/resrl`, else `~/.cache/resrl`).

Each problem's answer (what the `code` reward reads) is the function-level tests object of
`resrl.tasks.code.reward` with the expected outputs in the exact-builtin encoding; HumanEval/32
(`find_zero`) is judged by EvalPlus's special oracle |poly(xs, x)| <= atol.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path

from resrl.errors import DataError

logger = logging.getLogger(__name__)

DATA_FILE = "HumanEvalPlus-v0.1.10.jsonl.gz"
DATA_SHA256 = "272720b90ac375502c8ed23cd791c2a93dfb22a911641a494da74a426c09f101"
CACHE_ENV = "RESRL_CACHE_DIR"
ORACLES = {"find_zero": "find_zero"}  # entry point -> special oracle (EvalPlus: HumanEval/32)
# Expected outputs: per-input wall limit and the whole problem's budget (the slowest canonical
# solution needs well under a second per input on a busy 2-core machine)
CANONICAL_TIMEOUT_S = 30.0
CANONICAL_TOTAL_S = 900.0

_LOCK = threading.Lock()
_MEMO: dict[tuple, list] = {}


def data_bytes() -> bytes:
    """The packaged file's bytes (sha256-checked)."""
    ref = resources.files("resrl.data") / "packaged" / "code" / DATA_FILE
    try:
        data = ref.read_bytes()
    except OSError as exc:
        raise DataError(f"the packaged HumanEval+ file {DATA_FILE} is missing from the resrl package ({exc}); "
                        f"reinstall resrl") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != DATA_SHA256:
        raise DataError(f"the packaged {DATA_FILE} has sha256 {digest}, expected {DATA_SHA256}: the file was changed")
    return data


def load_rows() -> list[dict]:
    """The 164 rows, in file order."""
    rows = [json.loads(line) for line in gzip.decompress(data_bytes()).decode("utf-8").splitlines() if line.strip()]
    for i, row in enumerate(rows, start=1):
        missing = {"task_id", "prompt", "entry_point", "canonical_solution", "contract", "base_input", "plus_input",
                   "atol"} - set(row)
        if missing:
            raise DataError(f"{DATA_FILE}: row {i}: missing keys {sorted(missing)}")
    return rows


def cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "resrl"


def reference_program(row: dict) -> str:
    """prompt + contract + canonical solution (EvalPlus's contract-checked reference)."""
    return row["prompt"] + row["contract"] + row["canonical_solution"]


def _run_inputs(code: str, entry: str, inputs: list, timeout_s: float, total_s: float) -> tuple[dict, object]:
    from resrl.tasks.code.sandbox.runner import SandboxLimits, run_job

    got: dict[int, dict] = {}
    job = {"code": code, "mode": "fn", "inputs": inputs, "entry_point": entry}
    limits = SandboxLimits(memory_mb=4096, processes=8, output_kb=16384)
    outcome = run_job(job, limits, test_timeout_s=timeout_s, total_timeout_s=total_s,
                      on_record=lambda r: got.__setitem__(r.get("i"), r) is None)
    return got, outcome


def _run_reference(row: dict, part: str, timeout_s: float, total_s: float) -> tuple[list, list[int], float]:
    """Expected outputs of one task's base or plus inputs (JSON structures of the exact encoding),
    the inputs that break the contract, and the seconds taken. The outputs are those of prompt +
    contract + canonical solution; an input whose contract assert fails gets the output of prompt +
    canonical solution (what EvalPlus's ground truth runs) and is listed, as EvalPlus keeps it."""
    inputs = row[f"{part}_input"]
    start = time.perf_counter()
    got, outcome = _run_inputs(reference_program(row), row["entry_point"], inputs, timeout_s, total_s)
    broken = [i for i in range(len(inputs)) if (got.get(i) or {}).get("status") == "error"
              and str(got[i].get("error", "")).startswith("AssertionError")]
    if broken:
        again, _ = _run_inputs(row["prompt"] + row["canonical_solution"], row["entry_point"],
                               [inputs[i] for i in broken], timeout_s, total_s)
        for j, i in enumerate(broken):
            if j in again:
                got[i] = again[j]
    outputs = []
    for i in range(len(inputs)):
        r = got.get(i)
        if r is None or r.get("status") != "ok":
            why = (r or {}).get("error") or outcome.error or ("timed out" if outcome.timed_out else "no result")
            raise DataError(f"{DATA_FILE}: {row['task_id']}: {part}_input[{i}]: the canonical solution failed: "
                            f"{why}"[:600])
        outputs.append(json.loads(r["ret"]))
    return outputs, broken, time.perf_counter() - start


def _cache_file(task_id: str, part: str) -> Path:
    return cache_dir() / f"humanevalplus-{DATA_SHA256[:16]}" / f"{task_id.replace('/', '_')}-{part}.json.gz"


def _read_cache(path: Path) -> list | None:
    try:
        cached = json.loads(gzip.decompress(path.read_bytes()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, EOFError) as exc:
        logger.warning("ignoring the unreadable HumanEval+ cache file %s (%s)", path, exc)
        return None
    if cached.get("sha256") != DATA_SHA256 or cached.get("contract") is not True:
        return None
    return cached["outputs"]


def expected_outputs(rows: list[dict] | None = None, parts: tuple[str, ...] = ("base", "plus"),
                     num_workers: int = 2, refresh: bool = False) -> dict[str, dict[str, list]]:
    """{task_id: {part: expected outputs}} for `parts` of `rows` (default: every task), as JSON
    structures of the exact encoding: from the disk cache (one file per task and part, keyed by the
    data's sha256), else computed in the sandbox and cached."""
    rows = rows if rows is not None else load_rows()
    out: dict[str, dict[str, list]] = {r["task_id"]: {} for r in rows}
    todo = []
    with _LOCK:
        for r in rows:
            for part in parts:
                key = (DATA_SHA256, r["task_id"], part)
                hit = None if refresh else _MEMO.get(key)
                if hit is None and not refresh:
                    hit = _read_cache(_cache_file(r["task_id"], part))
                if hit is None:
                    todo.append((r, part))
                else:
                    _MEMO[key] = out[r["task_id"]][part] = hit
    if todo:
        n_inputs = sum(len(r[f"{p}_input"]) for r, p in todo)
        logger.warning("computing HumanEval+ expected outputs once (%d task parts, %d inputs, in the sandbox); "
                       "cached under %s", len(todo), n_inputs, _cache_file("x", "x").parent)
        with ThreadPoolExecutor(num_workers) as pool:
            results = list(pool.map(lambda rp: _run_reference(rp[0], rp[1], CANONICAL_TIMEOUT_S, CANONICAL_TOTAL_S),
                                    todo))
        for (r, part), (outputs, broken, seconds) in zip(todo, results):
            if broken:
                logger.warning("%s %s inputs %s break the task's contract (kept, as EvalPlus keeps them)",
                               r["task_id"], part, broken[:10] + (["..."] if len(broken) > 10 else []))
            payload = {"sha256": DATA_SHA256, "contract": True, "task_id": r["task_id"], "part": part,
                       "seconds": round(seconds, 3), "contract_violations": broken, "outputs": outputs}
            path = _cache_file(r["task_id"], part)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(path.name + f".tmp{os.getpid()}")
                tmp.write_bytes(gzip.compress(json.dumps(payload).encode("utf-8"), compresslevel=6))
                os.replace(tmp, path)
            except OSError as exc:
                logger.warning("could not write the HumanEval+ cache %s (%s): computed again next time", path, exc)
            with _LOCK:
                _MEMO[(DATA_SHA256, r["task_id"], part)] = out[r["task_id"]][part] = outputs
    return out


def tests_for(row: dict, outputs: dict[str, list], plus: bool) -> dict:
    """The function-level tests object of one task (base inputs only, or base + plus)."""
    base = row["base_input"]
    tests = {"entry_point": row["entry_point"], "prompt": row["prompt"],
             "inputs": base + row["plus_input"] if plus else list(base),
             "outputs": outputs["base"] + outputs["plus"] if plus else list(outputs["base"]),
             "encoding": "exact", "atol": row["atol"]}
    if row["entry_point"] in ORACLES:
        tests["oracle"] = ORACLES[row["entry_point"]]
    if plus:
        tests["base_count"] = len(base)
    return tests


def humaneval_rows(plus: bool, limit: int | None = None, task_ids=None) -> list[dict]:
    """Data rows ({"task_id", "prompt", "entry_point", "tests", ...}) that `resrl.tasks.code.data` turns into
    Problems: `humanevalplus` (plus=True) or `humaneval` (base inputs only); the first `limit`, or
    only the tasks named in `task_ids` (expected outputs are computed for those alone)."""
    rows = load_rows()[:limit]
    if task_ids is not None:
        wanted = set(task_ids)
        rows = [r for r in rows if r["task_id"] in wanted]
        if len(rows) != len(wanted):
            raise DataError(f"unknown HumanEval task ids: {sorted(wanted - {r['task_id'] for r in rows})[:5]}")
    outs = expected_outputs(rows, ("base", "plus") if plus else ("base",))
    return [{"task_id": r["task_id"], "prompt": r["prompt"], "entry_point": r["entry_point"],
             "tests": tests_for(r, outs[r["task_id"]], plus), "test": r["test"],
             "canonical_solution": r["canonical_solution"], "contract": r["contract"]} for r in rows]


__all__ = ["DATA_FILE", "DATA_SHA256", "load_rows", "data_bytes", "expected_outputs", "tests_for", "humaneval_rows",
           "reference_program", "cache_dir"]
