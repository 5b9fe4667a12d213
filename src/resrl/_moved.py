"""Old import paths of public modules and names that moved (CHANGELOG.md lists each move).

For one minor version after a move, importing an old path raises an `ImportError` that names the new
path, instead of Python's bare "No module named ...": `import resrl.rewards.code` says
"resrl.rewards.code moved to resrl.tasks.code.reward in resrl 0.2.0 (CHANGELOG.md)". A module is
caught by a finder placed last on `sys.meta_path` (asked only after every real finder failed, and
only for the names below); a name inside a module that still exists by that module's
`__getattr__` (`moved_name`). Nothing is re-exported: the new path is the only one that works.
"""

from __future__ import annotations

import sys

UNRELEASED = "unreleased"
# old module -> (where it went, the version that moved it); a package's submodules follow it
MOVED_MODULES: dict[str, tuple[str, str]] = {
    "resrl.rewards.registry": ("resrl.tasks.rewards", "0.2.0"),
    "resrl.envs.agents": ("resrl.tasks.envs", "0.2.0"),
    "resrl.rewards.math": ("resrl.tasks.math.reward", "0.2.0"),
    "resrl.rewards.code": ("resrl.tasks.code.reward", "0.2.0"),
    "resrl.rewards.sandbox": ("resrl.tasks.code.sandbox.runner", "0.2.0"),
    "resrl.rewards.memory_cgroup": ("resrl.tasks.code.sandbox.memory_cgroup", "0.2.0"),
    "resrl.rewards.code_harness": ("resrl.tasks.code.sandbox.code_harness", "0.2.0"),
    "resrl.rewards.code_harness_modes": ("resrl.tasks.code.sandbox.code_harness_modes", "0.2.0"),
    "resrl.rewards.code_values": ("resrl.tasks.code.sandbox.code_values", "0.2.0"),
    "resrl.rewards.code_tests": ("resrl.tasks.code.sandbox.code_tests", "0.2.0"),
    "resrl.data.code": ("resrl.tasks.code.data", "0.2.0"),
    "resrl.data.humanevalplus": ("resrl.tasks.code.humanevalplus", "0.2.0"),
    "resrl.rewards.reasoning_gym": ("resrl.tasks.reasoning_gym.reward", "0.2.0"),
    "resrl.data.reasoning_gym": ("resrl.tasks.reasoning_gym.data", "0.2.0"),
    "resrl.rewards.tools": ("resrl.tasks.tools.parsing, resrl.tasks.tools.bfcl_match and resrl.tasks.tools.reward",
                            "0.2.0"),
    "resrl.data.tools": ("resrl.tasks.tools.data", "0.2.0"),
    "resrl.data.bfcl": ("resrl.tasks.tools.bfcl_data", "0.2.0"),
    "resrl.envs.bfcl": ("resrl.tasks.tools.bfcl_env", "0.2.0"),
    "resrl.eval.bfcl": ("resrl.tasks.tools.evaluate", "0.2.0"),
    "resrl.envs.alfworld": ("resrl.tasks.alfworld", "0.2.0"),
    "resrl.data.alfworld": ("resrl.tasks.alfworld.data", "0.2.0"),
    "resrl.eval.alfworld": ("resrl.tasks.alfworld.evaluate", "0.2.0"),
    "resrl.eval.jobs": ("resrl.experiments.jobs", "0.2.0"),
    "resrl.eval.compare": ("resrl.experiments.compare", "0.2.0"),
    "resrl.demo.command": ("resrl.experiments.command", "0.2.0"),
    "resrl.demo.seeds": ("resrl.experiments.seeds", "0.2.0"),
    "resrl.demo.run": ("resrl.experiments.pipeline", "0.2.0"),
    "resrl.demo.pipeline": ("resrl.experiments.pipeline", "0.2.0"),
    "resrl.demo.parallel": ("resrl.experiments.workers", "0.2.0"),
    "resrl.demo.warmstart": ("resrl.experiments.warmstart", "0.2.0"),
    # not released yet (CHANGELOG.md, "Unreleased"): one experiment pipeline for every kind
    "resrl.experiments.demo": ("resrl.experiments.pipeline, resrl.experiments.kinds and resrl.experiments.method",
                               UNRELEASED),
    "resrl.experiments.steps": ("resrl.experiments.kinds (StepsKind)", UNRELEASED),
    "resrl.experiments.pretrained": ("resrl.experiments.kinds (PretrainedKind)", UNRELEASED),
    "resrl.demo.evaluate": ("resrl.experiments.method", UNRELEASED),
    "resrl.demo.display": ("resrl.experiments.present.display", UNRELEASED),
    "resrl.demo.report": ("resrl.experiments.present.report", UNRELEASED),
    "resrl.demo.plots": ("resrl.experiments.present.plots", UNRELEASED),
    "resrl.demo.weights": ("resrl.experiments.present.omega", UNRELEASED),
    # the TRL engine as a package beside engines/verl/ (issue 53): what only it uses moved with it
    "resrl.engines.trl_compat": ("resrl.engines.trl.compat", UNRELEASED),
    "resrl.engines.trl_config": ("resrl.engines.trl.config", UNRELEASED),
    "resrl.engines.trl_fields": ("resrl.engines.trl.fields", UNRELEASED),
    "resrl.engines.generation": ("resrl.models.generation_paths (GenerationSettings, resolve, PROVED, AUTO) and "
                                 "resrl.engines.trl.generation (TrainerGeneration, OnPolicyCheck, trl_flags)", UNRELEASED),
    "resrl.engines.batches": ("resrl.engines.trl.batches", UNRELEASED),
    "resrl.engines.capture": ("resrl.engines.trl.capture", UNRELEASED),
    "resrl.engines.checkpoints": ("resrl.engines.trl.checkpoints", UNRELEASED),
    "resrl.engines.critic": ("resrl.engines.trl.critic", UNRELEASED),
    "resrl.engines.dynamic_sampling": ("resrl.engines.trl.dynamic_sampling", UNRELEASED),
    "resrl.engines.flowrl_head": ("resrl.engines.trl.flowrl_head", UNRELEASED),
    "resrl.engines.metrics": ("resrl.engines.trl.metrics", UNRELEASED),
    "resrl.engines.phases": ("resrl.engines.trl.phases", UNRELEASED),
    "resrl.engines.reference": ("resrl.engines.trl.reference", UNRELEASED),
    "resrl.engines.rewards": ("resrl.engines.trl.rewards", UNRELEASED),
    "resrl.engines.rules": ("resrl.engines.trl.rules", UNRELEASED),
    "resrl.engines.step_round": ("resrl.engines.trl.step_round", UNRELEASED),
    # sampling lives in resrl.models (issue 53)
    "resrl.eval.generation": ("resrl.models.generators (PerSampleSampler: resrl.models.generation)", UNRELEASED),
}

# (module that stays, name that left it) -> (where the name went, the version that moved it)
MOVED_NAMES: dict[tuple[str, str], tuple[str, str]] = {
    ("resrl.data.loaders", "load_problems"): ("resrl.tasks.data.load_problems", "0.2.0"),
    ("resrl.data.loaders", "load_benchmarks"): ("resrl.tasks.data.load_benchmarks", "0.2.0"),
    ("resrl.data.loaders", "row_to_problem"): ("resrl.tasks.data.row_to_problem", "0.2.0"),
    # resrl.engines.trl was the trainer's module and is the TRL engine's package now: it still gives
    # ResRLTrainer and ResRLGRPOConfig; the module's other names are the trainer module's
    **{("resrl.engines.trl", name): (f"resrl.engines.trl.trainer.{name}", UNRELEASED)
       for name in ("UNSUPPORTED_TRL_OPTIONS", "ROW_KEYS", "MODEL_CARD_SECTION", "LOG_Z_ATTR", "LOG_Z_FILE",
                    "without_log_z_params", "GRPOTrainer")},
    # the eos cut is written once, beside the one generate call (it now also says whether a row ended)
    ("resrl.models.rollout", "cut_after_eos"): ("resrl.models.generation.cut_after_eos", UNRELEASED),
    # not released yet (CHANGELOG.md, "Unreleased"): an experiment is a `resrl train` config plus a start and
    # an evaluator, one `ExperimentConfig` for every demo task
    ("resrl.demo.config", "DemoConfig"): ("resrl.demo.config.ExperimentConfig", UNRELEASED),
    ("resrl.demo.config", "RLConfig"): ("resrl.demo.config.ExperimentConfig (its train section: resrl train's keys)",
                                        UNRELEASED),
    ("resrl.demo.config", "WarmStartConfig"): ("resrl.demo.config.WarmStart", UNRELEASED),
    ("resrl.demo.tasks", "build_task"): ("resrl.demo.tasks.DemoTask.problems", UNRELEASED),
    ("resrl.demo.agents_task", "AgentsDemoConfig"): ("resrl.demo.agents_task.agents_config", UNRELEASED),
    ("resrl.demo.agents_task", "StepDemo"): ("resrl.experiments.kinds.StepGames", UNRELEASED),
    ("resrl.demo.agents_task", "WARM"): ("resrl.demo.config.START", UNRELEASED),
    ("resrl.demo.agents_task", "DEFAULT_ALGORITHMS"): ("resrl.demo.agents_task.STEP_ALGORITHMS", UNRELEASED),
    ("resrl.demo.webshop_task", "WebShopDemoConfig"): ("resrl.demo.webshop_task.webshop_config", UNRELEASED),
    ("resrl.demo.arithmetic_task", "PretrainedDemoConfig"): ("resrl.demo.arithmetic_task.arithmetic_config",
                                                             UNRELEASED),
    ("resrl.experiments.seeds", "WARM_START"): ("resrl.demo.config.START", UNRELEASED),
    ("resrl.experiments.method", "START"): ("resrl.demo.config.START", UNRELEASED),
    ("resrl.experiments.method", "training_config"): ("resrl.experiments.kinds.ExperimentKind.train_config",
                                                       UNRELEASED),
    ("resrl.experiments.seeds", "budget_args"): (
        "resrl.experiments.command.seed_configs (each seed's process runs its ExperimentConfig)", UNRELEASED),
    # one step-episode evaluator (resrl.eval.steps) for every step task; a family gives its environment and scorer
    ("resrl.experiments.kinds", "play"): ("resrl.experiments.kinds.StepsKind.play", UNRELEASED),
    ("resrl.tasks.alfworld.evaluate", "evaluate_alfworld"): ("resrl.eval.steps.evaluate_episodes", UNRELEASED),
    ("resrl.tasks.alfworld.evaluate", "play_episodes"): ("resrl.eval.steps.play_episodes", UNRELEASED),
    ("resrl.tasks.alfworld.evaluate", "dataset_metrics"): (
        "resrl.eval.steps.step_metrics (and resrl.tasks.alfworld.evaluate.task_type_success)", UNRELEASED),
    ("resrl.tasks.alfworld.evaluate", "results_table"): ("resrl.eval.steps.results_table", UNRELEASED),
    ("resrl.tasks.alfworld.evaluate", "table_from_runs"): ("resrl.eval.steps.table_from_runs", UNRELEASED),
    ("resrl.tasks.webshop.evaluate", "evaluate_webshop"): ("resrl.eval.steps.evaluate_episodes", UNRELEASED),
    ("resrl.tasks.webshop.evaluate", "play_episodes"): ("resrl.eval.steps.play_episodes", UNRELEASED),
    ("resrl.tasks.webshop.evaluate", "dataset_metrics"): (
        "resrl.eval.steps.step_metrics (and resrl.tasks.webshop.evaluate.score_by_category)", UNRELEASED),
    ("resrl.tasks.webshop.evaluate", "results_table"): ("resrl.eval.steps.results_table", UNRELEASED),
}


def _message(old: str, new: str, version: str) -> str:
    when = "after resrl 0.2.0" if version == UNRELEASED else f"in resrl {version}"
    return f"{old} moved to {new} {when} (CHANGELOG.md lists every move); import it from there"


def moved_module(fullname: str) -> tuple[str, str] | None:
    """(new path, version) for a moved module or a submodule of a moved package, else None."""
    for old, (new, version) in MOVED_MODULES.items():
        if fullname == old:
            return new, version
        if fullname.startswith(old + "."):
            return new + fullname[len(old):], version
    return None


class MovedFinder:
    """Last on `sys.meta_path`: a module no real finder found, and that moved, is one clear error."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        moved = moved_module(fullname)
        if moved is None:
            return None
        raise ModuleNotFoundError(_message(fullname, *moved), name=fullname)


def moved_name(module: str, name: str) -> Exception:
    """What `module.__getattr__(name)` raises: an ImportError naming the new path for a name that
    moved, else the usual AttributeError."""
    if (module, name) in MOVED_NAMES:
        return ImportError(_message(f"{module}.{name}", *MOVED_NAMES[module, name]), name=module)
    return AttributeError(f"module {module!r} has no attribute {name!r}")


def install() -> None:
    if not any(isinstance(f, MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(MovedFinder())


__all__ = ["MOVED_MODULES", "MOVED_NAMES", "MovedFinder", "moved_module", "moved_name", "install"]
