"""The agents demo task (`resrl demo --task agents`): the corridor game (resrl.envs.toy) as data, and
its budgets. Run by the step-layout experiment kind (`resrl.experiments.kinds.StepsKind`).

1. games: corridors of 2..`max_length` rooms; the task "open the red door": the goal's door has one colour and
   a decoy door in another room another (drawn per game from `colours`), and every observation says where each
   coloured door is from here, so the agent has to match the task's colour against the observation's
   (opening the decoy loses). Every (length, goal) pair is one task; the pairs are shuffled with the seed and split
   in two, so the **held-out games are tasks no training game has** (not just other ids of the same tasks).
   Several steps matter (walk to the door, open it) and a wrong move is recoverable (walk on or back);
2. the warm-start source: the scripted expert's walkthroughs (`expert_samples`) of training games, which a
   tiny character-level model imitates (behaviour cloning) until its sampled success on other training
   games reaches `bc_target` (so it leaves room, and every seed starts from about the same skill);
3. budgets: `agents_config` (RL with `env.layout: step`, environments in the real `EnvPool` workers);
4. evaluation: success on the held-out games with the step-layout evaluator (resrl.eval.steps), greedy (one
   episode per game) and sampled at the training temperature (`eval.n` episodes per game).

The report (`resrl.experiments.present.report.steps_report`) writes OUT/report.md and OUT/training_success.png;
OUT/summary.json has per policy `greedy`, `avg` = sampled success, `pass_at` {1, n}, the standard error over
games: the keys of the other demos, so `--seeds` aggregates it the same way.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from resrl.demo.config import BehaviourCloning, ExperimentConfig, StepEval, with_overrides

STEP_ALGORITHMS = ("grpo", "gigpo", "empg", "resrl")

# the random streams of one seed S: offsets from S, fixed (every published number was drawn with them)
TRAIN_GAMES_SEED = 1  # the training games' order and colours: S + 1
TEST_GAMES_SEED = 2   # the held-out games': S + 2
EVAL_SEED = 7         # the sampled evaluation: S + 7
BC_CHECK_SEED = 11    # the behaviour-cloning stop check's episodes: S + 11

# The corridor's RL (`resrl train` keys): 20 generation rounds of 16 games x 8 trajectories, two
# updates of 64 trajectories per round (fewer trajectories per update made the updates mostly noise:
# docs/results.md), the learning rate warmed up over the first 5 rounds (Adam's first steps are
# lr-sized), a checkpoint every 10 updates (a killed run resumes from it). The observation holds the
# whole state, so no history (one only invites copying); 700 prompt tokens hold any step prompt.
STEP_TRAINING = {
    "reward": {"function": "env"},
    "env": {"name": "resrl.envs.toy:make_toy_env", "layout": "step", "history_window": 0, "max_steps": 10,
            "max_step_tokens": 32, "num_workers": 1},
    "train": {"max_steps": 40, "rollout_prompts": 16, "update_prompts": 8, "warmup_steps": 10, "group_size": 8,
              "learning_rate": 5e-4, "temperature": 1.0, "max_prompt_length": 700},
    "loss": {"agg": "token-mean"},
    "log": {"progress": False, "report_to": ["none"]},
    "checkpoint": {"save_steps": 10},
}
# `--quick` of a step task: a smoke run of about a minute, two rounds of two updates
STEP_QUICK_KEYS = ("start.games=16", "start.max_steps=40", "start.target_success=null", "train.max_steps=4",
                   "train.warmup_steps=2", "train.group_size=4")


@dataclass
class CorridorGames:
    """The corridor's tasks and games (module docstring, 1.).

    max_length           corridors of 2..max_length rooms: 21 (length, goal) tasks
    test_fraction        of the (length, goal) tasks, held out
    train_games          training games (ids) drawn from the training tasks
    colours              the goal's and a decoy's door colour, drawn per game: without them the task is
                         "open the door of room g", which the tiny model does not learn to read on unseen
                         (length, goal) tasks (it walks a fixed number of rooms, docs/results.md)
    test_games_per_task  held-out games (ids) per held-out task: 32 games by default
    """

    max_length: int = 7
    test_fraction: float = 0.4
    train_games: int = 64
    colours: tuple = ("red", "blue", "green")
    test_games_per_task: int = 4

    def __post_init__(self) -> None:
        if self.colours and (len(set(self.colours)) < 2 or not all(str(c).isalpha() for c in self.colours)):
            raise ValueError(f"CorridorGames.colours must be empty or two or more distinct words, got {self.colours!r}")

    # -- what the steps kind (resrl.experiments.kinds.StepsKind) asks of a step task's games (`StepGames`)
    def has_dev_split(self) -> bool:
        return False  # its 21 tasks leave no third split: the held-out games are tasks no training game has

    def games(self, seed: int, split: str = "test") -> tuple[list, list, dict]:
        """(training games, held-out games, what summary.json records about the split)."""
        train_tasks, test_tasks = split_tasks(self.max_length, self.test_fraction, seed)
        train, test = games_for(self, seed)
        assert not {task_of(g) for g in train} & {task_of(g) for g in test}
        return train, test, {"train_tasks": train_tasks, "test_tasks": test_tasks}

    def phases(self, train: list, start: BehaviourCloning) -> tuple[list, list, list]:
        """(behaviour-cloning games, its check's games, RL games): `prefix_phases`."""
        return prefix_phases(train, start.games, start.dev_games)

    def expert_samples(self, games, section) -> list:
        """(step prompt messages, expert reply) pairs of the scripted expert on `games` (behaviour cloning),
        in the training config's environment (`section`: its EnvSection)."""
        return expert_samples(games, section.history_window)

    def report_header(self, cfg: ExperimentConfig, summary: dict) -> list[str]:
        """report.md's title and what the task, its split and its budgets are (the steps report's table follows)."""
        return [f"# Agents demo (corridor, step layout), seed {cfg.seed}", "",
                f"Held-out: {summary['test_games']} games of {len(summary['test_tasks'])} (length, goal) tasks that "
                f"no training game has; {summary['train_games']} training games of {len(summary['train_tasks'])} "
                f"tasks. Warm start: {summary.get('bc_steps', cfg.start.max_steps)} behaviour-cloning steps on "
                f"{cfg.start.games} games" + _kept(summary) + f". {rl_budget(cfg, 'games', 'trajectories')}"]


def _kept(summary: dict) -> str:
    return (f" (weights kept from step {summary['bc_kept']}, its best check)"
            if summary.get("bc_kept") not in (None, summary.get("bc_steps")) else "")


def rl_budget(cfg: ExperimentConfig, prompts: str, samples: str) -> str:
    """The report's sentence on a step task's RL budget, read from its training config."""
    t = cfg.train["train"]
    per_round = t["rollout_prompts"] // (t.get("update_prompts") or t["rollout_prompts"])
    return (f"RL: {t['max_steps'] // per_round} rounds of {t['rollout_prompts']} {prompts} x {t['group_size']} "
            f"{samples}, {per_round} updates per round, lr {t['learning_rate']} (linear warm-up over "
            f"{t.get('warmup_steps', 0) // per_round} rounds), loss.agg {cfg.train.get('loss', {}).get('agg')}.")


def agents_config(quick: bool = False) -> ExperimentConfig:
    """`resrl demo --task agents`: behaviour cloning to sampled success 0.7 (with the compass the only
    clue, a warm start stopped at 0.5 is mostly colour-blind, and RL sharpened that shortcut instead of
    the colour), then STEP_TRAINING; 8 sampled episodes per held-out game."""
    cfg = ExperimentConfig(task_name="agents", train=STEP_TRAINING, start=BehaviourCloning(), eval=StepEval(n=8),
                           task=CorridorGames(), algorithms=STEP_ALGORITHMS, out="runs/demo-agents", is_quick=quick)
    if not quick:
        return with_overrides(cfg, ())
    return with_overrides(cfg, (*STEP_QUICK_KEYS, "task.train_games=16", "task.test_games_per_task=1",
                                "train.rollout_prompts=8", "train.update_prompts=4", "env.max_steps=8", "eval.n=2"))


# -- games ------------------------------------------------------------------------------------------

def prefix_phases(train: list, bc_games: int, bc_dev_games: int) -> tuple[list, list, list]:
    """A step demo's phases out of its training games: cloning on the first `bc_games`, its check on
    the next `bc_dev_games`, RL on all of them."""
    return train[:bc_games], train[bc_games:bc_games + bc_dev_games], train


def split_tasks(max_length: int, test_fraction: float, seed: int) -> tuple[list, list]:
    """(train, test) lists of (length, goal) tasks: disjoint, a pure function of the arguments."""
    tasks = [(length, goal) for length in range(2, max_length + 1) for goal in range(1, length)]
    random.Random(seed).shuffle(tasks)
    n_test = max(1, round(len(tasks) * test_fraction))
    return sorted(tasks[n_test:]), sorted(tasks[:n_test])


def make_games(tasks, n: int, prefix: str, seed: int, colours: tuple = ()) -> list[str]:
    """`n` game specs (JSON strings, resrl.envs.toy's format) cycling through `tasks` in a seeded order.
    With `colours` (two or more), the goal's door gets one of them and a decoy door another, in another room
    (all drawn per game)."""
    rng = random.Random(seed)
    order = list(tasks)
    rng.shuffle(order)
    games = []
    for i in range(n):
        length, goal = order[i % len(order)]
        spec = {"game": f"{prefix}-{i}", "length": length, "goal": goal}
        if colours:
            colour, decoy = rng.sample(list(colours), 2)
            # not in room 0 where there is another room for it: a policy that never opens the first door would
            # get that decoy for free (in 2-room corridors room 0 is the only other room)
            rooms = [r for r in range(1, length) if r != goal] or [0]
            spec.update(colour=colour, decoys={decoy: rng.choice(rooms)})
        games.append(json.dumps(spec, sort_keys=True))
    return games


def task_of(game: str) -> tuple[int, int]:
    spec = json.loads(game)
    return int(spec["length"]), int(spec["goal"])


def games_for(games: CorridorGames, seed: int) -> tuple[list[str], list[str]]:
    """(training games, held-out games) of seed `seed`."""
    train_tasks, test_tasks = split_tasks(games.max_length, games.test_fraction, seed)
    train = make_games(train_tasks, games.train_games, f"train{seed}", seed + TRAIN_GAMES_SEED, games.colours)
    test = make_games(test_tasks, len(test_tasks) * games.test_games_per_task, f"test{seed}",
                      seed + TEST_GAMES_SEED, games.colours)
    return train, test


def expert_samples(games, history_window):
    """(step prompt messages, expert reply) for every step of the expert's walkthrough of each game."""
    from resrl.envs.toy import expert_action, make_toy_env

    out = []
    for g in games:
        env = make_toy_env(g, history_window=history_window)
        env.reset()
        for _ in range(20):
            act = expert_action(env)
            out.append((env.step_prompt(), f"<action>{act}</action>"))
            if env.step(f"<action>{act}</action>").done:
                break
    return out



def __getattr__(name: str):
    """A name that left this module (AgentsDemoConfig, StepDemo, WARM, DEFAULT_ALGORITHMS): an ImportError naming its new path (resrl._moved)."""
    from resrl._moved import moved_name

    raise moved_name(__name__, name)

__all__ = ["CorridorGames", "agents_config", "STEP_ALGORITHMS", "STEP_TRAINING", "STEP_QUICK_KEYS", "rl_budget",
           "prefix_phases", "split_tasks", "make_games", "task_of", "games_for", "expert_samples"]
