"""Algorithm lists shown to users come from the core registry, not from hand-written text."""

from __future__ import annotations

import contextlib
import io

from resrl.cli import build_parser
from resrl.core import registry


def train_help() -> str:
    parser = build_parser()
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        parser.parse_args(["train", "--help"])
    return out.getvalue()


def test_train_help_lists_every_registered_algorithm():
    line = [x for x in train_help().splitlines() if x.startswith("algorithms (algorithm.name):")]
    assert line, "resrl train --help has no algorithm list"
    assert line[0].split(":", 1)[1].strip().split(", ") == list(registry.ALGORITHMS)


def test_a_newly_registered_algorithm_appears_in_the_help(monkeypatch):
    monkeypatch.setitem(registry.ALGORITHMS, "planted-algo", registry.ALGORITHMS["grpo"])
    assert "planted-algo" in train_help()


def test_sub_configs_live_next_to_their_math():
    from resrl.core import step_advantages

    assert registry.GiGPOConfig is step_advantages.GiGPOConfig
    assert registry.EMPGConfig is step_advantages.EMPGConfig
    assert registry.AlgorithmConfig().gigpo.__class__.__module__ == "resrl.core.step_advantages"
