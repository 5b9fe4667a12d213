"""The demo's tasks, `resrl demo --task NAME`: a small registry (default `math`).

A demo task is data: an experiment (`resrl.demo.config.ExperimentConfig`: a `resrl train` config, a
start and an evaluator) and what its experiment kind (`resrl.experiments.kinds`) needs to know about
its problems:

    config(quick)       its ExperimentConfig, full or `--quick` (its task shape, start, training and
                        evaluation budgets)
    build(task_config)  the problem generator: `.test` (the held-out split) and
                        `.train_problems(n, stream)` (training streams that never meet the split)
    reward              f(completions, answers) -> rewards, for training and evaluation alike
    target(problem)     the correct completion, which the supervised warm start imitates
    describe(config)    one line for the console and report.md
    alphabet            the characters of the tiny model's tokenizer
    experiment          the kind that runs it: "supervised", "steps" or "pretrained"

The tasks registered here:

    math        chained addition of 3 two-digit terms (the demo since its first version; default)
    math-hard   chained addition of 3 terms of 2, 3 or 4 digits, the digit count drawn per problem:
                a spread of difficulty on which Pass@k up to 128 separates policies (`math_hard_config`)
    tools       one function call among four, arguments from a short request, scored by the tool
                family's BFCL-style reward (`resrl.demo.tools_task`)
    code        write f(x) = a*x + b from f(0) and f(1), run in the code family's sandbox on hidden
                tests (`resrl.demo.code_task`)
    code-stdin  the same as a program reading n on stdin and printing a*n + b, judged on hidden
                stdin/stdout tests as LiveCodeBench judges them (`resrl.demo.code_stdin_task`)
    agents, webshop       step-layout agents (`resrl.demo.agents_task`, `resrl.demo.webshop_task`)
    smollm2-arithmetic    a pretrained LM (`resrl.demo.arithmetic_task`)

Another task registers a `DemoTask` with its own generator, reward and target (`register_demo_task`).
The ω analysis of the report reads each negative completion against `target(problem)` (its first
token that leaves the reference completion).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Callable

from resrl.data.synthetic import ChainAdditionConfig, ChainAdditionTask, chain_reward, chain_target
from resrl.demo.config import ExperimentConfig, tiny_model_experiment
from resrl.errors import InputError

DEFAULT_TASK = "math"


@dataclass(frozen=True)
class DemoTask:
    name: str
    summary: str  # one line: --help and docs
    title: str  # the report's and plots' name of the task
    config: Callable[[bool], ExperimentConfig]  # (quick) -> its experiment
    build: Callable = ChainAdditionTask  # (task_config) -> generator with .test and .train_problems
    reward: Callable = chain_reward
    target: Callable = chain_target
    describe: Callable | None = None  # (task_config) -> str, the console's and report's line; None: `summary`
    alphabet: str = "0123456789+="
    # the experiment kind that runs it (a key of resrl.experiments.kinds.KINDS): "supervised" (a generated-problem
    # task, supervised warm start, single-turn RL), "steps" (behaviour cloning, step-layout RL and evaluation) or
    # "pretrained" (a pretrained model is the start)
    experiment: str = "supervised"

    def description(self, task_config) -> str:
        return self.describe(task_config) if self.describe is not None else self.summary

    def problems(self, cfg: ExperimentConfig):
        """The problem generator of an experiment on this task: `build`, seeded by the experiment's seed."""
        return self.build(replace(cfg.task, seed=cfg.seed))


DEMO_TASKS: dict[str, DemoTask] = {}


def register_demo_task(task: DemoTask) -> DemoTask:
    if task.name in DEMO_TASKS:
        raise ValueError(f"demo task {task.name!r} is already registered")
    DEMO_TASKS[task.name] = task
    return task


def get_demo_task(name: str) -> DemoTask:
    try:
        return DEMO_TASKS[name]
    except KeyError:
        raise InputError(f"--task: unknown demo task {name!r} (choose from {sorted(DEMO_TASKS)})") from None


def describe_chain(t: ChainAdditionConfig) -> str:
    return f"{t.num_terms} terms in [{t.min_value}, {t.max_value}]"


# -- chained addition with difficulty tiers ---------------------------------------------------------

@dataclass
class ChainTiersConfig:
    """Chained addition where each problem first draws its tier, then its terms.

    tiers       (num_terms, min_value, max_value) per tier, drawn uniformly per problem: e.g.
                ((3, 10, 99), (3, 100, 999), (3, 1000, 9999)) = 3 terms of 2, 3 or 4 digits
    num_test    size of the held-out split (distinct problems)
    seed        seed of the held-out split and of the training streams
    """

    tiers: tuple = ((3, 10, 99), (3, 100, 999), (3, 1000, 9999))
    num_test: int = 256
    seed: int = 0

    def __post_init__(self) -> None:
        self.tiers = tuple(tuple(int(x) for x in tier) for tier in self.tiers)  # JSON lists -> tuples
        if not self.tiers:
            raise ValueError("ChainTiersConfig.tiers must name at least one tier")
        for tier in self.tiers:  # each tier as a ChainAdditionConfig checks it (terms >= 3, a valid range)
            ChainAdditionConfig(*tier, num_test=1)
        space = sum((hi - lo + 1) ** n for n, lo, hi in self.tiers)
        if not isinstance(self.num_test, int) or not 1 <= self.num_test <= space // 2:
            raise ValueError(f"ChainTiersConfig.num_test must be an int in [1, {space // 2}] (half of the "
                             f"{space} distinct problems), got {self.num_test!r}")


class ChainTiersTask(ChainAdditionTask):
    """`ChainAdditionTask` (held-out split, training streams that never meet it, same problems and
    reward) whose problems draw a tier of `ChainTiersConfig` first."""

    config: ChainTiersConfig

    def _draw(self, rng: random.Random) -> tuple[int, ...]:
        num_terms, lo, hi = rng.choice(self.config.tiers)
        return tuple(rng.randint(lo, hi) for _ in range(num_terms))


def describe_tiers(t: ChainTiersConfig) -> str:
    return "chained addition, one tier per problem: " + ", ".join(
        f"{n} terms in [{lo}, {hi}]" for n, lo, hi in t.tiers)


# -- math: the demo's task since its first version --------------------------------------------------

def math_config(quick: bool = False) -> ExperimentConfig:
    """`resrl demo`: the tiny models' budgets as they are (`TINY_TRAINING`); `--quick`: one-digit terms."""
    task = ChainAdditionConfig(num_terms=3, min_value=1, max_value=9, num_test=48) if quick else ChainAdditionConfig(
        num_test=256)
    return tiny_model_experiment("math", task, quick)


register_demo_task(DemoTask(
    name="math", title="chained addition", config=math_config, describe=describe_chain,
    summary="chained addition of 3 two-digit terms, e.g. 17+45+38= -> 62+38=100 (default)"))


# -- math-hard: a spread of difficulty, for Pass@k up to 128 ----------------------------------------

HARD_TIERS = ((3, 10, 99), (3, 100, 999), (3, 1000, 9999))  # 3 terms of 2, 3 or 4 digits


def math_hard_config(quick: bool = False) -> ExperimentConfig:
    """`resrl demo --task math-hard`: 3 terms of 2, 3 or 4 digits, the digit count drawn per problem.

    On `math` every policy reaches Pass@128 of 0.99-1.00, so Pass@k at large k cannot separate
    them. Here the warm start stops early (dev greedy 10 %): the two-digit tier is mostly in
    reach, the four-digit tier mostly is not, and Pass@k at k = 128 has room above and below
    (seed 0: warm start 0.484, GRPO 0.566; the calibration is in docs/demo.md, "Tasks").
    Evaluation draws 128 samples per held-out problem; correct completions are longer than
    `math`'s (up to 16 characters, e.g. `19998+9999=29997`), hence the RL budget of 20 tokens.
    The warm start may take 2500 steps: the step where the tiny model leaves its plateau moves with
    the seed, and every seed must reach the target. `--quick`: one- and two-digit tiers.
    """
    if quick:
        return tiny_model_experiment("math-hard", ChainTiersConfig(tiers=((3, 1, 9), (3, 10, 99)), num_test=48), True)
    return tiny_model_experiment("math-hard", ChainTiersConfig(tiers=HARD_TIERS, num_test=256), keys=(
        "start.max_steps=2500", "start.target_accuracy=0.1", "train.max_completion_length=20", "eval.n=128"))


register_demo_task(DemoTask(
    name="math-hard", title="tiered addition", config=math_hard_config,
    build=ChainTiersTask, describe=describe_tiers,
    summary="3 terms of 2, 3 or 4 digits (drawn per problem), a weaker warm start, 128 samples per "
            "problem: Pass@k up to 128 has room"))


# -- tools: single-turn function calling, the tool family's BFCL-style reward -----------------------

def _register_tools() -> None:
    from resrl.demo import tools_task as tools

    register_demo_task(DemoTask(
        name="tools", title="tool calls", config=tools.tools_config,
        build=tools.ToolCallsTask, reward=tools.tool_reward, target=tools.tool_target,
        describe=tools.describe_tools, alphabet=tools.ALPHABET,
        summary="one function call among 4 (arity 1-3), arguments from the request, e.g. wake 7 30; -> "
                "alarm(h=7,m=30), scored by the BFCL-style tool_call_exact reward"))


_register_tools()


# -- code: a function from two examples, hidden tests in the code family's sandbox ------------------

def _register_code() -> None:
    from resrl.demo.code_task import ALPHABET, CodeFunctionsTask, code_config, code_reward, code_target, describe_code

    register_demo_task(DemoTask(
        name="code", title="function from examples", config=code_config, build=CodeFunctionsTask, reward=code_reward, target=code_target, describe=describe_code, alphabet=ALPHABET,
        summary="write f(x) = a*x + b from f(0) and f(1), e.g. f(0)=37;f(1)=42; -> def f(x):return 5*x+37; "
                "scored in the code sandbox on 4 hidden tests"))


_register_code()


# -- code-stdin: the same functions as stdin/stdout programs, judged as LiveCodeBench judges them -----

def _register_code_stdin() -> None:
    from resrl.demo.code_stdin_task import (ALPHABET, CodeStdinTask, code_reward, code_stdin_config, describe_stdin,
                                            stdin_target)

    register_demo_task(DemoTask(
        name="code-stdin", title="stdin/stdout program from examples", config=code_stdin_config, build=CodeStdinTask, reward=code_reward, target=stdin_target,
        describe=describe_stdin, alphabet=ALPHABET,
        summary="write a program printing a*n + b for n read on stdin, from its outputs for 0 and 1, e.g. 0>37;1>42; "
                "-> print(5*int(input())+37); judged on 4 hidden stdin tests in the code sandbox"))


_register_code_stdin()


# -- agents, webshop: the step layout (resrl.demo.agents_task, resrl.demo.webshop_task; run by the steps kind)

def _register_step_tasks() -> None:
    from resrl.demo.agents_task import agents_config
    from resrl.demo.webshop_task import webshop_config

    register_demo_task(DemoTask(
        name="agents", title="corridor agent (step layout)", config=agents_config, experiment="steps",
        summary="a corridor game played step by step (env.layout=step, EnvPool): walk to the door of the task's "
                "colour and open it, not the decoy; held-out (length, goal) tasks; algorithms grpo,gigpo,empg,resrl "
                "by default"))
    register_demo_task(DemoTask(
        name="webshop", title="WebShop-format shopping (step layout)", config=webshop_config, experiment="steps",
        summary="WebShop-format shopping on a generated catalog (webshop-medium; search, results, item page, options, "
                "buy now; WebShop's score as reward): held-out goals ask for products no training goal does; "
                "algorithms grpo,gigpo,empg,resrl by default"))


_register_step_tasks()


# -- smollm2-arithmetic: a pretrained LM (resrl.demo.arithmetic_task, run by the pretrained kind)

def _register_arithmetic() -> None:
    from resrl.demo.arithmetic_task import ArithmeticTask, arithmetic_config, arithmetic_reward, describe

    register_demo_task(DemoTask(
        name="smollm2-arithmetic", title="additions, pretrained SmolLM2", config=arithmetic_config,
        build=ArithmeticTask, reward=arithmetic_reward, target=None, describe=describe, alphabet="",
        experiment="pretrained",
        summary="SmolLM2-135M-Instruct (converted offline, no warm start) adds one- and two-digit numbers in its "
                "chat template, answered in \\boxed{}, scored by Math-Verify; accuracy reported apart from format"))


_register_arithmetic()


def __getattr__(name: str):
    """A name that left this module (build_task): an ImportError naming its new path (resrl._moved)."""
    from resrl._moved import moved_name

    raise moved_name(__name__, name)
