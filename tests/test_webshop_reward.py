"""WebShop's reward (resrl.tasks.webshop.reward) against hand-computed cases and an independent
restatement of thefuzz's token-set ratio; the BM25 search against a float64 hand computation."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from resrl.tasks.webshop.data import Goal, Product
from resrl.tasks.webshop.reward import (normalize_color, option_matches, token_set_ratio, type_reward, type_words,
                                        webshop_reward)


def _product(**kw) -> Product:
    base = dict(asin="B0TEST0001", name="Kelso Waterproof Leather Hiking Boots", description="Boots for hiking.",
                bullet_points=("Ankle Support: a firm heel.",), pricing=(59.0,), price_tag="$59.0",
                options={"color": ("black", "brown"), "size": ("9", "10")}, attributes=("waterproof", "leather"),
                category="fashion", query="hiking boots",
                product_category="Clothing, Shoes & Jewelry › Men › Shoes › Outdoor › Hiking & Trekking")
    base.update(kw)
    return Product(**base)


def _goal(**kw) -> Goal:
    base = dict(asin="B0TEST0001", instruction="i need waterproof hiking boots", attributes=("waterproof", "ankle support"),
                options=("black", "10"), price_upper=70.0, query="hiking boots", category="fashion",
                product_category="Clothing, Shoes & Jewelry › Men › Shoes › Outdoor › Hiking & Trekking",
                name="Kelso Waterproof Leather Hiking Boots")
    base.update(kw)
    return Goal(**base)


# ---- an independent restatement of thefuzz.fuzz.token_set_ratio -----------------------------------------
def _lcs(a: str, b: str) -> int:
    prev = [0] * (len(b) + 1)
    for ca in a:
        cur = [0]
        for j, cb in enumerate(b):
            cur.append(prev[j] + 1 if ca == cb else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def _ratio(a: str, b: str) -> float:  # Indel similarity: 1 - (|a| + |b| - 2 LCS) / (|a| + |b|)
    return 100.0 if not a and not b else 100.0 * 2 * _lcs(a, b) / (len(a) + len(b))


def _reference_token_set_ratio(s1: str, s2: str) -> int:
    """thefuzz's token_set_ratio written from its definition: process (drop code points 128-255,
    lower-case, non-alphanumerics to spaces), token sets, then the best Indel ratio among (sorted
    intersection, intersection + rest of each) pairs; 100 when one token set holds the other."""
    def process(s):
        s = "".join(c for c in s if not 128 <= ord(c) <= 255).lower()
        return "".join(c if c.isalnum() else " " for c in s).strip()

    t1, t2 = set(process(s1).split()), set(process(s2).split())
    if not t1 or not t2:
        return 0
    inter, d1, d2 = sorted(t1 & t2), sorted(t1 - t2), sorted(t2 - t1)
    if inter and (not d1 or not d2):
        return 100
    sect = " ".join(inter)
    a = (sect + " " + " ".join(d1)).strip()
    b = (sect + " " + " ".join(d2)).strip()
    best = _ratio(a, b)
    if sect:
        best = max(best, _ratio(sect, a), _ratio(sect, b))
    return int(round(best))


@pytest.mark.parametrize("a,b,expected", [
    ("wool hat", "hat", 100),               # a token subset: 100
    ("12 count", "24 count", 88),           # 'count 12' vs 'count 24': LCS 7 of 16 -> 87.5 (a WebShop quirk: > 85)
    ("sulfate free", "paraben free", None),
    ("Black / Gray", "black", 100),
    ("noise cancelling", "noise-cancelling", 100),
    ("", "black", 0),
    ("éé", "black", 0),
])
def test_token_set_ratio_matches_thefuzz_definition(a, b, expected):
    got = token_set_ratio(a, b)
    assert got == _reference_token_set_ratio(a, b)
    if expected is not None:
        assert got == expected


def test_normalize_color_is_the_first_colour_contained():
    assert normalize_color("rose gold") == "gold"  # COLOR_SET order: gold before rose
    assert normalize_color("navy blue") == "blue"  # blue before navy
    assert normalize_color("x-large") == "x-large"


def test_type_words_drop_function_words_and_numbers():
    assert type_words("The Kelso 5 Tier Bookshelf for the Office") == ["kelso", "tier", "bookshelf", "office"]


# ---- eq. (1) and (2) by hand -------------------------------------------------------------------------
def test_perfect_purchase_scores_one():
    p = webshop_reward(_product(), _goal(), 59.0, {"color": "black", "size": "10"})
    # attributes: waterproof (in Attributes), ankle support (in the features text); options 2/2; price ok
    assert (p.attribute_matches, p.option_matches, p.price_ok, p.r_type) == (2, 2, True, 1.0)
    assert p.score == 1.0 and p.won


@pytest.mark.parametrize("change,score", [
    (dict(options={"color": "brown", "size": "10"}), 4 / 5),            # one option wrong
    (dict(options={}), 3 / 5),                                          # no option clicked
    (dict(price=71.0), 4 / 5),                                          # over the ceiling
    (dict(options={}, price=71.0), 2 / 5),
])
def test_partial_purchases_by_hand(change, score):
    options = change.get("options", {"color": "black", "size": "10"})
    p = webshop_reward(_product(), _goal(), change.get("price", 59.0), options)
    assert p.score == pytest.approx(score) and not p.won


def test_type_reward_thresholds():
    g = _goal()
    # same query: match; title nouns 'kelso waterproof leather hiking boots' shared 5/5
    assert type_reward(_product(), g)[0] == 1.0
    # another type, another query and category, title shares 1 of 5 words (0.2, not > 0.2): no match -> 0.5
    other = _product(name="Kelso Desk Lamp", query="desk lamp", product_category="Home › Lighting › Lamps")
    r, qm, cm, ts = type_reward(other, g)
    assert (qm, cm, ts, r) == (False, False, pytest.approx(0.2), 0.5)
    # nothing shared: 0; a goal title of 11 type words, one shared (1/11 < 0.1): 0.1
    assert type_reward(_product(name="Zento Desk Lamp", query="desk lamp", product_category="Home"), g)[0] == 0.0
    long_goal = replace(g, name="Kelso a1 b1 c1 d1 e1 f1 g1 h1 i1 j1")
    assert type_reward(_product(name="Kelso Lamp", query="x", product_category="y"), long_goal)[0] == 0.1
    # two shared category levels count as a match although the query differs
    assert type_reward(_product(query="boots", name="Zento Lamp Boots"), g)[1:3] == (False, True)


def test_wrong_type_scores_zero_however_well_the_rest_matches():
    lamp = _product(name="Zento Desk Lamp", query="desk lamp", product_category="Home › Lighting",
                    attributes=("waterproof", "ankle support"))
    assert webshop_reward(lamp, _goal(), 1.0, {"c": "black", "s": "10"}).score == 0.0


def test_option_values_each_count_once():
    assert option_matches(["black", "black", "black"], ["black", "10"]) == 1
    # a two-colour value is normalised to the first COLOR_SET colour it contains, as goal.py does
    assert option_matches(["black | gray"], ["black"]) == 1 and option_matches(["black | gray"], ["gray"]) == 0
    assert option_matches(["size 10 | wide"], ["10"]) == 1  # a token subset: ratio 100


# ---- BM25 (eq. 3) ----------------------------------------------------------------------------------------
def test_bm25_matches_a_float64_hand_computation():
    from resrl.tasks.webshop.search import K1, B, ProductIndex, document, tokenize

    products = [_product(asin="A1", name="Red Wool Hat", description="warm", bullet_points=("wool",), options={}),
                _product(asin="A2", name="Blue Cotton Hat", description="light", bullet_points=("cotton",), options={}),
                _product(asin="A3", name="Wool Socks", description="wool wool", bullet_points=("socks",), options={})]
    index = ProductIndex(products)
    docs = [tokenize(document(p)) for p in products]
    avgdl = sum(map(len, docs)) / 3
    query = "wool hats"
    want = {}
    for i, d in enumerate(docs):
        s = 0.0
        for t in tokenize(query):
            df = sum(t in x for x in docs)
            tf = d.count(t)
            if tf:
                s += math.log(1 + (3 - df + 0.5) / (df + 0.5)) * tf / (tf + K1 * (1 - B + B * len(d) / avgdl))
        if s:
            want[i] = s
    got = index.scores(query)
    assert set(got) == set(want) == {0, 1, 2}
    for i in want:
        assert got[i] == pytest.approx(want[i], rel=1e-12)
    assert [p.asin for p in index.search(query)] == [i for i, _ in sorted(
        ((products[i].asin, -s) for i, s in want.items()), key=lambda x: x[1])]
    assert index.search("nothing matches this") == []
    assert tokenize("The boots' laces and HATS") == ["boot", "lace", "hat"]


# ---- issue 52: the type reward as goal.py computes it; the words where rewards are computed ------------
def test_the_title_score_divides_by_the_goal_words_with_repeats():
    """goal.py: len(set(bought) & set(wanted)) / len(wanted), `wanted` the goal title's word LIST: a word
    the goal title repeats counts each time below the line (dividing by distinct words scored higher)."""
    goal = _goal(name="Shoe Shoe Shoe Shoe Shoe Box", query="other", product_category="A › B")
    product = _product(name="Box Lid", query="boxes", product_category="C › D")
    r_type, query_match, category_match, title_score = type_reward(product, goal)
    assert not query_match and not category_match
    assert title_score == pytest.approx(1 / 6)  # {box} of [shoe x5, box]; distinct words would give 1/2
    assert r_type == 0.5  # title_score <= 0.2 and no other match (1/2 would have given 1.0)


def test_the_type_words_function_is_named_where_rewards_are_computed(tmp_path, monkeypatch):
    """WebShopSpec(type_words="module:function") reaches the environment's reward (training, `resrl eval
    --webshop-type-words`, `resrl webshop-ref --type-words` build their environments from it)."""
    from resrl.errors import InputError
    from resrl.tasks.webshop.data import load_goal_rows
    from resrl.tasks.webshop.env import WebShopSpec
    from resrl.tasks.webshop.policies import expert_action
    from resrl.tasks.webshop.reward import resolve_words

    (tmp_path / "my_nouns.py").write_text("CALLS = []\n\ndef nouns(title):\n    CALLS.append(title)\n"
                                          "    return title.lower().split()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import my_nouns

    assert resolve_words("my_nouns:nouns") is my_nouns.nouns and resolve_words(None) is type_words
    with pytest.raises(InputError, match="not an importable"):
        resolve_words("my_nouns:missing")
    env = WebShopSpec(type_words="my_nouns:nouns").build()
    env.reset(load_goal_rows("webshop-small:test")[0])
    for _ in range(15):
        r = env.step(expert_action(env))
        if r.done:
            break
    assert r.done and my_nouns.CALLS  # the environment's reward called the named function
    assert set(my_nouns.CALLS) >= {env.goal.name}
