"""The WebShop demo task (`resrl demo --task webshop`): WebShop-format shopping as data. Run by the
steps experiment kind (`resrl.experiments.kinds.StepsKind`), as the corridor (`--task agents`) is.

1. goals: a generated WebShop-format catalog shipped with the webshop family
   (`webshop-medium:train` / `webshop-medium:test`: 200 products of 5 types, one per WebShop category,
   800 template-written instructions; generated, NOT WebShop's data). The split is by target product, so the
   **held-out goals ask for products no training goal asks for**. The environment is the family's
   `env.name: webshop` (search, result pages, item pages, options, buy now; WebShop's reward, the
   score, as the step reward; success = score 1), with the compact prompt (instruction and page,
   no history) the tiny character model can read;
2. the warm start: behaviour cloning on the family's scripted expert (`WebShopEnv.expert_action`: search
   the instruction's attributes and product type, click a product that can score 1, its options, buy)
   on the goals of `WebShopGoals.clone_products` training products, stopped when sampled success on
   `start.dev_games` goals of the other training products reaches `start.target_success` (else the
   best check is kept);
3. RL per method with step-level rollouts (`env.layout: step`, EnvPool workers); every method
   trains on the same reward, nothing in the task is method-specific;
4. evaluation on the held-out goals (or the dev split's, `--eval-split dev`, where `--grid` chooses):
   success and score, greedy and sampled (`eval.n` per goal).

OUT/summary.json has per policy `greedy`, `avg` (sampled success), `score` / `greedy_score` (WebShop's
score, mean over episodes), `pass_at`, standard errors over goals: the keys `--seeds` aggregates.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from resrl.demo.agents_task import STEP_ALGORITHMS, STEP_QUICK_KEYS, STEP_TRAINING, prefix_phases, rl_budget
from resrl.demo.config import BehaviourCloning, ExperimentConfig, StepEval, with_overrides

TRAIN_ORDER_SEED = 1  # the training goals' order for seed S: S + 1 (which goals behaviour cloning sees)


def target_asin(game: str) -> str:
    """The ASIN of the product a goal (a step game: JSON text) asks for."""
    return json.loads(game)["goal"]["asin"]


@dataclass
class WebShopGoals:
    """The goals of the WebShop demo (module docstring, 1.) and how the start and RL share them.

    train_data, test_data, dev_data   goal sets (`resrl.tasks.envs.step_games` specs): 480 training goals
                        on 120 target products, 200 held-out goals on 50 others, the dev split's on 30 more
    test_limit          held-out (or dev) goals played, the first N (None: all)
    clone_products      behaviour cloning sees the training goals of the first N target products (in the
                        seed's order), its check and RL the goals of the others: RL meets products the warm
                        start never saw, as the held-out goals are. The tiny model learns to copy an unseen
                        product's words and ASIN only from enough cloned products (docs/tasks/webshop.md);
                        None: clone the first `start.games` goals, RL on all (the corridor's phases)
    """

    train_data: str = "webshop-medium:train"
    test_data: str = "webshop-medium:test"
    dev_data: str | None = "webshop-medium:dev"
    test_limit: int | None = None
    clone_products: int | None = 90

    # -- the steps kind's hooks (resrl.experiments.kinds.StepGames) -------------------------------------------
    def has_dev_split(self) -> bool:
        return self.dev_data is not None

    def games(self, seed: int, split: str = "test") -> tuple[list, list, dict]:
        """(training goals in the seed's order, the held-out (or dev) goals, the split's facts)."""
        from resrl.tasks.envs import step_games

        train = [r["prompt"] for r in step_games(self.train_data)]
        random.Random(seed + TRAIN_ORDER_SEED).shuffle(train)
        test = [r["prompt"] for r in step_games(self.test_data if split == "test" else self.dev_data,
                                                 limit=self.test_limit)]
        targets = lambda games: {target_asin(g) for g in games}  # noqa: E731
        assert not targets(train) & targets(test), "held-out goals must ask for other products"
        return train, test, {"train_products": len(targets(train)), "test_products": len(targets(test))}

    def phases(self, train: list, start: BehaviourCloning) -> tuple[list, list, list]:
        """(cloning goals, check goals, RL goals): with `clone_products`, cloning on the goals of the first
        `clone_products` target products of `train`'s order, the check and RL on the goals of the others;
        without, the corridor's phases (cloning on the first `start.games`, RL on all)."""
        if self.clone_products is None:
            return prefix_phases(train, start.games, start.dev_games)
        products = list(dict.fromkeys(target_asin(g) for g in train))  # in train's (seeded) order
        if not 0 < self.clone_products < len(products):
            raise ValueError(f"WebShopGoals.clone_products must be in 1..{len(products) - 1} (the training goals "
                             f"ask for {len(products)} products), got {self.clone_products}")
        cloned = set(products[:self.clone_products])
        rl = [g for g in train if target_asin(g) not in cloned]
        return [g for g in train if target_asin(g) in cloned][:start.games], rl[:start.dev_games], rl

    def expert_samples(self, games, section) -> list:
        """(step prompt messages, expert reply) for every step of the expert's walkthrough of each goal in
        the training config's environment (`section`: its EnvSection)."""
        from resrl.tasks.envs import load_step_factory

        factory = load_step_factory(section.name, "webshop demo")
        out = []
        for g in games:
            env = factory(g, history_window=section.history_window, max_steps=section.max_steps, **section.options)
            env.reset()
            for _ in range(section.max_steps):
                reply = env.expert_action()
                out.append((env.step_prompt(), reply))
                if env.step(reply).done:
                    break
        return out

    def report_header(self, cfg: ExperimentConfig, summary: dict) -> list[str]:
        """report.md's title and what the task, its split and its budgets are (the steps report's table follows)."""
        env = cfg.train["env"]
        return [f"# WebShop-format demo (step layout), seed {cfg.seed}", "",
                f"{'Held-out' if cfg.eval_split == 'test' else 'Dev split'}: {summary['test_games']} goals "
                f"({self.test_data if cfg.eval_split == 'test' else self.dev_data}) "
                f"asking for {summary['test_products']} products no training goal asks for; {summary['train_games']} "
                f"training goals ({self.train_data}). Generated catalog and instructions in WebShop's format (not "
                f"WebShop's data). Warm start: {summary.get('bc_steps', cfg.start.max_steps)} behaviour-cloning steps "
                f"on the expert's walkthroughs of {summary.get('bc_games', cfg.start.games)} goals"
                + (f" of {self.clone_products} products; RL on the {summary.get('rl_games')} goals of the other "
                   f"training products" if self.clone_products else "")
                + f". {rl_budget(cfg, 'goals', 'episodes')} Reward: WebShop's {env['options']['reward']}; at most "
                f"{env['max_steps']} steps per episode."]


def webshop_config(quick: bool = False) -> ExperimentConfig:
    """`resrl demo --task webshop`: the corridor's step training (STEP_TRAINING) in the family's
    `webshop` environment with the compact prompt (instruction and page, no history: what the tiny
    character model can read), 5 results a page (WebShop: 10; the page fits the tiny model), 80
    tokens a step (a search copies the instruction's words), WebShop's score as the purchase's
    reward; 15 rounds of 8 goals x 8 episodes. Behaviour cloning runs up to 1500 steps to sampled
    success 0.3, checked every 100 steps (a check plays 64 episodes of up to 10 steps); 4 sampled
    episodes per held-out goal."""
    start = BehaviourCloning(games=400, max_steps=1500, target_success=0.3, check_every=100,
                             model={**BehaviourCloning().model, "max_position_embeddings": 1024})
    cfg = ExperimentConfig(task_name="webshop", train=STEP_TRAINING, start=start, eval=StepEval(n=4),
                           task=WebShopGoals(), algorithms=STEP_ALGORITHMS, out="runs/demo-webshop", is_quick=quick)
    keys = ["env.name=webshop", "env.max_step_tokens=80", "env.options={prompt_style: compact, page_size: 5, "
            "reward: score}", "train.max_steps=30", "train.rollout_prompts=8", "train.update_prompts=4",
            "train.warmup_steps=6"]
    if quick:
        keys += [*STEP_QUICK_KEYS, "train.rollout_prompts=4", "train.update_prompts=2", "env.max_steps=6",
                 "eval.n=1", "task.test_limit=8"]
    return with_overrides(cfg, keys)



def __getattr__(name: str):
    """A name that left this module (WebShopDemoConfig): an ImportError naming its new path (resrl._moved)."""
    from resrl._moved import moved_name

    raise moved_name(__name__, name)

__all__ = ["WebShopGoals", "webshop_config", "target_asin"]
