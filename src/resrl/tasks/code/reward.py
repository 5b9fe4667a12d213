"""Code reward: extract a program from a completion, run it against tests in the sandbox, score it.

Test formats (one JSON object per problem; `parse_tests` validates and normalises them):

- function-level (EvalPlus / HumanEval+): {"entry_point": str, "inputs": [[arg, ...], ...],
  "outputs": [value, ...], "prompt"?: str, "atol"?: float, "encoding"?: "plain" | "exact",
  "oracle"?: "find_zero", "base_count"?: int} — the sandbox calls `entry_point(*args)` on every
  input (one process for all of them, a wall deadline per input) and the PARENT compares each
  return value, decoded into builtin data (`resrl.tasks.code.sandbox.code_values`), with the expected output
  the way EvalPlus does (`fn_output_matches`). "outputs" are plain JSON values, or with
  "encoding": "exact" the exact-builtin encoding (tuples, sets, ... as `code_values` writes them).
  The first "base_count" inputs are the base set: `CodeResult.base_passed` says whether they all
  passed (EvalPlus's "base" next to "base + plus").
- check program (HumanEval / MBPP asserts): {"entry_point": str, "test": str, "prompt"?: str} —
  `test` defines `check(candidate)`; it runs in a judge process that never runs the program
  (`code_harness_modes`), and passes only on the judge's own record that `check` returned.
- For both, with "prompt" (the function header HumanEval gives), a program that does not define
  `entry_point` itself is run as prompt + program (a completion-style body), one that does gets
  the prompt's imports in front.
- standard input/output: {"inputs": [str, ...], "outputs": [str, ...], "float_tol"?, "time_limit_s"?,
  "memory_limit_mb"?, "prelude"?} — the program runs once per input with that text on its stdin;
  its stdout is compared with the output the way LiveCodeBench's `testing_util` does
  (`stdout_matches`: stripped lines, equal or equal as decimal numbers), or within `float_tol`.
- function call: {"fn_name": str, "inputs": [[arg, ...], ...], "outputs": [value, ...], "compare"?,
  "time_limit_s"?, "memory_limit_mb"?, "prelude"?} — calls `Solution().fn_name(*args)` (LeetCode)
  or the top-level `fn_name(*args)`; the JSON of the return value must equal the output (floats
  to 1e-6; like APPS/TACO, a one-element list output also accepts its element; an output given as
  JSON text, as LiveCodeBench stores them, is decoded; "compare": "exact" is LiveCodeBench's plain
  `==`). Arguments given as one string are JSON values, one per line (TACO / LiveCodeBench).
- The options (`resrl.tasks.code.sandbox.code_tests`): a problem's own `time_limit_s` /
  `memory_limit_mb` replace the reward's per-test timeout and the sandbox's memory limit;
  "prelude": "lcb" runs LiveCodeBench's standard imports before the program.

Code extraction (`extract_code`): think blocks are dropped; then the last ```python block, else the
last fenced block of any language, else the whole text.

`run_tests(code, tests, timeout_s)` runs one item in the sandbox (`resrl.tasks.code.sandbox.runner`) and
never raises for anything the program does. `CodeExecutor` runs many items on a bounded pool
with a (code, tests) cache; `CodeReward` is the `code` reward of the registry.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Sequence

from resrl.errors import InputError
from resrl.tasks.code.sandbox.code_tests import (FORMATS, PRELUDES, call_output_matches, dumps_json, expected_values,
                                                 fn_output_matches, fn_record_matches, normalize_output, parse_tests,
                                                 stdout_matches, value_cap)
from resrl.tasks.code.sandbox.runner import SandboxLimits, run_job

logger = logging.getLogger(__name__)

# ---- code extraction ----------------------------------------------------------------------------
_THINK_RE = re.compile(r"<think>.*?(</think>|\Z)", re.DOTALL)
_FENCE_RE = re.compile(r"^[ \t]*```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE)
_PY_LANGS = {"python", "py", "python3", "py3"}


def extract_code(completion: str) -> str | None:
    """The program in a completion (see the module docstring); None when nothing is left."""
    text = _THINK_RE.sub("", completion)
    if "</think>" in text:  # a think block whose opening tag was in the prompt (Qwen3 templates)
        text = text.rsplit("</think>", 1)[1]
    blocks = _FENCE_RE.findall(text)
    python = [body for lang, body in blocks if lang.lower() in _PY_LANGS]
    if python:
        code = python[-1]
    elif blocks:
        code = blocks[-1][1]
    else:
        code = text
    return code if code.strip() else None


def _prompt_imports(prompt: str) -> str:
    return "".join(line + "\n" for line in prompt.splitlines()
                   if re.match(r"\s*(import\s|from\s+\S+\s+import\s)", line) and not line.startswith((" ", "\t")))


def candidate_program(code: str, tests: dict) -> str:
    """The program a function-level or check item runs: a completion-style body after the prompt,
    or a whole function after the prompt's imports (module docstring)."""
    entry, prompt = tests["entry_point"], tests.get("prompt", "")
    defines = re.search(rf"^(async\s+)?def\s+{re.escape(entry)}\s*\(|^{re.escape(entry)}\s*=", code, re.MULTILINE)
    if prompt and not defines:
        head = prompt if prompt.endswith("\n") else prompt + "\n"
        return head + code
    return _prompt_imports(prompt) + code


# ---- one item -----------------------------------------------------------------------------------
@dataclass
class CodeResult:
    """Outcome of one program against one tests object.

    passed      every test passed
    fraction    tests passed / tests (tests not run — stopped early or out of time — count as failed)
    timed_out   a test (or the whole item) ran out of time
    error       why the item failed, when it did: the first failing test's error, "wrong answer on
                test i", "no code found", or a sandbox problem; None when it passed
    statuses    per test: "pass", "wrong", "error", "timeout", "output_limit", "not_run"
    layers      isolation layers the sandbox reported for this item
    base_passed function-level tests with "base_count": whether the base inputs all passed
    memory_limit "cgroup" when the item's cgroup OOM-killed a process during a test, else
                "rlimit_as" when a test hit a MemoryError (the address-space limit), else None
    """

    passed: bool
    fraction: float
    timed_out: bool = False
    error: str | None = None
    num_tests: int = 0
    statuses: list[str] = field(default_factory=list)
    seconds: float = 0.0
    layers: dict = field(default_factory=dict)
    cached: bool = False
    base_passed: bool | None = None  # function-level tests with base_count: the base inputs all passed
    memory_limit: str | None = None  # the layer that stopped a test for memory: "cgroup" or "rlimit_as"


def _failure(tests: dict, error: str, timed_out: bool = False) -> CodeResult:
    n = len(tests.get("inputs", [None])) if tests.get("format") != "check" else 1
    return CodeResult(passed=False, fraction=0.0, timed_out=timed_out, error=error, num_tests=n,
                      statuses=["not_run"] * n, base_passed=False if tests.get("base_count") else None)


def run_tests(code: str, tests: dict, timeout_s: float = 10.0, *, limits: SandboxLimits | None = None,
              stop_on_failure: bool = False, total_timeout_s: float | None = None, slot: int = 0) -> CodeResult:
    """Run `code` against `tests` in a fresh sandboxed process (module docstring for the formats).

    timeout_s         wall-time limit of each test case (its CPU limit is ceil(timeout_s) + 1 s);
                      a problem's own "time_limit_s" replaces it
    total_timeout_s   wall-time limit of all test cases together (default: LiveCodeBench's
                      (timeout_s + 1) × #tests + 5 s); the interpreter start gets `limits.startup_s` more
    stop_on_failure   stop at the first failing test (enough for a pass/fail reward)
    Raises DataError (a ValueError) only for malformed `tests` (the data's fault, not the program's).
    """
    start = time.perf_counter()
    tests = tests if isinstance(tests, dict) and tests.get("format") in FORMATS else parse_tests(tests)
    limits = limits or SandboxLimits()
    if not isinstance(code, str) or not code.strip():
        return _failure(tests, "no code found")
    if "time_limit_s" in tests:  # the problem's own limits (a CodeForces row's), as on its judge
        timeout_s = tests["time_limit_s"]
    if "memory_limit_mb" in tests:
        limits = replace(limits, memory_mb=tests["memory_limit_mb"], cgroup_memory_mb=tests["memory_limit_mb"])
    fmt = tests["format"]
    if fmt == "check":
        job = {"code": candidate_program(code, tests), "mode": "check", "inputs": [], "test": tests["test"],
               "prompt": tests.get("prompt", ""), "entry_point": tests["entry_point"]}
        n = 1
    elif fmt == "fn":
        job = {"code": candidate_program(code, tests), "mode": "fn", "inputs": tests["inputs"],
               "entry_point": tests["entry_point"], "output_cap_bytes": value_cap(tests)}
        n = len(tests["inputs"])
        expected = expected_values(tests)
    elif fmt == "stdio":
        job = {"code": code, "mode": "stdio", "inputs": tests["inputs"], "output_cap_bytes": value_cap(tests)}
        n = len(tests["inputs"])
    else:
        job = {"code": code, "mode": "call", "inputs": tests["inputs"], "fn_name": tests["fn_name"],
               "output_cap_bytes": value_cap(tests)}
        n = len(tests["inputs"])
    if "prelude" in tests:  # run before the program, in its namespace (stdin/stdout and function call)
        job["prelude"] = PRELUDES[tests["prelude"]]
    if total_timeout_s is None:  # LiveCodeBench's global timeout (check_correctness)
        total_timeout_s = (timeout_s + 1) * n + 5
    statuses = ["not_run"] * n
    errors: dict[int, str] = {}
    memory: list[str] = []

    def judge(record: dict) -> bool:
        i = record.get("i")
        if not isinstance(i, int) or not 0 <= i < n:
            return False
        if record.get("memory_limit") in ("cgroup", "rlimit_as"):
            memory.append(record["memory_limit"])
        status = record.get("status")
        if status == "ok":
            if fmt == "check":
                ok = True
            elif fmt == "fn":
                ok = fn_record_matches(record, expected[i], tests, i)
            elif fmt == "stdio":
                ok = stdout_matches(record.get("stdout", ""), tests["outputs"][i], tests.get("float_tol"))
            else:
                ok = "ret" in record and call_output_matches(record["ret"], tests["outputs"][i],
                                                             tests.get("compare", "lenient"))
            statuses[i] = "pass" if ok else "wrong"
            if not ok:
                errors[i] = f"wrong answer on test {i}"
        else:
            statuses[i] = status if status in ("error", "timeout", "output_limit") else "error"
            errors[i] = f"test {i}: {record.get('error') or status}"
        return not (stop_on_failure and statuses[i] != "pass")

    try:
        outcome = run_job(job, limits, test_timeout_s=timeout_s, total_timeout_s=total_timeout_s, slot=slot,
                          on_record=judge)
    except Exception as exc:  # noqa: BLE001 - the sandbox itself failed (e.g. no temp space): score 0
        logger.warning("code sandbox failed: %r", exc)
        return _failure(tests, f"sandbox failure: {exc!r}"[:300])
    num_passed = statuses.count("pass")
    timed_out = outcome.timed_out or "timeout" in statuses
    if num_passed == n:
        error = None
    elif errors:
        error = errors[min(errors)]
    elif outcome.timed_out:
        error = f"item timed out after {total_timeout_s:g} s"
    else:
        error = outcome.error or "the sandbox stopped before every test ran"
    base = tests.get("base_count") if fmt == "fn" else None
    return CodeResult(passed=num_passed == n, fraction=num_passed / n, timed_out=timed_out, error=error,
                      num_tests=n, statuses=statuses, seconds=time.perf_counter() - start, layers=outcome.layers,
                      base_passed=None if base is None else statuses[:base].count("pass") == base,
                      memory_limit=memory[0] if memory else None)


# ---- many items: pool + cache -------------------------------------------------------------------
def _tests_digest(tests: dict) -> str:
    public = {k: v for k, v in tests.items() if not k.startswith("_")}
    try:
        text = json.dumps(public, sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogatepass")
    except ValueError:  # an int past the process's 4,300-digit limit (LiveCodeBench allows 50,000)
        import marshal

        text = marshal.dumps(public)
    return hashlib.sha256(text).hexdigest()


def _cache_key(code: str, tests_digest: str, timeout_s: float, stop_on_failure: bool) -> str:
    h = hashlib.sha256()
    h.update(code.encode("utf-8", "surrogatepass"))
    h.update(f"\0{tests_digest}\0{timeout_s!r}\0{stop_on_failure}".encode())
    return h.hexdigest()


class CodeExecutor:
    """Runs many (code, tests) items, `num_workers` sandboxes at a time, with an LRU cache.

    A crash or hang of an item is a failed CodeResult (counted in `stats`), never an exception.
    Each worker thread owns one sandbox slot (its working directory); every item gets a uid of its
    own, so items never share a process budget.
    A timed-out result is not cached (it may pass on a less busy machine).
    """

    def __init__(self, num_workers: int = 2, timeout_s: float = 10.0, limits: SandboxLimits | None = None,
                 stop_on_failure: bool = False, cache_size: int = 65536) -> None:
        if not (isinstance(num_workers, int) and num_workers >= 1):
            raise InputError(f"CodeExecutor: num_workers must be a positive int, got {num_workers!r}")
        if not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
            raise InputError(f"CodeExecutor: timeout_s must be > 0, got {timeout_s!r}")
        self.num_workers = num_workers
        self.timeout_s = float(timeout_s)
        self.limits = limits or SandboxLimits()
        self.stop_on_failure = stop_on_failure
        self.cache_size = cache_size
        self._cache: OrderedDict[str, CodeResult] = OrderedDict()
        self._lock = threading.Lock()
        self._local = threading.local()
        self._slots = iter(range(1 << 30))
        self._pool: ThreadPoolExecutor | None = None
        self.stats = {"items": 0, "cache_hits": 0, "timeouts": 0, "errors": 0, "sandbox_failures": 0}

    def _slot(self) -> int:
        if not hasattr(self._local, "slot"):
            with self._lock:
                self._local.slot = next(self._slots)
        return self._local.slot

    def _run_one(self, code: str, tests: dict) -> CodeResult:
        return run_tests(code, tests, self.timeout_s, limits=self.limits, stop_on_failure=self.stop_on_failure,
                         slot=self._slot())

    def run_many(self, items: Sequence[tuple[str | None, dict]]) -> list[CodeResult]:
        """One CodeResult per (code, tests) item, in order; code None = nothing extracted."""
        parsed = [(c, t if isinstance(t, dict) and t.get("format") in FORMATS else parse_tests(t)) for c, t in items]
        results: list[CodeResult | None] = [None] * len(parsed)
        todo: dict[str, list[int]] = {}
        digests: dict[int, str] = {}  # a group's samples share one tests object: hash it once
        for i, (code, tests) in enumerate(parsed):
            if code is None or not code.strip():
                results[i] = _failure(tests, "no code found")
                continue
            digest = digests.get(id(tests)) or tests.get("_digest")
            if digest is None:  # kept in the parsed tests: HumanEval+'s run to megabytes, hashed once
                digest = digests[id(tests)] = tests["_digest"] = _tests_digest(tests)
            key = _cache_key(code, digest, self.timeout_s, self.stop_on_failure)
            with self._lock:
                hit = self._cache.get(key)
                if hit is not None:
                    self._cache.move_to_end(key)
            if hit is not None:
                results[i] = CodeResult(**{**hit.__dict__, "cached": True})
                self.stats["cache_hits"] += 1
            else:
                todo.setdefault(key, []).append(i)
        if todo:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.num_workers, thread_name_prefix="resrl-code")
            keys = list(todo)
            futures = [self._pool.submit(self._run_one, *parsed[todo[k][0]]) for k in keys]
            for key, fut in zip(keys, futures):
                try:
                    res = fut.result()
                except Exception as exc:  # noqa: BLE001 - never raise an item's failure into the caller
                    res = _failure(parsed[todo[key][0]][1], f"sandbox failure: {exc!r}"[:300])
                if res.error and res.error.startswith("sandbox failure"):
                    self.stats["sandbox_failures"] += 1
                for j, i in enumerate(todo[key]):  # duplicates within the batch ran once
                    results[i] = res if j == 0 else CodeResult(**{**res.__dict__, "cached": True})
                self.stats["cache_hits"] += len(todo[key]) - 1
                if not res.timed_out and not (res.error or "").startswith("sandbox"):
                    with self._lock:
                        self._cache[key] = res
                        while len(self._cache) > self.cache_size:
                            self._cache.popitem(last=False)
        done = [r for r in results if r is not None]
        self.stats["items"] += len(done)
        self.stats["timeouts"] += sum(r.timed_out for r in done if not r.cached)
        self.stats["errors"] += sum("error" in r.statuses for r in done if not r.cached)
        return done

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __enter__(self) -> "CodeExecutor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---- the reward ---------------------------------------------------------------------------------
@dataclass
class CodeScore:
    """Per-completion verdict in the shape `resrl.eval.scoring.Scorer` reads."""

    correct: bool
    extracted: str | None
    timed_out: bool = False
    error: str | None = None
    seconds: float = 0.0
    fraction: float = 0.0
    normalized: str | None = None
    base_correct: bool | None = None  # function-level tests with a base set (HumanEval+): EvalPlus's "base"


class CodeReward:
    """Reward function: 1.0 when the extracted program passes every test, else 0.0; with
    `partial=True` (registry name `code-fraction`) the fraction of tests passed.

    The `answers` are the problems' tests as JSON text (what the data loaders put in the answer
    column). `last_stats` after each call: timeouts, errors (items with a crashing test),
    wrong_answers (items with a test whose output was wrong), output_limits (items with an output
    over the cap), no_code (nothing extracted), pass_rate, mean_fraction, memory_cgroup /
    memory_rlimit (items a memory layer stopped), cache_hits, seconds. Each failed item's reason
    (`CodeScore.error`) is logged at DEBUG level (logger `resrl.tasks.code.reward`).
    """

    def __init__(self, timeout_s: float = 10.0, num_workers: int = 2, partial: bool = False,
                 limits: SandboxLimits | None = None) -> None:
        self.partial = partial
        self.__name__ = "code-fraction" if partial else "code"
        # a pass/fail reward can stop at the first failing test; the fraction needs them all
        self.executor = CodeExecutor(num_workers=num_workers, timeout_s=timeout_s, limits=limits,
                                     stop_on_failure=not partial)
        self.last_stats: dict[str, float] = {}
        self._tests_cache: dict[str, dict] = {}

    def extract_answer(self, completion: str) -> str | None:
        return extract_code(completion)

    def _tests(self, answer: str, index: int) -> dict:
        tests = self._tests_cache.get(answer)
        if tests is None:
            tests = parse_tests(answer, where=f"code reward: tests of item {index}")
            if len(self._tests_cache) > 4096:
                self._tests_cache.clear()
            self._tests_cache[answer] = tests
        return tests

    def score(self, completions: Sequence[str], answers: Sequence[str]) -> list[CodeScore]:
        if len(completions) != len(answers):
            raise InputError(f"code reward: {len(completions)} completions but {len(answers)} tests")
        start = time.perf_counter()
        hits0 = self.executor.stats["cache_hits"]
        codes = [extract_code(str(c)) for c in completions]
        tests = [self._tests(a if isinstance(a, str) else dumps_json(a), i) for i, a in enumerate(answers)]
        results = self.executor.run_many(list(zip(codes, tests)))
        n = max(1, len(results))
        self.last_stats = {
            "timeouts": float(sum(r.timed_out for r in results)),
            "errors": float(sum("error" in r.statuses for r in results)),
            "wrong_answers": float(sum("wrong" in r.statuses for r in results)),
            "output_limits": float(sum("output_limit" in r.statuses for r in results)),
            "no_code": float(sum(c is None for c in codes)),
            "pass_rate": sum(r.passed for r in results) / n,
            "mean_fraction": sum(r.fraction for r in results) / n,
            "memory_cgroup": float(sum(r.memory_limit == "cgroup" for r in results)),  # items stopped by
            "memory_rlimit": float(sum(r.memory_limit == "rlimit_as" for r in results)),  # each memory layer
            "cache_hits": float(self.executor.stats["cache_hits"] - hits0),
            "seconds": time.perf_counter() - start,
        }
        if logger.isEnabledFor(logging.DEBUG):
            for i, r in enumerate(results):
                if not r.passed:
                    logger.debug("code reward: item %d earns %s: %s", i, r.fraction if self.partial else 0.0,
                                 (r.error or "")[:300])
        return [CodeScore(correct=r.passed, extracted=c, timed_out=r.timed_out, error=r.error,
                          seconds=r.seconds, fraction=r.fraction, base_correct=r.base_passed)
                for c, r in zip(codes, results)]

    def __call__(self, completions: list[str], answers: list[str]) -> list[float]:
        scores = self.score(completions, answers)
        return [s.fraction if self.partial else float(s.correct) for s in scores]

    def close(self) -> None:
        self.executor.close()


__all__ = ["CodeResult", "CodeExecutor", "CodeReward", "CodeScore", "run_tests", "parse_tests", "extract_code",
           "normalize_output", "stdout_matches", "call_output_matches", "candidate_program", "fn_output_matches", "expected_values",
           "FORMATS"]
