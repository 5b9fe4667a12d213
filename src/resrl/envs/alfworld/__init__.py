"""Deprecated: the package moved to `resrl.tasks.alfworld` in resrl 0.2 (this name goes away in 0.3).

Its names are re-exported here, and its modules (`resrl.envs.alfworld.env`, `.engine`,
`.generator`, `.prompts`, `.scenes`, `.command`) are aliases of the moved ones."""

from resrl._deprecation import moved

_new = moved(__name__, "resrl.tasks.alfworld")

(AlfWorldEnv, AlfWorldSpec, make_alfworld_env, alfworld_env_factory, NOTHING_HAPPENS, STYLES, parse_action,
 step_messages, EXTRA_HINT, engine_available, require_engine) = (
    _new.AlfWorldEnv, _new.AlfWorldSpec, _new.make_alfworld_env, _new.alfworld_env_factory, _new.NOTHING_HAPPENS,
    _new.STYLES, _new.parse_action, _new.step_messages, _new.EXTRA_HINT, _new.engine_available, _new.require_engine)

__all__ = ["AlfWorldEnv", "AlfWorldSpec", "make_alfworld_env", "alfworld_env_factory", "NOTHING_HAPPENS", "STYLES",
           "parse_action", "step_messages", "EXTRA_HINT", "engine_available", "require_engine"]
