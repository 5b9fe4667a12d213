"""Agent environments of the step-level layout by name (config `env.name`) and their game lists
(config `data.train`), looked up in `resrl.tasks.registry` beside it.

    env.name: NAME            -> the step-layout factory a task family registers under NAME
                                 (resrl.tasks.registry.EnvSpec.step_factory; e.g. alfworld)
    env.name: module:function -> that factory, called as factory(prompt, history_window=..., **env.options)

A game travels to the environment workers as the data row's prompt (for a family's game set, the
family's row, e.g. ALFWorld's task row as JSON); the worker builds the env with the factory and
calls `env.reset()`.
"""

from __future__ import annotations

from resrl.tasks import registry as tasks


def step_factory(name: str) -> str:
    """The "module:function" of the step-layout factory for `env.name`: a family's registered one,
    else `name` itself (a user factory)."""
    spec = tasks.env_spec(name)
    return spec.step_factory if spec is not None and spec.step_factory else name


def load_step_factory(name: str, key: str):
    """The step-layout factory `env.name`-style `name` resolves to (`step_factory`), loaded and
    checked: callable, and picklable (environment workers import it by name). InputError naming
    `key` (e.g. "config key 'env.name'", "--env") otherwise."""
    import pickle

    from resrl.errors import InputError
    from resrl.user_code import load_user_object

    spec = step_factory(name)
    try:
        factory = load_user_object(spec, f"environment factory ({key})")
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - e.g. an optional engine that is not installed
        raise InputError(f"{key}: {name!r} cannot be loaded ({spec}): {exc}") from exc
    if not callable(factory):
        raise InputError(f"{key}: {spec!r} is not callable")
    try:
        pickle.dumps(factory)
    except Exception as exc:  # noqa: BLE001
        raise InputError(f"{key}: {spec!r} must be a module-level function of an importable module "
                         f"(environment workers import it by name): {exc}") from exc
    return factory


def step_games(spec: str, data_dir: str | None = None, limit: int | None = None) -> list[dict]:
    """Rows {"prompt", "answer"} of the games named by `data.train`: a task family's game set (e.g.
    alfworld:SPLIT, alfworld-synth:DIR:SPLIT; prompt = the task row as JSON) or any file / data set
    of resrl.tasks.data (prompt = the problem's prompt, handed to the factory as is)."""
    family = tasks.family_for_data(spec)
    if family is not None and family.games is not None:
        return family.games(spec, limit)
    from resrl.tasks.data import load_problems

    return [{"prompt": p.prompt, "answer": p.id} for p in load_problems(spec, data_dir=data_dir, limit=limit)]


def __getattr__(name: str):
    if name == "STEP_ENVS":  # {env.name: "module:function"} of the families' step-layout factories
        return {e.name: e.step_factory for f in tasks.families() for e in f.envs if e.step_factory}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["STEP_ENVS", "step_factory", "load_step_factory", "step_games"]
