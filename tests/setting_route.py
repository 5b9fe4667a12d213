"""The route of one setting through resrl, from a command's entry to `trl.GRPOConfig`, as the program
runs (issue 53: "following a setting from `resrl demo`'s entry to GRPOConfig passes through at most
twice the stops that it does from `resrl train`'s").

    route(argv) -> Route(functions, files)

The setting is the learning rate, given a value nothing else in the run holds (VALUE, exact in binary,
and TEXT on the command line). `route` runs `resrl.cli.main(argv)` in this process under a tracer and
stops it when `GRPOConfig.__init__` is called with that learning rate. The route is then:

- every resrl function on the call stack at that moment that was handed the value (in an argument:
  the float itself, or a string, dict, list, dataclass or argparse namespace holding it), and
- back from the objects those functions were handed, every resrl function that returned one of them,
  and, recursively, every function that returned an object holding the value to that function's
  frame (its producers: `with_overrides` made the experiment config `run_experiment` was handed).

So a function that only reads the setting aside (a check, a report) is not a stop; a function that
passes it on, or builds what carries it, is. Comprehensions are parts of their function, not stops.

`python tests/setting_route.py` prints both routes of the test (tests/test_setting_route.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path

VALUE = 3.0517578125e-05  # 2**-15: written and read back exactly
TEXT = "3.0517578125e-05"
_PARTS = ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")


class _Reached(BaseException):
    """Raised in GRPOConfig.__init__ to stop the command there (not an Exception: nothing catches it)."""


@dataclass
class Route:
    functions: list[tuple[str, str]]  # (file relative to the resrl package, qualified name), in route order
    reached: bool                     # GRPOConfig was built with the setting

    @property
    def files(self) -> list[str]:
        return list(dict.fromkeys(f for f, _ in self.functions))

    def __str__(self) -> str:
        lines = [f"  {f}: {name}" for f, name in self.functions]
        return "\n".join(lines + [f"  {len(self.functions)} functions in {len(self.files)} files"])


def holds(obj, depth: int = 0) -> bool:
    """Whether `obj` is or holds the setting's value."""
    if isinstance(obj, float):
        return obj == VALUE
    if isinstance(obj, str):
        return len(obj) < 5000 and TEXT in obj
    if depth > 6:
        return False
    if isinstance(obj, dict):
        return any(holds(v, depth + 1) for v in list(obj.values())[:500])
    if isinstance(obj, (list, tuple)):
        return any(holds(v, depth + 1) for v in obj[:200])
    if isinstance(obj, argparse.Namespace):
        return holds(vars(obj), depth + 1)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return any(holds(getattr(obj, f.name, None), depth + 1) for f in dataclasses.fields(obj))
    return False


def route(argv: list[str]) -> Route:
    """Run `resrl argv` until GRPOConfig is built with the setting; its route (see the module docstring)."""
    import resrl
    from resrl.cli import main

    package = str(Path(resrl.__file__).parent)
    alive: list = []                  # every object recorded stays alive, so its id stays its own
    producers: dict[int, list] = {}   # id(object) -> [(function, ids of the values its frame was handed)]
    handed: dict[int, set] = {}       # id(frame) -> ids of the objects holding the value it was handed
    found: list[tuple[str, str]] = []

    def ours(frame) -> bool:
        return frame.f_code.co_filename.startswith(package) and frame.f_code.co_name not in _PARTS

    def name(frame) -> tuple[str, str]:
        return str(Path(frame.f_code.co_filename).relative_to(package)), frame.f_code.co_qualname

    def arguments(frame) -> list:
        code = frame.f_code
        count = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 4) + bool(code.co_flags & 8)
        return [frame.f_locals[n] for n in code.co_varnames[:count] if n in frame.f_locals]

    def objects(values) -> list:  # what can be followed by identity (a float is the value itself)
        return [v for v in values if holds(v) and not isinstance(v, float)]

    def at_sink(frame) -> None:
        stack, todo = [], []
        for f in _frames(frame.f_back):
            if ours(f) and any(holds(a) for a in arguments(f)):
                stack.append(name(f))
                todo += [id(a) for a in objects(arguments(f))]
        made, done = [], set()
        while todo:
            i = todo.pop()
            if i in done:
                continue
            done.add(i)
            for function, ids in producers.get(i, ()):
                made.append(function)
                todo += list(ids)
        found.extend(dict.fromkeys(list(reversed(stack)) + made))

    def local(frame, event, arg):
        if event == "return" and not isinstance(arg, float) and holds(arg):
            alive.append(arg)
            producers.setdefault(id(arg), []).append((name(frame), handed.get(id(frame), set()) - {id(arg)}))
            for parent in _frames(frame.f_back):  # the value it returns is handed to its caller
                if ours(parent):
                    handed.setdefault(id(parent), set()).add(id(arg))
                    break
        return local

    def tracer(frame, event, arg):
        if event != "call":
            return None
        code = frame.f_code
        if code.co_name == "__init__" and "GRPOConfig" in type(frame.f_locals.get("self")).__name__ \
                and frame.f_locals.get("learning_rate") == VALUE:
            at_sink(frame)
            raise _Reached
        if not ours(frame):
            return None
        given = objects(arguments(frame))
        alive.extend(given)
        handed[id(frame)] = {id(a) for a in given}
        return local

    before = sys.gettrace()
    sys.settrace(tracer)
    try:
        main(argv)
        reached = False
    except _Reached:
        reached = True
    finally:
        sys.settrace(before)
    return Route(found, reached)


def _frames(frame):
    while frame is not None:
        yield frame
        frame = frame.f_back


def demo_and_train_routes(out: Path) -> tuple[Route, Route]:
    """The two routes of the test: `resrl demo --quick --lr TEXT` (its methods in this process,
    `--workers 1`: the worker processes' handoff is a file, which no tracer follows), then `resrl
    train` on the same training config (the demo's `--print-config`, its start made by the run before)
    with `train.learning_rate=TEXT`."""
    import contextlib
    import io

    from resrl.cli import main

    common = ["demo", "--quick", "--algorithms", "grpo", "--out", str(out / "demo")]
    demo = route([*common, "--workers", "1", "--lr", TEXT])
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        assert main([*common, "--print-config"]) == 0
    training = shown.getvalue().split("\n# the experiment's other sections")[0]
    config = out / "train.yaml"
    config.write_text(training + "\nalgorithm:\n  name: grpo\n")
    train = route(["train", "--config", str(config), f"train.learning_rate={TEXT}",
                   f"train.output_dir={out / 'train'}"])
    return demo, train


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        demo, train = demo_and_train_routes(Path(tmp))
    print(f"resrl demo (reached GRPOConfig: {demo.reached}):\n{demo}\n\nresrl train (reached GRPOConfig: "
          f"{train.reached}):\n{train}")
