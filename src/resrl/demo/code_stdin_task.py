"""`resrl demo --task code-stdin`: write a stdin/stdout program from two examples; hidden tests decide.

A problem shows what a program printed for two inputs and asks for the program:

    prompt      0>37;1>42;
    target      print(5*int(input())+37)

The reward is the code family's own (`CodeReward`, through the reward registry), on the
stdin/stdout format: the completion runs in the sandbox once per test with the input on its stdin,
and its stdout is compared with the expected output the way LiveCodeBench's `testing_util` does
(stripped lines, equal as text or as decimal numbers). Six tests: the two shown inputs (0 and 1)
and four hidden ones (2, 3, -2, 10), each a line on stdin ("-2\\n"); reward 1.0 only when all six
pass, so printing the two shown outputs, a constant, or reading only part of the input earns nothing.

It is the `code` demo's task (`resrl.demo.code_task`: a = f(1) - f(0) is the hard part for the tiny
model, the same 450 functions, the same held-out split size) asked as a program that reads its
input and prints its answer, the form LiveCodeBench and CodeForces problems take. Any correct
program earns the same reward (`print(int(input())*5+37)`, two lines, a fenced block), not only
the spelling the warm start imitated.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from resrl.data.problem import Problem
from resrl.demo.code_task import (HIDDEN_INPUTS, CodeFunctionsConfig, CodeFunctionsTask, code_experiment, code_reward,
                                  code_target)

ALPHABET = "0123456789+-*>;() inprtu"  # every character of the prompts and the targets
INPUTS = (0, 1) + HIDDEN_INPUTS  # the two shown, then the hidden ones


@dataclass
class CodeStdinConfig(CodeFunctionsConfig):
    """The `code` demo's shape (slopes a in [1, max_a], intercepts b in [0, max_b], `num_test`
    held-out functions, `seed`), asked as a stdin/stdout program."""


def stdin_tests(a: int, b: int) -> dict:
    """The problem's tests in the code family's stdin/stdout format: one integer per input line."""
    return {"inputs": [f"{x}\n" for x in INPUTS], "outputs": [str(a * x + b) for x in INPUTS]}


def make_stdin_problem(a: int, b: int) -> Problem:
    """(5, 37) -> prompt `0>37;1>42;`, answer the tests as JSON, target in `extra`."""
    return Problem(id=f"stdin-{a}x+{b}", prompt=f"0>{b};1>{a + b};", answer=json.dumps(stdin_tests(a, b)),
                   data_source="demo-code-stdin", extra={"target": f"print({a}*int(input())+{b})", "a": a, "b": b})


# the completion the warm start imitates, `print(5*int(input())+37)`: the problem's own target, as the code task's
stdin_target = code_target


class CodeStdinTask(CodeFunctionsTask):
    """The function-from-examples generator (held-out split, training streams that never meet it),
    drawing stdin/stdout problems."""

    stream_prefix = "resrl-code-stdin"

    def __init__(self, config: CodeStdinConfig | None = None) -> None:
        super().__init__(config or CodeStdinConfig())

    def draw_problem(self, rng: random.Random) -> Problem:
        return make_stdin_problem(rng.randint(1, self.config.max_a), rng.randint(0, self.config.max_b))


def describe_stdin(t: CodeStdinConfig) -> str:
    return (f"a program printing a*n + b for n on stdin, from the outputs for 0 and 1; a in [1, {t.max_a}], "
            f"b in [0, {t.max_b}]; 4 hidden tests")


def code_stdin_config(quick: bool = False):
    """`resrl demo --task code-stdin`'s settings: the code task's, programs 2 tokens longer."""
    return code_experiment("code-stdin", CodeStdinConfig, quick, completion_tokens=26)


__all__ = ["ALPHABET", "CodeStdinConfig", "CodeStdinTask", "code_reward", "code_stdin_config", "describe_stdin",
           "make_stdin_problem", "stdin_target", "stdin_tests"]
