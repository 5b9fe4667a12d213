"""BFCL multi-turn categories as an `Environment`, executed against bfcl-eval's own API classes.

An entry has several user turns; in each the model may take several steps, each step a message
with tool calls, which run on the entry's API instances (file system, trading bot, travel
booking, ... from `bfcl_eval/eval_checker/multi_turn_eval/func_source_code/`, loaded with the
entry's `initial_config`) and whose results come back as `tool` messages. A message without a
call (plain text, or calls that do not parse) ends the turn; the next user turn follows. At the
end the trajectory is scored as BFCL's multi-turn checker does (re-implemented here, no code
copied), replaying the calls on fresh instances:

- per turn, the model's calls of that turn run on the model's instances and the ground-truth
  calls on separate ground-truth instances;
- a turn whose ground truth has calls fails when the model made no call in it;
- state check: every public attribute of every API instance equals the ground truth's;
- response check: every ground-truth result of the turn appears among the results of all the
  model's calls so far (as a multiset, order-free);
- turns with an empty ground truth (miss_func / miss_param: the request cannot be served) are
  not checked, but their calls still change the state seen later;
- more than `max_steps_per_turn` (BFCL: 20) call steps in one turn force-terminates: reward 0.
Reward 1.0 when every check passes, else 0.0 (`info` names the failed check).

Execution never evaluates text: calls are parsed with `resrl.tasks.tools.parsing.parse_tool_calls`
and dispatched to the instance's public methods by name; BFCL's list of forbidden names (kill,
exit, quit, remove, unlink, popen, Popen, run) is refused. Calls to the stateless MathAPI (where
`power(base=10, exponent=10**9)` would sit in a C big-integer loop) run in an isolated worker
process killed after `call_timeout_s` (`resrl.rewards.isolation.IsolatedPool`); calls to the
stateful classes (plain dict / list bookkeeping) run in-process under a signal timer when the
rollout runs in the main thread. Result strings follow BFCL: str as is,
dict as JSON, anything else `str()`, exceptions as "Error during execution: <message>".
Deliberate difference: positional arguments of a model call are passed on (BFCL's Python-syntax
decoder drops them, while its own ground truth uses them, e.g. `sort('final_report.pdf')`).
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import inspect
import json
import signal
import threading
from typing import Any

from resrl.tasks.tools.bfcl_data import MULTI_TURN, canonical_category, load_bfcl_entries, multi_turn_function_docs
from resrl.tasks.tools.data import tool_messages
from resrl.envs.base import Environment, StepResult
from resrl.errors import DataError, InputError
from resrl.tasks.tools.parsing import parse_tool_calls

API_MODULES = {  # BFCL class name -> module (constants/executable_backend_config.py)
    "GorillaFileSystem": "gorilla_file_system", "MathAPI": "math_api", "MessageAPI": "message_api",
    "TwitterAPI": "posting_api", "TicketAPI": "ticket_api", "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking", "VehicleControlAPI": "vehicle_control",
}
STATELESS = ("MathAPI",)
FORBIDDEN = ("kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run")
MAX_STEPS_PER_TURN = 20  # BFCL's MAXIMUM_STEP_LIMIT
ADDED_FUNCTIONS_PROMPT = "I have updated some more functions you can choose from. What about now?"
_PACKAGE = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"


@contextlib.contextmanager
def _time_limit(seconds: float):
    """Raise TimeoutError after `seconds` (main thread only; elsewhere no limit can be set)."""
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum, frame):
        raise TimeoutError(f"tool call took longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class BFCLExecutor:
    """The API instances of one trajectory (or of its ground truth) and a safe call dispatcher."""

    def __init__(self, entry: dict, long_context: bool = False, call_timeout_s: float = 5.0) -> None:
        self.instances: dict[str, Any] = {}
        self.methods: dict[str, Any] = {}
        self.call_timeout_s = call_timeout_s
        for cls_name in entry["involved_classes"]:
            if cls_name not in API_MODULES:
                raise DataError(f"BFCL entry {entry['id']}: API class {cls_name!r} is not supported")
            module = importlib.import_module(f"{_PACKAGE}.{API_MODULES[cls_name]}")
            instance = getattr(module, cls_name)()
            if cls_name not in STATELESS:
                config = copy.deepcopy((entry.get("initial_config") or {}).get(cls_name, {}))
                instance._load_scenario(config, long_context=long_context)
            self.instances[cls_name] = instance
            for name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not name.startswith("_"):
                    self.methods[name] = method  # a later class wins on a shared name, as in BFCL

    def call(self, call: dict) -> str:
        """Run one parsed call; the result as BFCL's string. Never raises."""
        name = str(call.get("name", ""))
        short = name.split(".")[-1]  # "GorillaFileSystem.cd" -> "cd"
        try:
            if short in FORBIDDEN:
                raise Exception(f"Function call {short} is not allowed.")
            method = self.methods.get(short)
            if method is None:
                raise NameError(f"name '{name}' is not defined")
            positional, arguments = list(call.get("positional", [])), dict(call.get("arguments") or {})
            owner = type(method.__self__).__name__
            if owner in STATELESS and self.call_timeout_s > 0:
                outcome = _stateless_pool(self.call_timeout_s).map([(owner, short, positional, arguments)])[0]
                if outcome.timed_out:
                    raise TimeoutError(f"tool call took longer than {self.call_timeout_s} s")
                if outcome.error is not None:
                    raise RuntimeError(outcome.error.strip().splitlines()[-1])
                return outcome.value
            with _time_limit(self.call_timeout_s):
                result = method(*positional, **arguments)
        except Exception as exc:  # the model's call failed: BFCL reports it as the result
            return f"Error during execution: {exc}"
        return _stringify(result)

    def run(self, calls: list[dict]) -> list[str]:
        return [self.call(c) for c in calls]


def _stringify(result) -> str:
    """A method's return value as BFCL's result string."""
    if isinstance(result, str):
        return result
    if isinstance(result, dict):
        try:
            return json.dumps(result)
        except (TypeError, ValueError):
            return str(result)
    return str(result)


def _run_stateless(cls_name: str, method: str, positional: list, arguments: dict) -> str:
    """One call on a fresh instance of a stateless API class (runs in an isolated worker)."""
    module = importlib.import_module(f"{_PACKAGE}.{API_MODULES[cls_name]}")
    try:
        return _stringify(getattr(getattr(module, cls_name)(), method)(*positional, **arguments))
    except Exception as exc:
        return f"Error during execution: {exc}"


_STATELESS_POOLS: dict[float, Any] = {}


def _stateless_pool(timeout_s: float):
    """One shared worker process per timeout for stateless calls (created on first use)."""
    if timeout_s not in _STATELESS_POOLS:
        from resrl.rewards.isolation import IsolatedPool

        _STATELESS_POOLS[timeout_s] = IsolatedPool(
            _run_stateless, timeout_s=timeout_s, num_workers=1,
            preload=[f"{_PACKAGE}.{API_MODULES[c]}" for c in STATELESS])
    return _STATELESS_POOLS[timeout_s]


def _public_state(instance) -> dict:
    return {k: v for k, v in vars(instance).items() if not k.startswith("_")}


def parse_ground_truth_turn(turn: list[str]) -> list[dict]:
    """BFCL ground-truth call strings of one turn -> parsed calls; ValueError if one does not parse."""
    calls = []
    for text in turn:
        parsed = parse_tool_calls(text)
        if parsed.error is not None or len(parsed) != 1:
            raise DataError(f"BFCL ground-truth call {text!r} does not parse: {parsed.error}")
        calls += parsed
    return calls


def score_multi_turn(entry: dict, model_turns: list[list[list[dict]]], ground_truth: list[list[str]],
                     call_timeout_s: float = 5.0) -> dict:
    """BFCL's multi-turn verdict for the model's calls: `model_turns[turn][step]` = calls of a step.

    Returns {"valid": bool, "error_type": str | None, "error": str | None, "turn": int | None}.
    """
    if len(model_turns) != len(ground_truth):
        return {"valid": False, "error_type": "multi_turn:force_terminated", "turn": None,
                "error": f"{len(model_turns)} model turns for {len(ground_truth)} ground-truth turns"}
    long_context = "long_context" in entry["id"]
    model = BFCLExecutor(entry, long_context, call_timeout_s)
    truth = BFCLExecutor(entry, long_context, call_timeout_s)
    all_model_results: list[str] = []
    for t, (steps, truth_turn) in enumerate(zip(model_turns, ground_truth)):
        for calls in steps:
            all_model_results += model.run(copy.deepcopy(calls))
        truth_results = truth.run(parse_ground_truth_turn(truth_turn))
        if not truth_turn:
            continue
        if not any(steps):
            return {"valid": False, "error_type": "multi_turn:empty_turn_model_response", "turn": t,
                    "error": f"no call in turn {t}, which needs {truth_turn}"}
        for cls_name, gt_instance in truth.instances.items():
            mine, want = _public_state(model.instances[cls_name]), _public_state(gt_instance)
            diff = sorted(k for k in want if mine.get(k) != want[k])
            if diff:
                return {"valid": False, "error_type": "multi_turn:instance_state_mismatch", "turn": t,
                        "error": f"turn {t}: {cls_name} state differs in {diff[:5]}"}
        remaining = list(all_model_results)
        missing = []
        for r in truth_results:
            if r in remaining:
                remaining.remove(r)
            else:
                missing.append(r)
        if missing:
            return {"valid": False, "error_type": "multi_turn:execution_response_mismatch", "turn": t,
                    "error": f"turn {t}: ground-truth results missing from the model's: {[m[:80] for m in missing[:3]]}"}
    return {"valid": True, "error_type": None, "error": None, "turn": None}


class BFCLMultiTurnEnv(Environment):
    """One BFCL multi-turn entry (see the module docstring). reset() ignores its argument."""

    def __init__(self, entry: dict, ground_truth: list[list[str]], style: str = "hermes",
                 max_steps_per_turn: int = MAX_STEPS_PER_TURN, max_result_chars: int = 4000,
                 call_timeout_s: float = 5.0) -> None:
        if len(entry["question"]) != len(ground_truth):
            raise DataError(f"BFCL entry {entry['id']}: {len(entry['question'])} turns but "
                             f"{len(ground_truth)} ground-truth turns")
        self.entry, self.ground_truth, self.style = entry, ground_truth, style
        self.max_steps_per_turn, self.max_result_chars = max_steps_per_turn, max_result_chars
        self.call_timeout_s = call_timeout_s
        self._started = False

    def reset(self, prompt: Any = None) -> list[dict]:
        docs, self.held_out = multi_turn_function_docs(self.entry)
        self.executor = BFCLExecutor(self.entry, "long_context" in self.entry["id"], self.call_timeout_s)
        self.turn, self.steps, self.model_turns = 0, 0, [[]]
        self.done, self._started = False, True
        return tool_messages(docs, self.entry["question"][0], self.style)

    def _turn_messages(self, turn: int) -> list[dict]:
        messages = [dict(m) for m in self.entry["question"][turn]]
        if turn in self.held_out:  # miss_func: the withheld functions arrive with this turn
            docs = "\n".join(json.dumps(d, ensure_ascii=False) for d in self.held_out[turn])
            messages.append({"role": "user", "content": f"<tools>\n{docs}\n</tools>\n{ADDED_FUNCTIONS_PROMPT}"})
        return messages

    def step(self, model_text: str) -> StepResult:
        if not self._started or self.done:
            raise RuntimeError("BFCLMultiTurnEnv.step called before reset() or after the trajectory ended")
        calls = parse_tool_calls(model_text)
        if calls.error is None and calls:
            # the replay gets its own copy: an API may keep (and later mutate) the argument objects
            self.model_turns[-1].append(copy.deepcopy(list(calls)))
            results = self.executor.run(copy.deepcopy(list(calls)))
            self.steps += 1
            if self.steps > self.max_steps_per_turn:
                self.done = True
                return StepResult([], 0.0, True, {"error_type": "multi_turn:force_terminated",
                                                  "error": f"more than {self.max_steps_per_turn} steps in turn {self.turn}"})
            observation = [{"role": "tool", "content": r[: self.max_result_chars]} for r in results]
            return StepResult(observation, 0.0, False, {"calls": len(calls)})
        # no call: the turn is over
        self.turn += 1
        if self.turn == len(self.entry["question"]):
            self.done = True
            verdict = score_multi_turn(self.entry, self.model_turns, self.ground_truth, self.call_timeout_s)
            return StepResult([], 1.0 if verdict["valid"] else 0.0, True, verdict)
        self.steps = 0
        self.model_turns.append([])
        info = {"parse_error": calls.error} if calls.error else {}
        return StepResult(self._turn_messages(self.turn), 0.0, False, info)


def bfcl_multi_turn_envs(category: str, limit: int | None = None, **env_kwargs) -> list[BFCLMultiTurnEnv]:
    """One environment per entry of a BFCL multi-turn category (names as in resrl.tasks.tools.bfcl_data)."""
    category = canonical_category(category)
    if category not in MULTI_TURN:
        raise InputError(f"BFCL {category} is single-turn; multi-turn categories: {list(MULTI_TURN)}")
    return [BFCLMultiTurnEnv(entry, truth, **env_kwargs) for entry, truth in load_bfcl_entries(category)[:limit]]


__all__ = ["BFCLExecutor", "BFCLMultiTurnEnv", "score_multi_turn", "parse_ground_truth_turn",
           "bfcl_multi_turn_envs", "MAX_STEPS_PER_TURN"]
