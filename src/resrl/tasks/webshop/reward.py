"""WebShop's reward: how well a purchase matches the instruction's goal, a score in [0, 1].

Written from the WebShop paper (Yao et al. 2022, "WebShop: Towards Scalable Real-World Web
Interaction with Grounded Language Agents", §3, the reward) and its code,
`web_agent_site/engine/goal.py` (`get_reward` and its parts) and `engine/normalize.py`
(github princeton-nlp/WebShop; read, not copied). For a goal with attribute set U_att, option
set U_opt and price ceiling u_price, and a purchase y (a product, the options clicked, its price):

    r = r_type · (|U_att ∩ Y_att| + |U_opt ∩ Y_opt| + 1[y_price ≤ u_price]) / (|U_att| + |U_opt| + 1)   (1)

    |U_att ∩ Y_att|   goal attributes found in the product: fuzzy-equal (token-set ratio > 85) to
                      one of its `Attributes`, else a substring of its title, features or description
    |U_opt ∩ Y_opt|   goal options fuzzy-equal (> 85) to an option clicked, both first mapped to the
                      first colour name they contain (normalize_color)
    r_type            1 when the product is of the goal's type, lower when not (eq. 2):

    title_score = |set(type words(product title)) ∩ set(type words(goal title))| / len(type words(goal title))
                  (the denominator counts a repeated word each time, as goal.py's len() of its token list)
    r_type = 0    if title_score = 0
             0.1  if 0 < title_score < 0.1
             0.5  if no match (same search query, ≥ 2 shared category levels, or title_score > 0.2)
             1    otherwise                                                                     (2)

Success is r = 1. Fuzzy equality is thefuzz's `token_set_ratio` (what goal.py calls), computed by
rapidfuzz with thefuzz's preprocessing (`token_set_ratio` below).

One stand-in, stated in docs/tasks/webshop.md: WebShop's "type words" are the NOUN / PROPN tokens
spaCy's `en_core_web_sm` tags in the title; that tagger is a model download this project does not
make. Here they are the title's lower-cased alphanumeric words minus English function words
(`type_words`); a user with spaCy can pass their own function as `words=` to `webshop_reward`, or name
it ("module:function", `resolve_words`) where rewards are computed: `WebShopSpec(type_words=...)` (the
environment of training and `resrl eval`), `resrl eval --webshop-type-words`, `resrl webshop-ref
--type-words`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

# WebShop's engine/normalize.py COLOR_SET: an option value maps to the first of these it contains
COLOR_SET = (
    "alabaster", "apricot", "aqua", "ash", "asphalt", "azure", "banana", "beige", "black", "blue", "blush",
    "bordeaux", "bronze", "brown", "burgundy", "camel", "camo", "caramel", "champagne", "charcoal", "cheetah",
    "chestnut", "chocolate", "christmas", "coffee", "cognac", "copper", "coral", "cranberry", "cream", "crystal",
    "dark", "denim", "eggplant", "elephant", "espresso", "fuchsia", "gold", "granite", "grape", "graphite",
    "grass", "gray", "green", "grey", "heather", "indigo", "ivory", "ivy", "khaki", "lavender", "lemon",
    "leopard", "light", "lilac", "lime", "magenta", "maroon", "mauve", "merlot", "midnight", "mint", "mocha",
    "multicolor", "mushroom", "mustard", "natural", "navy", "nude", "olive", "orange", "peach", "pewter", "pink",
    "plum", "purple", "rainbow", "red", "rose", "royal", "rust", "sand", "sapphire", "seashell", "silver",
    "skull", "slate", "steel", "stone", "stonewash", "sunflower", "tan", "taupe", "teal", "tiger", "turquoise",
    "violet", "walnut", "wheat", "white", "wine", "yellow",
)
FUZZY_THRESHOLD = 85  # goal.py: a fuzzy match is a token-set ratio strictly above 85
CATEGORY_SEPARATOR = "›"

# English function words (determiners, pronouns, prepositions, conjunctions, auxiliaries): never
# nouns, so never type words. Content words (nouns and, unlike spaCy, adjectives) are kept.
FUNCTION_WORDS = frozenset("""
a about above after against all along also am among an and any are around as at be because been before being
below between both but by can could did do does doing down during each either every few for from had has have
having he her here hers him his how i if in into is it its itself just me more most my neither no nor not of off
on once only or other our ours out over own per same she should so some such than that the their them then there
these they this those through to too under until up upon very via was we were what when where which while who whom
why will with within without would you your yours
""".split())
_WORD = re.compile(r"[a-z0-9]+")
_BAD_ASCII = {i: None for i in range(128, 256)}  # thefuzz's force_ascii drops code points 128-255


def _fuzz_process(text: str) -> str:
    """thefuzz's full_process(force_ascii=True): drop code points 128-255, lower-case, every
    non-alphanumeric character to a space, strip (rapidfuzz's default_process after the drop)."""
    from rapidfuzz import utils

    return utils.default_process(str(text).translate(_BAD_ASCII))


def token_set_ratio(a: str, b: str) -> int:
    """thefuzz.fuzz.token_set_ratio(a, b) (what goal.py calls): rapidfuzz's token-set ratio of the
    processed strings, rounded to an int in [0, 100]; 0 when either is empty after processing."""
    from rapidfuzz import fuzz

    a, b = _fuzz_process(a), _fuzz_process(b)
    if not a or not b:
        return 0
    return int(round(fuzz.token_set_ratio(a, b)))


def fuzzy_equal(a: str, b: str) -> bool:
    return token_set_ratio(a, b) > FUZZY_THRESHOLD


def normalize_color(value: str) -> str:
    """normalize.py's normalize_color: the first COLOR_SET name contained in `value`, else `value`."""
    return next((c for c in COLOR_SET if c in value), value)


def type_words(title: str) -> list[str]:
    """The words of a product title that name its type (module docstring: a stand-in for spaCy's
    NOUN / PROPN tokens): lower-cased alphanumeric words that are not function words or numbers."""
    return [w for w in _WORD.findall(str(title).lower()) if w not in FUNCTION_WORDS and not w.isdigit()]


@dataclass(frozen=True)
class RewardParts:
    """Eq. (1)'s parts for one purchase. score = r_type · (attribute matches + option matches +
    price ok) / (attributes + options + 1)."""

    score: float
    r_type: float
    attribute_matches: int
    attributes: int
    option_matches: int
    options: int
    price_ok: bool
    query_match: bool
    category_match: bool
    title_score: float

    @property
    def won(self) -> bool:
        return self.score == 1.0  # k / k is exact in floating point; WebShop tests reward == 1.0

    def as_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["won"] = self.won
        return d


def type_reward(product, goal, words: Callable[[str], Sequence[str]] = type_words) -> tuple[float, bool, bool, float]:
    """Eq. (2): (r_type, query_match, category_match, title_score). `product` and `goal` are a
    catalog Product and a Goal (resrl.tasks.webshop.data)."""
    query_match = product.query == goal.query
    mine = {x.strip() for x in product.product_category.split(CATEGORY_SEPARATOR)}
    wanted = {x.strip() for x in goal.product_category.split(CATEGORY_SEPARATOR)}
    category_match = len(mine & wanted) >= 2
    have, want = list(words(product.name)), list(words(goal.name))
    # goal.py: the shared distinct words over len() of the goal title's word list (repeats counted);
    # 0.2 when the goal title has no noun
    title_score = len(set(have) & set(want)) / len(want) if want else 0.2
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return r_type, query_match, category_match, title_score


def attribute_matches(product, goal_attributes: Iterable[str]) -> int:
    """|U_att ∩ Y_att| of eq. (1): each goal attribute counts once, fuzzy-equal to one of the
    product's Attributes or a substring of its title, features (bullet points) or description."""
    title, features, description = product.title.lower(), " ".join(product.bullet_points).lower(), product.description.lower()
    n = 0
    for g in goal_attributes:
        if any(fuzzy_equal(p, g) for p in product.attributes) or g in title or g in features or g in description:
            n += 1
    return n


def option_matches(purchased_options: Iterable[str], goal_options: Iterable[str]) -> int:
    """|U_opt ∩ Y_opt| of eq. (1): goal options fuzzy-equal to a purchased option, both colour-normalised."""
    bought = [normalize_color(str(o)) for o in purchased_options]
    return sum(1 for g in (normalize_color(str(o)) for o in goal_options) if any(fuzzy_equal(p, g) for p in bought))


def webshop_reward(product, goal, price: float, options: dict | Iterable[str],
                   words: Callable[[str], Sequence[str]] = type_words) -> RewardParts:
    """Eq. (1) for buying `product` at `price` with `options` clicked ({option name: value} or the
    values), for `goal` (resrl.tasks.webshop.data.Goal)."""
    values = list(options.values()) if isinstance(options, dict) else list(options)
    r_type, query_match, category_match, title_score = type_reward(product, goal, words)
    n_att = attribute_matches(product, goal.attributes)
    n_opt = option_matches(values, goal.options)
    price_ok = float(price) <= goal.price_upper
    total = (n_att + n_opt + int(price_ok)) / (len(goal.attributes) + len(goal.options) + 1)
    return RewardParts(score=total * r_type, r_type=r_type, attribute_matches=n_att, attributes=len(goal.attributes),
                       option_matches=n_opt, options=len(goal.options), price_ok=price_ok, query_match=query_match,
                       category_match=category_match, title_score=title_score)


def resolve_words(path: str | None) -> Callable[[str], Sequence[str]]:
    """The type-words function named "module:function" (e.g. a spaCy noun tagger of the user's), or
    `type_words` for None / "". InputError naming the path when it cannot be imported or called."""
    if not path:
        return type_words
    import importlib

    from resrl.errors import InputError

    module, _, name = str(path).partition(":")
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise InputError(f"webshop: type_words {path!r} is not an importable 'module:function' ({exc})") from None
    if not callable(fn):
        raise InputError(f"webshop: type_words {path!r} is not callable")
    return fn


__all__ = ["resolve_words", "COLOR_SET", "FUZZY_THRESHOLD", "FUNCTION_WORDS", "RewardParts", "token_set_ratio", "fuzzy_equal",
           "normalize_color", "type_words", "type_reward", "attribute_matches", "option_matches", "webshop_reward"]
