"""The WebShop family: WebShop-format shopping tasks (Yao et al. 2022) — catalogs and goals in
WebShop's own files (`data.py`: a user's real WebShop data/ folder or a generated one), the site as
text (`site.py`), WebShop's reward (`reward.py`), BM25 search (`search.py`), the environment
(`env.py`, trained with `env.name: webshop` in the step layout), reference policies
(`policies.py`), the generator (`generator.py`, `resrl make-webshop`) and the evaluation in the
paper's columns, score and success (`evaluate.py`).

    from resrl.tasks.webshop import WebShopSpec, load_goal_rows
    rows = load_goal_rows("webshop-small:test")
    env = WebShopSpec(max_steps=15).build(); env.reset(rows[0]); env.step_prompt(); env.step(text)

Importing this package needs nothing beyond resrl (rapidfuzz is imported when a purchase is scored).
"""

from resrl.tasks.registry import Deferred, EnvSpec, Evaluator, TaskFamily
from resrl.tasks.webshop.data import SPEC_PREFIXES as PREFIXES  # stdlib only: 'webshop:', the packaged sets


def _games(spec: str, limit: int | None = None) -> list[dict]:
    """Step-layout rows of a goal set: prompt = the goal row as JSON, answer = its id."""
    import json

    from resrl.tasks.webshop.data import load_goal_rows

    return [{"prompt": json.dumps(row, sort_keys=True), "answer": str(row["id"])} for row in load_goal_rows(spec, limit)]


FAMILY = TaskFamily(
    name="webshop", prefixes=PREFIXES, games=_games,
    envs=(EnvSpec("webshop", layouts=("step",), step_factory="resrl.tasks.webshop.env:webshop_step_env",
                  layout_reason="a 15-step episode of result pages as one concatenated sequence passes 20k tokens",
                  ends_at_max_steps=True),),
    evaluator=Evaluator(takes=lambda spec: True, run=Deferred("resrl.tasks.webshop.evaluate:eval_report"),
                        arguments=Deferred("resrl.tasks.webshop.evaluate:eval_arguments")),
    commands=("resrl.tasks.webshop.command",))


_PUBLIC = ("env", "data", "reward", "policies", "evaluate")


def __getattr__(name: str):  # the public names of the modules, imported on first use (registering imports nothing)
    import importlib

    if name in _PUBLIC:
        return importlib.import_module(f"{__name__}.{name}")
    for module in _PUBLIC:
        mod = importlib.import_module(f"{__name__}.{module}")
        if name in getattr(mod, "__all__", ()):
            return getattr(mod, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["FAMILY", "PREFIXES"]
