"""BFCL (Berkeley Function Calling Leaderboard) data from the `bfcl-eval` wheel, read as files.

`bfcl-eval` 2026.3.23 ships the questions (`bfcl_eval/data/BFCL_v4_<category>.json`, JSON lines
despite the suffix), the possible answers (`data/possible_answer/`) and, for the multi-turn
categories, the function docs (`data/multi_turn_func_doc/`) and executable API classes
(`eval_checker/multi_turn_eval/func_source_code/`). Its own modules import vendor SDKs this
project does not install, so nothing here imports `bfcl_eval`: the package directory is found
with `importlib.util.find_spec` (which runs no package code) and the files are read directly.
Install it with `pip install --no-deps bfcl-eval==2026.3.23`.

Names (`resrl eval --data bfcl:<name>`):
    single-turn: simple (= simple_python), multiple, parallel, parallel_multiple, live_simple,
                 live_multiple, live_parallel, live_parallel_multiple, irrelevance,
                 live_irrelevance, live_relevance
    multi-turn:  multi_turn_base, multi_turn_miss_func, multi_turn_miss_param,
                 multi_turn_long_context (also accepted without the `multi_turn_` prefix)
Java / JavaScript, web-search, memory and format-sensitivity categories are not covered.
"""

from __future__ import annotations

import importlib.util
import json
from functools import lru_cache
from pathlib import Path

from resrl.data.problem import Problem
from resrl.tasks.tools.data import tool_messages
from resrl.errors import DataError, InputError

BFCL_VERSION = "2026.3.23"
INSTALL_HINT = f"pip install --no-deps bfcl-eval=={BFCL_VERSION}"

SINGLE_TURN = {  # our name -> BFCL file category
    "simple": "simple_python", "multiple": "multiple", "parallel": "parallel",
    "parallel_multiple": "parallel_multiple", "live_simple": "live_simple", "live_multiple": "live_multiple",
    "live_parallel": "live_parallel", "live_parallel_multiple": "live_parallel_multiple",
    "irrelevance": "irrelevance", "live_irrelevance": "live_irrelevance", "live_relevance": "live_relevance",
}
MULTI_TURN = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
NON_LIVE = ("simple", "multiple", "parallel", "parallel_multiple")
LIVE = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
# BFCL's multi-turn class name -> func doc file (constants/executable_backend_config.py)
FUNC_DOC_FILES = {
    "GorillaFileSystem": "gorilla_file_system.json", "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json", "TwitterAPI": "posting_api.json", "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json", "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
}


def bfcl_package_dir() -> Path:
    """The installed `bfcl_eval` package directory; ValueError with the install command if absent."""
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise InputError(f"BFCL data needs the bfcl-eval package: {INSTALL_HINT}")
    return Path(list(spec.submodule_search_locations)[0])


def canonical_category(name: str) -> str:
    """`simple`, `multi_turn_base`, `base`, ... -> our category name; ValueError listing the names."""
    name = name.strip()
    if name in SINGLE_TURN or name in MULTI_TURN:
        return name
    if f"multi_turn_{name}" in MULTI_TURN:
        return f"multi_turn_{name}"
    if name == "simple_python":
        return "simple"
    raise InputError(f"unknown BFCL category {name!r}: single-turn {sorted(SINGLE_TURN)}, "
                     f"multi-turn {list(MULTI_TURN)}")


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        raise DataError(f"BFCL file {path} is missing (bfcl-eval {BFCL_VERSION} expected: {INSTALL_HINT})")
    rows = []
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise DataError(f"{path}: row {lineno}: invalid JSON ({exc.msg})") from None
    return rows


@lru_cache(maxsize=32)
def _load_category(category: str) -> tuple[tuple[dict, ...], dict]:
    """(entries, {id: ground_truth}) of one category, as shipped (cached; callers must not mutate)."""
    file_category = SINGLE_TURN.get(category, category)
    data = bfcl_package_dir() / "data"
    entries = _read_jsonl(data / f"BFCL_v4_{file_category}.json")
    answer_path = data / "possible_answer" / f"BFCL_v4_{file_category}.json"
    truth = {r["id"]: r["ground_truth"] for r in _read_jsonl(answer_path)} if answer_path.exists() else {}
    return tuple(entries), truth


def load_bfcl_entries(category: str) -> list[tuple[dict, object]]:
    """[(entry, ground truth or None)] of a category (copies, safe to change)."""
    category = canonical_category(category)
    entries, truth = _load_category(category)
    out = []
    for e in entries:
        if category in SINGLE_TURN and category not in ("irrelevance", "live_irrelevance", "live_relevance") \
                and e["id"] not in truth:
            raise DataError(f"BFCL {category}: entry {e['id']} has no possible answer")
        out.append((json.loads(json.dumps(e)), json.loads(json.dumps(truth.get(e["id"])))))
    return out


def bfcl_reference(category: str, entry: dict, ground_truth) -> str:
    """The reference answer string `resrl.tasks.tools.reward` scores against (BFCL's rule per category)."""
    if category in ("irrelevance", "live_irrelevance"):
        return json.dumps({"ground_truth": [], "functions": entry["function"]}, ensure_ascii=False)
    if category == "live_relevance":
        return json.dumps({"any_call": True, "functions": entry["function"]}, ensure_ascii=False)
    return json.dumps({"ground_truth": ground_truth, "functions": entry["function"]}, ensure_ascii=False)


def bfcl_problems(category: str, limit: int | None = None, style: str = "hermes") -> list[Problem]:
    """Single-turn BFCL entries as problems: system message with the tools + the question's turn."""
    category = canonical_category(category)
    if category in MULTI_TURN:
        raise InputError(f"BFCL {category} is multi-turn: evaluate it with the multi-turn runner "
                         f"(resrl.tasks.tools.evaluate.evaluate_multi_turn), not as single prompts")
    problems = []
    for entry, truth in load_bfcl_entries(category)[:limit]:
        turns = entry["question"]
        if len(turns) != 1:
            raise DataError(f"BFCL {category}: entry {entry['id']} has {len(turns)} turns, expected 1")
        problems.append(Problem(id=entry["id"], prompt=tool_messages(entry["function"], turns[0], style),
                                answer=bfcl_reference(category, entry, truth), data_source=f"bfcl_{category}",
                                extra={"bfcl_category": category}))
    return problems


def multi_turn_function_docs(entry: dict) -> tuple[list[dict], dict[int, list[dict]]]:
    """(docs available from the start, {turn index: docs added at that turn}) for a multi-turn entry,
    as BFCL builds them: every doc of the involved classes, minus the miss_func holdouts."""
    docs_dir = bfcl_package_dir() / "data" / "multi_turn_func_doc"
    docs: list[dict] = []
    for cls in entry["involved_classes"]:
        if cls not in FUNC_DOC_FILES:
            raise DataError(f"BFCL entry {entry['id']}: unknown API class {cls!r}")
        docs += _read_jsonl(docs_dir / FUNC_DOC_FILES[cls])
    held: dict[int, list[dict]] = {}
    for turn, names in (entry.get("missed_function") or {}).items():
        for name in names:
            i = next((i for i, d in enumerate(docs) if d["name"] == name), None)
            if i is not None:
                held.setdefault(int(turn), []).append(docs.pop(i))
    return docs, held


__all__ = ["BFCL_VERSION", "SINGLE_TURN", "MULTI_TURN", "NON_LIVE", "LIVE", "bfcl_package_dir",
           "canonical_category", "load_bfcl_entries", "bfcl_reference", "bfcl_problems",
           "multi_turn_function_docs"]
