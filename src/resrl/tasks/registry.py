"""The task-family registry: which family serves a data spec, a reward name, an environment name.

A task family (math, code, tool use, reasoning-gym, ALFWorld, ...) is one package under
`resrl.tasks` whose `__init__` declares a `TaskFamily`: the data it serves (spec prefixes such as
`rg:`, names such as `humaneval`, row shapes in data files), its rewards by name, its
environments, how `resrl eval` plays the data sets it does not sample as single prompts, and its
command-line sub-commands. The generic code asks this registry and names no family:

    resrl.tasks.data       family_for_data(spec).load(...), families' row formats
    resrl.tasks.rewards    family_for_reward(spec).rewards[...]
    resrl.tasks.envs       family_for_data(spec).games(...)       (step-layout game lists)
    resrl.train            env_spec(env.name)                        (layouts, factories, rules)
    resrl eval / diagnose  family_for_data(spec), reward_for_data(...), Evaluator.run(...)
    resrl (the CLI)        command_modules()

    from resrl.tasks.registry import family_for_data, family_for_reward, family_for_env
    family_for_data("rg:leg_counting").name   # "reasoning_gym"
    family_for_reward("tool_call[format_weight=0.5]").name   # "tools"
    family_for_env("alfworld").name           # "alfworld"

Registration: the built-in families are the packages in `BUILTIN_FAMILIES`, imported (their
`FAMILY`) on the first lookup; a family's package must import nothing heavy or optional at
that point (its hooks import the family's modules when called). A family from outside the
package calls `register_family(TaskFamily(...))` before the lookups that need it. Every hook
receives plain values (data specs, problems, the config object, an `EvalRun`): a family never
imports the engines, training or evaluation layers, nor another family (tests/test_layering.py).
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

# the built-in families, in registration order (the order rows, rewards and reports are tried in)
BUILTIN_FAMILIES = (
    "resrl.tasks.math",
    "resrl.tasks.code",
    "resrl.tasks.reasoning_gym",
    "resrl.tasks.tools",
    "resrl.tasks.alfworld",
    "resrl.tasks.webshop",
)


@dataclass(frozen=True)
class RowFormat:
    """Rows of data files a family recognises (tried before the generic problem / veRL rows).

    matches(row) -> bool; to_problem(row, index, source, where) -> Problem, errors prefixed with `where`."""

    matches: Callable[[Any], bool]
    to_problem: Callable[[dict, int, str, str], Any]


@dataclass(frozen=True)
class EnvSpec:
    """An environment a family serves under the training config's `env.name`.

    layouts          the `env.layout` values it trains with ("concat", "step")
    layout_reason    why it refuses the other layouts (the end of the ConfigError)
    step_factory     step layout: "module:function" of the factory, called in the environment
                     workers as factory(prompt, history_window=..., **env.options) (imported there by name)
    concat_envs      concat layout: concat_envs(data.train, limit) -> [(prompt, answer, make_env)], one
                     training row per item; make_env() builds a fresh environment for that prompt
    ends_at_max_steps the environment ends its episode itself at `env.max_steps` (handed to the
                     factory as the option max_steps)
    data             what `data.train` must be for this environment (None: any data); the
                     family's own data, checked with `family_for_data`
    """

    name: str
    layouts: tuple[str, ...]
    layout_reason: str = ""
    step_factory: str | None = None
    concat_envs: Callable[[str, int | None], list[tuple[Any, str, Callable[[], Any]]]] | None = None
    ends_at_max_steps: bool = False
    data: str | None = None


class EvalTools(Protocol):
    """The engine-side pieces `resrl eval` hands a family's evaluator (built by `resrl.eval.episodes`
    from `resrl.engines.multiturn` and `resrl.eval.runner`), so that no family imports those layers."""

    def load_model(self, path: str) -> tuple[Any, Any]: ...  # (model, tokenizer) of a model directory

    def step_policy(self, model, tokenizer, **kwargs) -> Any: ...  # a StepPolicy sampling from `model`

    def renderer(self, tokenizer, *args) -> Any: ...  # a ChatRenderer

    def rollout_multi_turn(self, *args, **kwargs) -> list: ...  # resrl.engines.multiturn.rollout_multi_turn

    def rollout_stats(self, trajectories) -> dict: ...

    def read_records(self, path: Path) -> dict: ...  # finished jsonl records (resume), a torn last line cut

    # the one step-episode evaluator (resrl.eval.steps.run_step_eval): a family hands its environment
    # (env.name, options) and its scorer (name, breakdown, columns, data_name); returns the summary
    def run_step_eval(self, args, out: Path, specs: list[str], env: str, options: dict, **scorer_and_budget) -> dict: ...


@dataclass
class EvalRun:
    """One `resrl eval` invocation as a family's evaluator sees it.

    args     the parsed `resrl eval` options (the family's own among them, see Evaluator.arguments)
    config   the single-turn EvalConfig (n, temperature, top_p, max_new_tokens, batch_size, limit, seed, progress)
    specs    this family's --data values its evaluator takes (played, not sampled as single prompts)
    summary  the single-turn evaluation's summary (None when no data set was sampled as single prompts)
    out      the output directory
    tools    EvalTools
    """

    args: Any
    config: Any
    specs: list[str]
    summary: dict | None
    out: Path
    tools: EvalTools


@dataclass(frozen=True)
class Deferred:
    """A family's hook given as "module:function", imported when first called: registering a family
    imports nothing heavy (see the module docstring), so its evaluator lives in a module of its own."""

    target: str

    def __call__(self, *args, **kwargs):
        from resrl.user_code import load_user_object

        return load_user_object(self.target, "task-family hook")(*args, **kwargs)


@dataclass(frozen=True)
class Evaluator:
    """How `resrl eval` handles a family's data sets beyond sampling single prompts.

    takes(spec)        the data set is played by `run` (episodes, conversations), not sampled as single prompts
    run(EvalRun)       called after the single-turn evaluation when any --data value is the family's:
                       play the taken data sets, write the family's report files, print its table
    arguments(parser)  adds the family's `resrl eval` options (an argument group)
    """

    takes: Callable[[str], bool]
    run: Callable[[EvalRun], None]
    arguments: Callable[[Any], None] | None = None


@dataclass(frozen=True)
class TaskFamily:
    """One task family (see the module docstring). Every hook is optional.

    Data
      prefixes         data specs "<prefix>..." it serves (e.g. "rg:", "bfcl:")
      names            data set names it serves, case-insensitive (e.g. "humaneval"), unless a file of
                       that name exists
      load             load(spec, split, limit) -> [Problem]; split is "train" (training, `load_problems`)
                       or "test" (evaluation, `load_benchmarks`, diagnose); families without splits ignore it
      report_name      report_name(spec) -> the data set's key in evaluation reports (default: the spec)
      report_names_unique  two specs with one report key are refused (False: the later one replaces it)
      rows             RowFormat of the rows it recognises in data files
      games            games(spec, limit) -> step-layout rows {"prompt", "answer"} of a game set
    Rewards
      rewards          reward name -> factory(spec, timeout_s=..., num_workers=...) -> reward function
      reward_name      reward_name(spec) -> the reward name a spec with options names (e.g.
                       "tool_call[format_weight=0.5]" -> "tool_call"), None when it names none
      scorers          reward name -> factory(timeout_s=..., num_workers=...) of an evaluation verifier
                       with `.score(completions, answers)` (keeps the extracted answers for maj@k)
      default          its reward scores the data no family claims (one family: math)
      data_reward      the reward its data is scored by when none is named — in `resrl train`,
                       `resrl eval` and `resrl diagnose` alike (`reward_for_data`)
      problems_reward  problems_reward({benchmark: problems}) -> the reward for these problems when
                       they are this family's (rows recognised by content in a data file), None when
                       they are not (may refuse a mix)
    Environments, evaluation, command line
      envs             EnvSpec per `env.name` it serves
      evaluator        Evaluator
      commands         modules with `register(subparsers)` adding `resrl` sub-commands
    """

    name: str
    prefixes: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    load: Callable[..., list] | None = None
    report_name: Callable[[str], str] | None = None
    report_names_unique: bool = True
    rows: RowFormat | None = None
    games: Callable[[str, int | None], list[dict]] | None = None
    rewards: dict[str, Callable[..., Any]] = field(default_factory=dict)
    reward_name: Callable[[str], str | None] | None = None
    scorers: dict[str, Callable[..., Any]] = field(default_factory=dict)
    default: bool = False
    data_reward: str | None = None
    problems_reward: Callable[[dict], str | None] | None = None
    envs: tuple[EnvSpec, ...] = ()
    evaluator: Evaluator | None = None
    commands: tuple[str, ...] = ()

    def serves(self, spec) -> bool:
        """Whether data spec `spec` (a string, path or packaged file) is this family's."""
        text = str(spec)
        if self.prefixes and text.startswith(self.prefixes):
            return True
        return isinstance(spec, str) and text.lower() in self.names and not Path(text).is_file()


_LOCK = threading.RLock()
_FAMILIES: dict[str, TaskFamily] = {}
_BUILTINS_LOADED = False


def register_family(family: TaskFamily) -> TaskFamily:
    """Add a family; ValueError when its name, a reward name or an environment name is taken."""
    with _LOCK:
        _load_builtins()
        _add(family)
    return family


def _add(family: TaskFamily) -> None:
    if family.name in _FAMILIES:
        raise ValueError(f"task family {family.name!r} is already registered")
    for other in _FAMILIES.values():
        taken = (set(family.rewards) & set(other.rewards)) | ({e.name for e in family.envs} & {e.name for e in other.envs})
        if taken:
            raise ValueError(f"task family {family.name!r}: {sorted(taken)} already belong to family {other.name!r}")
    _FAMILIES[family.name] = family


def _load_builtins() -> None:
    global _BUILTINS_LOADED
    if _BUILTINS_LOADED:
        return
    with _LOCK:
        if _BUILTINS_LOADED:
            return
        for module in BUILTIN_FAMILIES:
            _add(importlib.import_module(module).FAMILY)
        _BUILTINS_LOADED = True


def families() -> list[TaskFamily]:
    """Every registered family, in registration order (built-ins first)."""
    _load_builtins()
    return list(_FAMILIES.values())


def get_family(name: str) -> TaskFamily:
    """The family registered as `name`; KeyError listing the names otherwise."""
    _load_builtins()
    if name not in _FAMILIES:
        raise KeyError(f"no task family {name!r} (registered: {list(_FAMILIES)})")
    return _FAMILIES[name]


# ---- lookups ------------------------------------------------------------------------------------
def family_for_data(spec) -> TaskFamily | None:
    """The family serving data spec `spec` by its prefix or name, None for files and the data sets
    the generic loaders read (`resrl.data.loaders`, through `resrl.tasks.data`)."""
    return next((f for f in families() if f.serves(spec)), None)


def reward_name_of(spec: str) -> tuple[TaskFamily, str] | None:
    """(family, reward name) of a reward spec (a name, or a name with options), None when no family has it."""
    for f in families():
        name = f.reward_name(spec) if f.reward_name is not None else (spec if spec in f.rewards else None)
        if name is not None and name in f.rewards:
            return f, name
    return None


def family_for_reward(spec: str) -> TaskFamily | None:
    """The family whose reward `spec` names ("math", "code-fraction", "tool_call[...]"), or None."""
    found = reward_name_of(spec)
    return found[0] if found else None


def family_for_env(name: str | None) -> TaskFamily | None:
    """The family serving training environment `env.name`, or None (a module:function factory)."""
    return next((f for f in families() if any(e.name == name for e in f.envs)), None)


def env_spec(name: str | None) -> EnvSpec | None:
    """The EnvSpec registered as `env.name`, or None."""
    return next((e for f in families() for e in f.envs if e.name == name), None)


def reward_names() -> tuple[str, ...]:
    """Every family's reward names, in registration order."""
    return tuple(n for f in families() for n in f.rewards)


def data_names() -> tuple[str, ...]:
    """The data set names families serve (e.g. humaneval), in registration order."""
    return tuple(n for f in families() for n in f.names)


def row_formats() -> list[RowFormat]:
    """The families' row formats, in registration order."""
    return [f.rows for f in families() if f.rows is not None]


def step_env_names() -> list[str]:
    """Names of the registered environments that train with `env.layout: step`."""
    return [e.name for f in families() for e in f.envs if "step" in e.layouts]


def default_reward() -> str:
    """The reward of the data no family claims (the default family's first reward)."""
    return next(next(iter(f.rewards)) for f in families() if f.default)


def eval_scorer(name: str) -> Callable[..., Any] | None:
    """The factory of the evaluation verifier registered for reward `name`, or None."""
    return next((f.scorers[name] for f in families() if name in f.scorers), None)


def reward_for_data(specs: Sequence[str], problems_by_benchmark: dict | None = None) -> str:
    """The reward a run scores its data with when none is named: the one rule of `resrl train`
    (reward.function unset), `resrl eval` (no --reward) and `resrl diagnose` (no --reward).

    A family's `data_reward` when every data set scored with a reward is that family's (data sets
    an evaluator plays and scores itself are not counted), else the first family's
    `problems_reward` for the loaded problems (None: not loaded), else the default family's reward."""
    owners = []
    for spec in specs:
        f = family_for_data(spec)
        if f is not None and f.evaluator is not None and f.data_reward is None and f.evaluator.takes(spec):
            continue  # played and scored by the family's evaluator
        owners.append(f)
    if owners and all(f is not None and f is owners[0] for f in owners) and owners[0].data_reward:
        return owners[0].data_reward
    for f in families():
        if f.problems_reward is not None and problems_by_benchmark:
            reward = f.problems_reward(problems_by_benchmark)
            if reward is not None:
                return reward
    return default_reward()


def command_modules() -> list[str]:
    """The families' `resrl` sub-command modules, in registration order."""
    return [m for f in families() for m in f.commands]


__all__ = ["BUILTIN_FAMILIES", "TaskFamily", "RowFormat", "EnvSpec", "Deferred", "Evaluator", "EvalRun", "EvalTools",
           "register_family", "families", "get_family", "family_for_data", "family_for_reward", "family_for_env",
           "env_spec", "reward_name_of", "reward_names", "data_names", "row_formats", "step_env_names",
           "default_reward", "eval_scorer", "reward_for_data", "command_modules"]
