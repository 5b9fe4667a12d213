"""The ALFWorld engine, imported lazily: `alfworld` (domain, grammar, layouts, wrappers) and
`textworld[pddl]` (PddlEnv on fast-downward). Both are the optional extra `agents`
(`pip install -e '.[agents]'`, or `bash scripts/agents-setup.sh`).

Nothing here imports `alfworld.info` (it creates ~/.cache/alfworld on import); the package
directory is found with `importlib.util.find_spec`, which runs no package code.
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path

from resrl.errors import InputError

EXTRA_HINT = ("the ALFWorld engine is the optional extra 'agents': pip install -e '.[agents]' "
              "(or bash scripts/agents-setup.sh; it builds fast-downward and jericho, ~10 min the first time)")
WELCOME = "-= Welcome to TextWorld, ALFRED! =-"


def engine_available() -> bool:
    """True when alfworld and textworld's PDDL backend (fast_downward) are importable."""
    return all(importlib.util.find_spec(m) is not None for m in ("alfworld", "textworld", "fast_downward"))


def require_engine() -> None:
    if not engine_available():
        raise InputError(EXTRA_HINT)


@lru_cache(maxsize=1)
def alfworld_dir() -> Path:
    spec = importlib.util.find_spec("alfworld")
    if spec is None or not spec.submodule_search_locations:
        raise InputError(EXTRA_HINT)
    return Path(list(spec.submodule_search_locations)[0])


@lru_cache(maxsize=1)
def domain_and_grammar() -> tuple[str, str]:
    """ALFWorld's PDDL domain and its text grammar (alfred.twl2, with the 'UNKNOWN GOAL' slot)."""
    data = alfworld_dir() / "data"
    return (data / "alfred.pddl").read_text(), (data / "alfred.twl2").read_text()


def layouts_dir() -> Path:
    return alfworld_dir() / "gen" / "layouts"


def make_pddl_env(expert: bool = False):
    """A textworld PddlEnv wrapped as ALFWorld's AlfredTWEnv wraps it (AlfredDemangler without
    shuffling, AlfredInfos), plus the planner expert (AlfredExpert, type 'planner') when asked."""
    require_engine()
    import textworld
    from alfworld.agents.environment.alfred_tw_env import (AlfredDemangler, AlfredExpert, AlfredExpertType,
                                                           AlfredInfos)
    from textworld.envs.pddl import PddlEnv

    infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
    env = AlfredInfos(AlfredDemangler(PddlEnv(infos), shuffle=False))
    if expert:
        env = AlfredExpert(env, expert_type=AlfredExpertType.PLANNER)
    return env


__all__ = ["EXTRA_HINT", "WELCOME", "engine_available", "require_engine", "alfworld_dir", "domain_and_grammar",
           "layouts_dir", "make_pddl_env"]
