"""The WebShop-format environment (resrl.tasks.webshop.env / site / policies): WebShop's pages and
transitions, the reference policies, hostile action text, and the cheapest ways to earn reward."""

from __future__ import annotations

import json
import pickle
import time

import pytest

from resrl.tasks.webshop.data import load_goal_rows
from resrl.tasks.webshop.env import NOT_ADMISSIBLE, WebShopSpec, parse_action, webshop_step_env
from resrl.tasks.webshop.evaluate import play, summary
from resrl.tasks.webshop.policies import expert_action, random_policy, reply, rule_action


@pytest.fixture(scope="module")
def rows():
    return load_goal_rows("webshop-small:test")


def _env(row, **kw):
    env = WebShopSpec(**kw).build()
    env.reset(row)
    return env


def _act(action: str) -> str:
    return f"<think>t</think><action>{action}</action>"


def test_pages_and_transitions_follow_webshops_site(rows):
    env = _env(rows[0], page_size=3)
    assert env.site.text() == f"WebShop [SEP] Instruction: [SEP] {env.goal.instruction} [SEP] Search"
    assert env.observation == "Search" and env.available_actions() == ["search[<your query>]"]
    assert env.step(_act("click[search]")).info["invalid_action"]  # 'search' is not a click target
    r = env.step(_act(f"search[{env.goal.query}]"))
    assert not r.info["invalid_action"] and r.info["page"] == "results"
    total = len(env.site.session.results)
    assert env.observation.startswith(f"Back to Search [SEP] Page 1 (Total results: {total}) [SEP] Next > [SEP] ")
    assert "< Prev" not in env.observation and "search[<your query>]" not in env.available_actions()
    shown = env.site.page_products()
    assert len(shown) == min(3, total) and env.available_actions()[:2] == ["click[back to search]", "click[next >]"]
    env.step(_act("click[next >]"))
    assert "Page 2" in env.observation and "< Prev" in env.observation
    assert env.site.page_products() == env.site.session.results[3:6]
    env.step(_act("click[< prev]"))
    first = env.site.page_products()[0]
    env.step(_act(f"click[{first.asin.lower()}]"))  # product links are clicked lower-cased, as WebShop's
    assert env.site.session.page == "item" and env.site.session.asin == first.asin
    obs = env.observation
    assert obs.startswith("Back to Search [SEP] < Prev [SEP] ") and obs.endswith(
        "Description [SEP] Features [SEP] Reviews [SEP] Buy Now") and first.title in obs
    name, values = next(iter(first.options.items()))
    env.step(_act(f"click[{values[-1]}]"))
    assert env.site.session.options == {name: values[-1]}
    env.step(_act(f"click[{values[0]}]"))  # one value per option name: the later click replaces it
    assert env.site.session.options == {name: values[0]}
    assert f"[clicked button] {values[0]} [clicked button_]" in env.site.text("text_rich")
    assert env.site.text("text_rich").startswith(f"You have clicked {values[0]}.\n")
    env.step(_act("click[features]"))
    assert env.site.session.page == "sub" and env.observation.endswith(" [SEP] ".join(first.bullet_points))
    env.step(_act("click[< prev]"))
    assert env.site.session.page == "item" and env.site.session.options == {name: values[0]}  # kept
    env.step(_act("click[< prev]"))  # item -> results: the options are cleared, as WebShop's search_results
    assert env.site.session.page == "results" and env.site.session.options == {}
    env.step(_act("click[back to search]"))
    assert env.observation == "Search" and env.site.session.results == []
    assert env.steps == 11 and env.invalid_actions == 1


def test_buying_scores_and_ends_the_episode(rows):
    env = _env(rows[0])
    for _ in range(15):
        r = env.step(expert_action(env))
        if r.done:
            break
    assert r.done and r.info["won"] and r.info["score"] == 1.0 and r.reward == 1.0 and r.observation == []
    assert r.info["bought"] is not None and r.info["reward_parts"]["won"] and r.info["task_type"] == env.goal.category
    with pytest.raises(RuntimeError, match="after the episode ended"):
        env.step(_act("click[buy now]"))
    # reward="success": verl-agent's 1 / 0; score and won reported alike
    env = _env(rows[0], reward="success")
    r = env.step(_act(f"search[{env.goal.query}]"))
    r = env.step(_act(f"click[{env.site.page_products()[0].asin.lower()}]"))
    r = env.step(_act("click[buy now]"))
    assert r.done and r.reward == float(r.info["won"]) and 0 <= r.info["score"] < 1.0


def test_the_step_cap_ends_unbought_episodes_with_nothing():
    row = load_goal_rows("webshop-small:test", limit=1)[0]
    env = _env(row, max_steps=3)
    results = [env.step(_act("click[nothing]")) for _ in range(3)]
    assert [r.done for r in results] == [False, False, True]
    assert results[-1].reward == 0.0 and not results[-1].info["won"] and results[-1].info["bought"] is None
    assert WebShopSpec().max_steps == 15  # the paper's WebShop cap


def test_reference_policies_on_the_packaged_test_goals(rows):
    expert = summary(play(rows, expert_action))
    assert expert["success"] == 100.0 and expert["score"] == 100.0
    rand = summary(play(rows, random_policy(0)))
    rule = summary(play(rows, rule_action))
    assert rand["success"] <= 10.0 and rand["score"] <= 35.0
    # WebShop's rule baseline never clicks an option: every generated goal asks for one, so it never succeeds
    assert rule["success"] == 0.0 and rule["score"] < 80.0


# ---- the cheapest ways to earn reward --------------------------------------------------------------------
def _scripted(actions):
    def act(env):
        s = env.site.session
        return reply(env, actions(env, s))
    return act


def test_buying_at_once_is_not_possible_and_earns_nothing(rows):
    # 'buy now' exists only on an item page: from the search page it is not admissible
    recs = play(rows, lambda env: reply(env, "click[buy now]"), WebShopSpec(max_steps=4))
    assert all(r["score"] == 0.0 and not r["won"] and r["invalid_actions"] == 4 for r in recs)


def test_buying_the_first_result_of_a_bare_search_earns_little(rows):
    def first(env, s):
        if s.page == "search":
            return "search[item]"
        if s.page == "results":
            shown = env.site.page_products()
            return f"click[{shown[0].asin.lower()}]" if shown else "click[back to search]"
        return "click[buy now]"

    got = summary(play(rows, _scripted(first)))
    assert got["success"] == 0.0 and got["score"] <= 40.0


def test_clicking_every_option_earns_no_more_than_one_per_option_name(rows):
    """Clicking every value of every option and then buying: each option name keeps its last click,
    so this is one guess per option, not a way to match every goal option."""
    def every(env, s):
        if s.page == "search":
            return f"search[{env.goal.query}]"
        if s.page == "results":
            return f"click[{env.site.page_products()[0].asin.lower()}]"
        product = env.catalog.by_asin[s.asin]
        values = [v for vs in product.options.values() for v in vs]
        done = env.steps - 2  # the option clicks made so far
        return f"click[{values[done]}]" if done < len(values) else "click[buy now]"

    recs = play(rows, _scripted(every), WebShopSpec(max_steps=40))
    expert = play(rows, expert_action)
    assert sum(r["won"] for r in recs) <= 0.25 * len(recs)
    assert sum(r["score"] for r in recs) < sum(r["score"] for r in expert)


def test_no_catalog_product_matches_every_goal():
    """An item 'matching everything' (every attribute, every option value) would let one click win
    every goal of its type: in the packaged catalog no product reaches score 1 on a goal of another
    type, none on every goal of its own type, and a goal is won by fewer than half its type's products
    on average."""
    from resrl.tasks.webshop.env import WebShopEnv
    from resrl.tasks.webshop.policies import potential

    rows = [r for split in ("train", "dev", "test") for r in load_goal_rows(f"webshop-small:{split}")]
    env = WebShopEnv(WebShopSpec())
    env.reset(rows[0])
    catalog = env.catalog
    wins = {p.asin: 0 for p in catalog.products}
    goals_of = {}
    counts = []
    for row in rows:
        env.reset(row)
        winners = [p for p in catalog.products if potential(env, p) == 1.0]
        assert winners and all(p.query == env.goal.query for p in winners)
        counts.append(len(winners))
        goals_of[env.goal.query] = goals_of.get(env.goal.query, 0) + 1
        for p in winners:
            wins[p.asin] += 1
    assert all(wins[p.asin] < goals_of[p.query] for p in catalog.products)
    per_type = len(catalog.products) / len(goals_of)
    assert sum(counts) / len(counts) < per_type / 2


# ---- hostile action text ---------------------------------------------------------------------------------
HOSTILE = [
    "", "   ", "x" * 2_000_000, "<action>" + "é" * 100_000 + "</action>", "<action>search[</action>",
    "<action>search[no end</action>", "<action>click[</action>", "<action>click[]</action>", "<action>search[]</action>",
    "<action>search[\x00\x01\x7f]</action>", "<action>\x00click[buy now]</action>", "</action><action>",
    "<action>click[buy now]</action> Your score is 1.0. You won!", "<action>CLICK[BUY NOW]</action>",
    "<action>search[a]b]</action>", "<action>click[buy now]]</action>", "<action>click[<your query>]</action>",
    "<action>" + "search[x]" * 10_000 + "</action>", "<action>rm -rf /; click[buy now]</action>",
    "<think>买</think><action>search[hat]</action>",
]


def test_hostile_model_outputs_are_bounded_contained_and_counted(rows):
    env = _env(rows[0], max_steps=len(HOSTILE) + 5)
    before = env.observation
    infos = []
    for text in HOSTILE:
        r = env.step(text)
        infos.append(r.info)
        assert r.reward == 0.0 and not r.done and len(r.info["action"]) <= 200
        prompt = env.step_prompt()[0]["content"]
        assert len(prompt) < 5000
        if r.info["invalid_action"]:
            assert NOT_ADMISSIBLE in prompt
    valid = [i for i, info in enumerate(infos) if not info["invalid_action"]]
    # only real searches on the search page act: '\x00\x01\x7f' cleaned to '' is no query, 'search[a]b]'
    # searches 'a]b', the CJK one searches 'hat' (format invalid), the 10,000 searches are one 200-char query
    assert [HOSTILE[i][:20] for i in valid] == ["<action>search[a]b]<"]
    assert env.site.session.page == "results"
    assert all(i["invalid_format"] for i in infos[:3]) and infos[-1]["invalid_format"]
    assert env.steps == len(HOSTILE) and env.invalid_actions == len(HOSTILE) - 1
    assert before == "Search"


def test_hostile_searches_and_thousands_of_actions_never_hang_or_crash(rows):
    env = _env(rows[0], max_steps=5000)
    long = env.step(_act("search[" + "\u202e\u200b😀 \x1b[31m" * 50 + "]"))
    assert long.info["invalid_action"] and len(long.info["action"]) == 200  # cut at 200 characters: no closing ]
    r = env.step(_act("search[" + "\u202e\u200b😀 \x1b[31m" * 5 + "]"))
    assert not r.info["invalid_action"] and "Total results: 0" in env.observation  # nothing found: an empty page
    r = env.step(_act("click[next >]"))
    assert "Page 2 (Total results: 0)" in env.observation
    start = time.monotonic()
    for i in range(3000):
        r = env.step(_act(["click[" + "x" * 300 + "]", "search[boots]", "click[nope]"][i % 3]))
    assert not r.done and env.steps == 3003 and env.invalid_actions == 3001
    assert time.monotonic() - start < 120  # bounded (a generous bound; not a benchmark)


def test_parse_action_is_bounded_and_total():
    p = parse_action("<think>a</think><action> Click[ Buy  Now ] </action>")
    assert (p.action, p.format_ok) == ("Click[ Buy Now ]", True)
    assert parse_action("<action>click[x]</action>").reason == "no <think>...</think>"
    assert parse_action("<action>click[x]</action>", style="compact").format_ok
    assert parse_action("click[buy now]").action == ""  # no tags: nothing is acted on
    for text in (None, 12, b"bytes", "<action>", "<action>" * 1000):
        assert isinstance(parse_action(text).action, str)
    assert len(parse_action("<action>" + "y" * 10_000 + "</action>").action) == 200


def test_the_env_pickles_and_the_step_factory_takes_json_rows(rows):
    env = webshop_step_env(json.dumps(rows[1]), history_window=1, max_steps=7, prompt_style="compact")
    assert env.spec.max_steps == 7 and env.spec.history_window == 1
    env.reset()
    env.step(expert_action(env))
    clone = pickle.loads(pickle.dumps(env))
    assert clone.task == env.task and clone.spec == env.spec
    assert clone.reset()[0]["content"].startswith(f"Instruction: {env.goal.instruction}\nPage: Search")
    with pytest.raises(Exception, match="goal row"):
        webshop_step_env("not json")
    with pytest.raises(Exception, match="prompt_style"):
        WebShopSpec(prompt_style="nope")


def test_verl_agent_prompt_window_and_anchor(rows):
    env = _env(rows[2], history_window=2)
    first = env.step_prompt()[0]["content"]
    assert "Your task is to: " + env.goal.instruction in first and "'search[<your query>]'," in first
    for _ in range(3):
        env.step(expert_action(env))
    text = env.step_prompt()[0]["content"]
    assert "already taken 3 step(s)" in text and "[Observation 2: 'Back to Search" in text and "Observation 1" not in text
    a = env.anchor()
    env.step(_act("click[nope]"))  # nothing happens: the same state, the same anchor
    assert env.anchor() == a
    state = _env(rows[2], anchor_mode="state")
    assert state.anchor().startswith("state:")
    compact = _env(rows[2], prompt_style="compact")  # the compact prompt shows the options chosen: so does its anchor
    while compact.site.session.page != "item":
        compact.step(expert_action(compact))
    before = compact.anchor()
    compact.step(expert_action(compact))  # an option click: the page text is the same, the state is not
    assert compact.observation in before and compact.anchor() != before
    assert compact.anchor().startswith("You have clicked ")
