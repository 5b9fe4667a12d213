"""Reference policies on WebShop-format goals: a scripted expert, a random policy, WebShop's rule baseline.

Each is `policy(env) -> the model-style reply` (an <action> block, with a <think> block for the
verl-agent prompt style), so it plays through `WebShopEnv.step` exactly as a model does.

expert      reads the goal (privileged, as ALFWorld's planner expert reads the game): searches the
            goal's attributes the instruction says and its search query when the instruction contains
            it (generated sets: "dark roast low acid coffee beans"), else the instruction without its
            price clause; on a results page clicks the first product that
            can score 1 (right type, every goal attribute, the goal's options on offer, under the
            price ceiling), else pages on (up to `max_pages`), else clicks the best-scoring product
            of the page; on the item page clicks each goal option the product offers, then buys.
random      a uniformly random admissible action; its searches are 1-3 random words of the instruction.
rule        WebShop paper's rule baseline: search the instruction, click the first result, buy.

resrl.tasks.webshop.evaluate.play(rows, policy, spec) plays one on goal rows.
"""

from __future__ import annotations

import random
import re
from typing import Callable

from resrl.tasks.webshop.reward import fuzzy_equal, normalize_color, resolve_words, webshop_reward

_PRICE_CLAUSE = re.compile(r",?\s*and price lower than [\d.]+ dollars\s*$")


def reply(env, action: str, thought: str = "") -> str:
    """An action as the model would answer it in the env's prompt style."""
    if env.spec.prompt_style == "verl-agent":
        return f"<think>{thought or 'this action advances the goal'}</think><action>{action}</action>"
    return f"<action>{action}</action>"


def _says(words: list[str], phrase: str) -> bool:
    p = phrase.lower().split()
    return bool(p) and any(words[i:i + len(p)] == p for i in range(len(words) - len(p) + 1))


def search_text(goal) -> str:
    """What the expert searches: the goal's attributes that the instruction says, then its query, when
    the instruction says the query (a human searcher's "dark roast low acid coffee beans": BM25 then
    ranks a product that can score 1 first on 88 % of webshop-small's training goals, where the bare
    query "coffee beans" lists the type in index order and leaves the choice to paging and reading
    titles); else the instruction without the price clause."""
    words = goal.instruction.lower().split()
    if _says(words, goal.query):
        return " ".join([a.lower() for a in goal.attributes if _says(words, a)] + [goal.query.lower()])
    return _PRICE_CLAUSE.sub("", goal.instruction.lower()).strip()


def best_options(product, goal) -> dict:
    """{option name: value}: for each goal option, the first value of a not yet used option name
    of `product` that fuzzy-matches it (colour-normalised, as the reward compares)."""
    chosen = {}
    for g in goal.options:
        g_n = normalize_color(g)
        for name, values in product.options.items():
            if name in chosen:
                continue
            v = next((v for v in values if fuzzy_equal(normalize_color(v), g_n)), None)
            if v is not None:
                chosen[name] = v
                break
    return chosen


def potential(env, product) -> float:
    """The score buying `product` with its best options would get."""
    return webshop_reward(product, env.goal, env.catalog.prices[product.asin], best_options(product, env.goal),
                          words=resolve_words(env.spec.type_words)).score


def expert_action(env, max_pages: int = 5) -> str:
    """The scripted expert's reply for the env's current page (module docstring)."""
    site, goal = env.site, env.goal
    s = site.session
    if s.page == "search":
        return reply(env, f"search[{search_text(goal)}]", "search for the product the instruction names")
    if s.page == "sub":
        return reply(env, "click[< prev]")
    if s.page == "results":
        shown = site.page_products()
        perfect = [p for p in shown if potential(env, p) == 1.0]
        if perfect:
            return reply(env, f"click[{perfect[0].asin.lower()}]", "this product matches every requirement")
        if shown and s.page_no < max_pages and s.page_no * site.page_size < len(s.results):
            return reply(env, "click[next >]", "no product here matches everything")
        if not shown:
            return reply(env, "click[back to search]" if s.page_no == 1 else "click[< prev]")
        best = max(shown, key=lambda p: potential(env, p))
        return reply(env, f"click[{best.asin.lower()}]", "the closest match")
    product = env.catalog.by_asin[s.asin]
    for name, value in best_options(product, goal).items():
        if s.options.get(name) != value:
            return reply(env, f"click[{value}]", f"choose the {name} the instruction asks for")
    return reply(env, "click[buy now]", "everything is chosen")


def random_policy(seed: int = 0) -> Callable:
    """A policy choosing uniformly among the admissible actions (searches: 1-3 instruction words)."""
    rng = random.Random(seed)

    def act(env) -> str:
        action = rng.choice(env.available_actions())
        if action.startswith("search["):
            words = _PRICE_CLAUSE.sub("", env.goal.instruction.lower()).split() or ["item"]
            action = "search[" + " ".join(rng.sample(words, min(len(words), rng.randint(1, 3)))) + "]"
        return reply(env, action)

    return act


def rule_action(env) -> str:
    """WebShop's rule baseline: search the instruction, click the first result, buy it."""
    s = env.site.session
    if s.page == "search":
        return reply(env, f"search[{_PRICE_CLAUSE.sub('', env.goal.instruction.lower()).strip()}]")
    if s.page == "results":
        shown = env.site.page_products()
        return reply(env, f"click[{shown[0].asin.lower()}]" if shown else "click[back to search]")
    return reply(env, "click[buy now]" if s.page == "item" else "click[< prev]")


__all__ = ["expert_action", "random_policy", "rule_action", "reply", "search_text",
           "best_options", "potential"]
