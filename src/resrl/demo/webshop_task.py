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
   on the goals of `bc_products` training products, stopped when sampled success on `bc_dev_games`
   goals of the other training products reaches `bc_target` (else the best check is kept);
3. RL per method with step-level rollouts (`env.layout: step`, EnvPool workers); every method
   trains on the same reward, nothing in the task is method-specific;
4. evaluation on the held-out goals: success and score, greedy and sampled (`eval_samples` per goal).

OUT/summary.json has per policy `greedy`, `avg` (sampled success), `score` / `greedy_score` (WebShop's
score, mean over episodes), `pass_at`, standard errors over goals: the keys `--seeds` aggregates.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from resrl.demo.agents_task import DEFAULT_ALGORITHMS, prefix_phases

TRAIN_ORDER_SEED = 1  # the training goals' order for seed S: S + 1 (which goals behaviour cloning sees)


def target_asin(game: str) -> str:
    """The ASIN of the product a goal (a step game: JSON text) asks for."""
    return json.loads(game)["goal"]["asin"]


@dataclass
class WebShopDemoConfig:
    out: str = "runs/demo-webshop"
    seed: int = 0
    task_name: str = "webshop"
    algorithms: tuple = DEFAULT_ALGORITHMS
    train_data: str = "webshop-medium:train"  # 480 goals on 120 target products
    test_data: str = "webshop-medium:test"    # 200 goals on 50 other target products
    page_size: int = 5                        # results per page (WebShop: 10): the page fits the tiny model
    reward: str = "score"                     # the step reward of a purchase: WebShop's score (or "success")
    # warm start: behaviour cloning on the expert's walkthroughs of the training goals of the first
    # `bc_products` target products (in the seed's order; at most `bc_games` goals), its check and RL on the
    # goals of the other products: RL meets products the warm start never saw, as the held-out goals are.
    # With every training goal cloned (bc_products None) the warm start won 60 % of its training episodes
    # and 18 % on webshop-small:dev: RL had nothing left to learn on its goals and dev did not move.
    # With 40 cloned goals (182 steps) the tiny model memorised them (loss 0.04) and failed on others;
    # with 80 (webshop-small) it still could not copy an unseen product's words and ASIN (4 % held out);
    # with 360 of webshop-medium's 90 products it copies them (26 % greedy on dev), see docs/tasks/webshop.md.
    bc_products: int | None = 90
    bc_games: int = 400
    bc_steps: int = 1500
    bc_target: float | None = 0.3
    bc_dev_games: int = 16
    bc_check_every: int = 100  # a check plays 64 episodes of up to 10 steps: every 100 steps, not the corridor's 10
    bc_lr: float = 3e-3
    bc_batch: int = 16
    # RL (resrl train, env.layout: step)
    rounds: int = 15
    updates_per_round: int = 2
    warmup_rounds: int = 3
    learning_rate: float = 5e-4
    rollout_prompts: int = 8
    group_size: int = 8
    history_window: int = 0
    max_steps: int = 10
    max_step_tokens: int = 80
    temperature: float = 1.0
    loss_agg: str = "token-mean"
    save_steps: int = 10  # a checkpoint every N updates: a run killed while training resumes from it (0: none)
    overrides: tuple = ()
    eval_samples: int = 4
    threads: int = 1
    is_quick: bool = False
    model: dict = field(default_factory=lambda: dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                     num_key_value_heads=2, head_dim=16, intermediate_size=128,
                                                     max_position_embeddings=1024))

    def __post_init__(self) -> None:
        if self.updates_per_round < 1 or self.rollout_prompts % self.updates_per_round:
            raise ValueError(f"WebShopDemoConfig.updates_per_round must divide rollout_prompts ({self.rollout_prompts})")

    @classmethod
    def quick(cls, **kw) -> "WebShopDemoConfig":
        base = dict(bc_games=16, bc_steps=40, bc_target=None, rounds=2, warmup_rounds=1, eval_samples=1,
                    rollout_prompts=4, group_size=4, updates_per_round=2, max_steps=6, is_quick=True)
        base.update(kw)
        return cls(**base)

    # -- the step-layout experiment's hooks (resrl.demo.agents_task.StepDemo) ---------------------------
    def games(self) -> tuple[list, list, dict]:
        from resrl.tasks.envs import step_games

        train = [r["prompt"] for r in step_games(self.train_data)]
        random.Random(self.seed + TRAIN_ORDER_SEED).shuffle(train)
        test = [r["prompt"] for r in step_games(self.test_data, limit=8 if self.is_quick else None)]
        targets = lambda games: {target_asin(g) for g in games}  # noqa: E731
        assert not targets(train) & targets(test), "held-out goals must ask for other products"
        return train, test, {"train_products": len(targets(train)), "test_products": len(targets(test))}

    def phases(self, train: list) -> tuple[list, list, list]:
        """(cloning goals, check goals, RL goals): with `bc_products`, cloning on the goals of the first
        `bc_products` target products of `train`'s order, the check and RL on the goals of the others;
        without, the corridor's phases (cloning on the first `bc_games`, RL on all)."""
        if self.bc_products is None:
            return prefix_phases(train, self.bc_games, self.bc_dev_games)
        products = list(dict.fromkeys(target_asin(g) for g in train))  # in train's (seeded) order
        if not 0 < self.bc_products < len(products):
            raise ValueError(f"WebShopDemoConfig.bc_products must be in 1..{len(products) - 1} (the training goals "
                             f"ask for {len(products)} products), got {self.bc_products}")
        cloned = set(products[:self.bc_products])
        rl = [g for g in train if target_asin(g) not in cloned]
        return [g for g in train if target_asin(g) in cloned][:self.bc_games], rl[:self.bc_dev_games], rl

    def env(self) -> tuple[str, dict]:
        return "webshop", {"prompt_style": "compact", "page_size": self.page_size, "reward": self.reward}

    def expert_samples(self, games) -> list:
        """(step prompt messages, expert reply) for every step of the expert's walkthrough of each goal."""
        from resrl.tasks.envs import load_step_factory

        name, options = self.env()
        factory = load_step_factory(name, "webshop demo")
        out = []
        for g in games:
            env = factory(g, history_window=self.history_window, max_steps=self.max_steps, **options)
            env.reset()
            for _ in range(self.max_steps):
                reply = env.expert_action()
                out.append((env.step_prompt(), reply))
                if env.step(reply).done:
                    break
        return out

    def report_header(self, summary: dict) -> list[str]:
        """report.md's title and what the task, its split and its budgets are (the steps report's table follows)."""
        return [f"# WebShop-format demo (step layout), seed {self.seed}", "",
                f"Held-out: {summary['test_games']} goals ({self.test_data}) asking for {summary['test_products']} "
                f"products no training goal asks for; {summary['train_games']} training goals ({self.train_data}). "
                f"Generated catalog and instructions in WebShop's format (not WebShop's data). Warm start: "
                f"{summary.get('bc_steps', self.bc_steps)} behaviour-cloning steps on the expert's walkthroughs of "
                f"{summary.get('bc_games', self.bc_games)} goals"
                + (f" of {self.bc_products} products; RL on the {summary.get('rl_games')} goals of the other "
                   f"training products" if self.bc_products else "")
                + f". RL: {self.rounds} rounds of {self.rollout_prompts} goals x {self.group_size} "
                f"episodes, {self.updates_per_round} updates per round, lr {self.learning_rate}, reward: WebShop's "
                f"{self.reward}; at most {self.max_steps} steps per episode."]


def webshop_config(quick: bool = False) -> WebShopDemoConfig:
    return WebShopDemoConfig.quick() if quick else WebShopDemoConfig()


__all__ = ["WebShopDemoConfig", "webshop_config"]
