"""Tool-call parsing, BFCL possible-answer matching and the tool rewards.

BFCL data tests need `bfcl-eval` (installed --no-deps by scripts/setup.sh); outside CI they skip
when it is absent, in CI a missing package is a failure.
"""

import importlib.util
import json
import os
import random

import pytest

from resrl.tasks.rewards import load_reward_function
from resrl.tasks.tools.bfcl_match import bfcl_match, canonical_calls, parse_reference
from resrl.tasks.tools.parsing import format_calls, parse_tool_calls
from resrl.tasks.tools.reward import ToolCallExactReward, ToolCallReward, toolrl_correctness

HAVE_BFCL = importlib.util.find_spec("bfcl_eval") is not None
needs_bfcl = pytest.mark.skipif(not HAVE_BFCL and not os.environ.get("CI"),
                                reason="bfcl-eval is not installed (pip install --no-deps bfcl-eval==2026.3.23; CI requires it)")


def names_args(calls):
    return [(c["name"], c["arguments"]) for c in calls]


# ---- parsing -------------------------------------------------------------------------------------
class TestParse:
    def test_hermes_one_call(self):
        calls = parse_tool_calls('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>')
        assert names_args(calls) == [("get_weather", {"city": "Paris", "days": 3})]
        assert calls.error is None and calls.format == "hermes"

    def test_hermes_several_blocks_with_text_and_think(self):
        text = ('<think>two cities</think>\nI will check both.\n'
                '<tool_call>{"name": "w", "arguments": {"city": "A"}}</tool_call> and '
                '<tool_call>{"name": "w", "parameters": {"city": "B"}}</tool_call>\nDone.')
        calls = parse_tool_calls(text)
        assert names_args(calls) == [("w", {"city": "A"}), ("w", {"city": "B"})] and calls.error is None

    def test_toolrl_several_json_lines_in_one_block(self):
        text = '<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n{"name": "b", "arguments": {}}\n</tool_call>'
        assert names_args(parse_tool_calls(text)) == [("a", {"x": 1}), ("b", {})]

    def test_json_list_and_fenced_json_and_string_arguments(self):
        assert names_args(parse_tool_calls('[{"name": "a", "arguments": {"x": [1, 2]}}, {"name": "b", "arguments": {}}]')) \
            == [("a", {"x": [1, 2]}), ("b", {})]
        fenced = 'Here:\n```json\n{"name": "a", "arguments": "{\\"x\\": 1}"}\n```\nthanks'
        calls = parse_tool_calls(fenced)
        assert names_args(calls) == [("a", {"x": 1})] and calls.format == "json"

    def test_python_calls(self):
        calls = parse_tool_calls("[math.hypot(x=4, y=-5.5), f(flag=True, items=['a', \"b\"], d={'k': (1, 2)}, v=None)]")
        assert names_args(calls) == [("math.hypot", {"x": 4, "y": -5.5}),
                                     ("f", {"flag": True, "items": ["a", "b"], "d": {"k": [1, 2]}, "v": None})]
        assert calls.format == "python" and calls.error is None
        single = parse_tool_calls("calculate_area(base=10, height=5)")
        assert names_args(single) == [("calculate_area", {"base": 10, "height": 5})]

    def test_python_call_on_a_line_among_text(self):
        calls = parse_tool_calls("Sure, calling it now:\n[get_time(zone='UTC')]\nHope that helps.")
        assert names_args(calls) == [("get_time", {"zone": "UTC"})]
        # a bare call inside prose or code is not an answer made of calls
        code = "Here is code:\n```python\nx = 5\nprint(factorial(x))\n```\nIt prints 120."
        assert parse_tool_calls(code) == [] and parse_tool_calls(code).error is None

    def test_positional_arguments_kept_apart_and_names_are_strings(self):
        calls = parse_tool_calls("sort('final_report.pdf', reverse=x)")
        assert calls[0]["positional"] == ["final_report.pdf"] and calls[0]["arguments"] == {"reverse": "x"}

    def test_nothing_is_evaluated(self, tmp_path):
        marker = tmp_path / "pwned"
        calls = parse_tool_calls(f"f(a=__import__('os').system('touch {marker}'))")
        assert not marker.exists()
        assert calls[0]["arguments"]["a"].startswith("__import__")  # kept as source text
        bad = parse_tool_calls("f(a=1 + 2)")
        assert bad == [] and "unsupported argument expression" in bad.error

    @pytest.mark.parametrize("text, fragment", [
        ('<tool_call>{"name": "a", "arguments": {"x": 1</tool_call>', "invalid JSON"),
        ('<tool_call>{"name": "a", "arguments": {}}', "not closed"),
        ('<tool_call>{"arguments": {}}</tool_call>', "without a string 'name'"),
        ('<tool_call>{"name": "a", "arguments": [1]}</tool_call>', "arguments must be an object"),
        ('<tool_call></tool_call>', "empty <tool_call> block"),
        ('[{"name": "a", "arguments": {]', "JSON"),
        ("get_weather(city='Paris'", "Python call"),
    ])
    def test_malformed_is_reported_not_raised(self, text, fragment):
        calls = parse_tool_calls(text)
        assert calls.error is not None and fragment in calls.error, calls.error

    def test_partial_failure_keeps_the_calls_that_parsed(self):
        calls = parse_tool_calls('<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{oops}</tool_call>')
        assert names_args(calls) == [("a", {})] and "invalid JSON" in calls.error

    @pytest.mark.parametrize("text", ["", "   ", "The answer is 42.", "I cannot help with that (no tool fits).",
                                      "Use [brackets] freely."])
    def test_no_call(self, text):
        calls = parse_tool_calls(text)
        assert calls == [] and calls.error is None and calls.format is None

    def test_non_string_and_huge_input_are_bounded(self):
        assert parse_tool_calls(None).error is not None
        deep = "f(a=" + "[" * 50_000 + "]" * 50_000 + ")"
        assert parse_tool_calls(deep).error is not None  # too deep for the parser: reported


# ---- BFCL possible-answer rules ------------------------------------------------------------------
DOC = [{"name": "f", "parameters": {"type": "dict", "required": ["city"], "properties": {
    "city": {"type": "string"}, "days": {"type": "integer"}, "scale": {"type": "float"},
    "units": {"type": "array", "items": {"type": "string"}}, "opts": {"type": "dict"}}}},
       {"name": "g", "parameters": {"type": "dict", "required": [], "properties": {"n": {"type": "integer"}}}}]
ANSWER = [{"f": {"city": ["New York, NY", "NYC"], "days": [3, ""], "scale": [1.0],
                 "units": [["c", "f"], ""], "opts": [{"mode": ["fast"], "level": ["", 1]}, ""]}}]


def call(name, **args):
    return {"name": name, "arguments": args}


class TestBFCLMatch:
    def test_any_listed_value_and_string_normalisation(self):
        assert bfcl_match([call("f", city="new york ny", scale=1.0)], ANSWER, DOC)
        assert bfcl_match([call("f", city="NYC", scale=1.0)], ANSWER, DOC)
        assert not bfcl_match([call("f", city="Boston", scale=1.0)], ANSWER, DOC)

    def test_optional_parameters(self):
        assert bfcl_match([call("f", city="NYC", scale=1.0, days=3)], ANSWER, DOC)
        assert not bfcl_match([call("f", city="NYC", scale=1.0, days=4)], ANSWER, DOC)  # optional, but wrong
        assert not bfcl_match([call("f", city="NYC")], ANSWER, DOC)  # scale is not optional in the answer

    def test_required_unknown_and_unlisted_parameters(self):
        assert not bfcl_match([call("f", scale=1.0)], ANSWER, DOC)  # required by the doc
        assert not bfcl_match([call("f", city="NYC", scale=1.0, color="red")], ANSWER, DOC)

    def test_types(self):
        assert bfcl_match([call("f", city="NYC", scale=1)], ANSWER, DOC)  # int accepted for float
        assert not bfcl_match([call("f", city="NYC", scale=1.0, days=3.0)], ANSWER, DOC)  # float for integer
        assert not bfcl_match([call("f", city="NYC", scale="1.0")], ANSWER, DOC)
        assert not bfcl_match([call("f", city="NYC", scale=1.0, days=True)], ANSWER, DOC)
        # array items are type-checked one level deep: ints in a float array are refused even
        # though [1, 2] == [1.0, 2.0] (BFCL's nested check is final)
        doc = [{"name": "h", "parameters": {"type": "dict", "required": ["xs"], "properties": {
            "xs": {"type": "array", "items": {"type": "float"}}}}}]
        assert bfcl_match([call("h", xs=[1.0, 2.0])], [{"h": {"xs": [[1.0, 2.0]]}}], doc)
        assert not bfcl_match([call("h", xs=[1, 2])], [{"h": {"xs": [[1.0, 2.0]]}}], doc)
        # without docs no type is checked: 3.0 == 3
        assert bfcl_match([call("f", city="NYC", scale=1.0, days=3.0)], ANSWER)

    def test_lists_and_dicts(self):
        assert bfcl_match([call("f", city="NYC", scale=1.0, units=["C", "F"])], ANSWER, DOC)
        assert not bfcl_match([call("f", city="NYC", scale=1.0, units=["f", "c"])], ANSWER, DOC)  # order matters
        assert not bfcl_match([call("f", city="NYC", scale=1.0, units=["c", 5])], ANSWER, DOC)  # item type
        assert bfcl_match([call("f", city="NYC", scale=1.0, opts={"mode": "FAST"})], ANSWER, DOC)
        assert bfcl_match([call("f", city="NYC", scale=1.0, opts={"mode": "fast", "level": 1})], ANSWER, DOC)
        assert not bfcl_match([call("f", city="NYC", scale=1.0, opts={"mode": "fast", "x": 1})], ANSWER, DOC)
        assert not bfcl_match([call("f", city="NYC", scale=1.0, opts={"level": 1})], ANSWER, DOC)

    def test_parallel_calls_are_order_free_but_counted(self):
        answer = [{"g": {"n": [1]}}, {"g": {"n": [2]}}, {"f": {"city": ["NYC"], "scale": [1.0]}}]
        calls = [call("f", city="nyc", scale=1.0), call("g", n=2), call("g", n=1)]
        assert bfcl_match(calls, answer, DOC)
        assert not bfcl_match(calls + [call("g", n=1)], answer, DOC)  # extra call
        assert not bfcl_match(calls[:2], answer, DOC)  # missing call
        assert not bfcl_match([call("f", city="nyc", scale=1.0), call("g", n=2), call("g", n=2)], answer, DOC)

    def test_no_call_expected(self):
        assert bfcl_match([], [])
        assert not bfcl_match([call("g", n=1)], [])

    def test_greedy_assignment_is_bfcl_rule(self):
        # expected[0] accepts either call, expected[1] only the first: BFCL's greedy pass gives the
        # first call to expected[0] and then fails, although a matching exists. We follow BFCL.
        answer = [{"g": {"n": [1, 2]}}, {"g": {"n": [1]}}]
        assert not bfcl_match([call("g", n=1), call("g", n=2)], answer, DOC)
        assert bfcl_match([call("g", n=2), call("g", n=1)], answer, DOC)


# ---- rewards -------------------------------------------------------------------------------------
REF = json.dumps([{"name": "f", "arguments": {"a": 1, "b": "x"}}])


class TestRewards:
    def test_toolrl_hand_cases(self):
        r = ToolCallReward()
        # exact: format 1 + correctness max 3
        assert r(['<tool_call>{"name": "f", "arguments": {"a": 1, "b": "x"}}</tool_call>'], [REF]) == [4.0]
        # wrong value of b: S = 1 (names) + 1 (keys) + 1 (a) = 3 of S_max = 1 + (1 + 2) = 4 -> -3 + 6 * 3/4
        assert r(['<tool_call>{"name": "f", "arguments": {"a": 1, "b": "y"}}</tool_call>'], [REF]) == [pytest.approx(1 + 1.5)]
        # missing b: keys Jaccard 1/2, values 1 -> S = 2.5 -> -3 + 6 * 2.5/4 = 0.75
        assert r(['<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>'], [REF]) == [pytest.approx(1 + 0.75)]
        # extra call: names Jaccard 1/2, best f matches fully -> S = 3.5 -> -3 + 6 * 3.5/4 = 2.25
        two = '<tool_call>{"name": "f", "arguments": {"a": 1, "b": "x"}}</tool_call><tool_call>{"name": "f", "arguments": {"a": 2}}</tool_call>'
        assert r([two], [REF]) == [pytest.approx(1 + 2.25)]
        # wrong function: S = 0 -> -3 (format 1); no call at all: -3 and format 0 (a call was expected)
        assert r(['<tool_call>{"name": "g", "arguments": {"a": 1}}</tool_call>', "no idea"], [REF, REF]) == [-2.0, -3.0]
        # unparsable: format 0 and correctness min
        assert r(['<tool_call>{"name": "f", "arguments": </tool_call>'], [REF]) == [-3.0]
        assert r.last_stats["format_error_frac"] == 1.0

    def test_toolrl_with_possible_answers_and_no_call_expected(self):
        ref = json.dumps({"ground_truth": ANSWER, "functions": DOC})
        # f with city right (NYC), scale missing: mandatory keys {city, scale}; keys J = 1/2, values 1
        # -> S = 1 + 0.5 + 1 = 2.5 of 1 + (1 + 2) = 4
        assert toolrl_correctness([call("f", city="NYC")], *parse_reference(ref)) == pytest.approx(2.5 / 4)
        none = json.dumps([])
        # no call expected: a plain answer is exact; a call is wrong in structure (F = 0) and content
        assert ToolCallReward()(["Sorry, no tool fits.", "f(a=1)"], [none, none]) == [4.0, -3.0]

    def test_weights_and_think_option(self):
        r = load_reward_function("tool_call[format_weight=0.5,correct_max=1,correct_min=0,require_think=1]")
        exact = '<tool_call>{"name": "f", "arguments": {"a": 1, "b": "x"}}</tool_call>'
        assert r([exact, "<think>ok</think>" + exact], [REF, REF]) == [1.0, 1.5]
        with pytest.raises(ValueError, match="unknown or empty option"):
            load_reward_function("tool_call[bogus=1]")

    def test_exact_reward(self):
        r = load_reward_function("tool_call_exact")
        out = r(['f(a=1, b="X")', '<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>', "f(a=1, b="],
                [REF, REF, json.dumps([])])
        assert out == [1.0, 0.0, 1.0]  # an unparsable answer holds no call: right when none is expected
        assert r.last_stats["parse_error_frac"] == pytest.approx(1 / 3)

    def test_toolrl_ground_truth_text(self):
        ref = '<think>...</think>\n<tool_call>\n{"name": "f", "parameters": {"a": 1, "b": "x"}}\n</tool_call>'
        assert parse_reference(ref) == ([{"f": {"a": [1], "b": ["x"]}}], None)
        assert parse_reference("<think>...</think>\n<response>Hi</response>") == ([], None)
        assert ToolCallReward()(['<tool_call>{"name": "f", "arguments": {"a": 1, "b": "x"}}</tool_call>'], [ref]) == [4.0]
        with pytest.raises(ValueError, match="neither JSON"):
            parse_reference("just words")

    def test_bad_reference_names_the_problem(self):
        with pytest.raises(ValueError, match="not JSON"):
            ToolCallExactReward()(["x"], ["{oops"])


# ---- BFCL data -----------------------------------------------------------------------------------
# Entries whose possible answer no call satisfies, under bfcl-eval's own checker too (checked in
# test_reference_checker_agrees): required parameters with no allowed value, or answer
# parameters the function doc does not declare.
UNSATISFIABLE = {"live_simple_106-63-0", "live_simple_112-68-0", "live_multiple_507-149-4",
                 "live_multiple_862-181-3", "live_multiple_964-207-0"}


@needs_bfcl
@pytest.mark.parametrize("category", ["simple", "multiple", "parallel", "parallel_multiple", "live_simple",
                                      "live_multiple", "live_parallel", "live_parallel_multiple", "irrelevance",
                                      "live_irrelevance", "live_relevance"])
def test_bfcl_ground_truth_scores_100_percent(category):
    from resrl.tasks.tools.bfcl_data import bfcl_problems

    problems = bfcl_problems(category)
    assert len(problems) >= 16
    reward = ToolCallExactReward()
    for style in ("hermes", "python", "json"):
        completions, answers = [], []
        for p in problems:
            if p.id in UNSATISFIABLE:
                continue
            ref = json.loads(p.answer)
            if "any_call" in ref:  # relevance: any well-formed call is right
                calls = [{"name": ref["functions"][0]["name"], "arguments": {}}]
            else:
                calls = canonical_calls(ref["ground_truth"], ref["functions"])
            completions.append(format_calls(calls, style) if calls else "None of the functions fits the request.")
            answers.append(p.answer)
        scores = reward(completions, answers)
        assert sum(scores) == len(scores), [a for a, s in zip(answers, scores) if s != 1.0][:2]


def _perturbations(rng, calls, functions):
    """(kind, perturbed calls) variants of a correct call list."""
    out = [("correct", calls)]
    c = [dict(x, arguments=dict(x["arguments"])) for x in calls]
    if len(c) > 1:
        out.append(("swapped", c[::-1]))
    out.append(("extra_call", calls + [calls[0]]))
    if len(c) > 1:
        out.append(("missing_call", calls[1:]))
    i = rng.randrange(len(c))
    args = c[i]["arguments"]
    if args:
        k = rng.choice(sorted(args))
        v = args[k]
        wrong = (v + "_x" if isinstance(v, str) else (not v) if isinstance(v, bool) else v + 1
                 if isinstance(v, (int, float)) else v[:-1] if isinstance(v, list) and v else {"zz": 1})
        out.append(("wrong_value", [dict(x, arguments=dict(x["arguments"], **({k: wrong} if j == i else {})))
                                    for j, x in enumerate(c)]))
        out.append(("dropped_param", [dict(x, arguments={a: b for a, b in x["arguments"].items() if not (j == i and a == k)})
                                      for j, x in enumerate(c)]))
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(("as_string", [dict(x, arguments=dict(x["arguments"], **({k: str(v)} if j == i else {})))
                                      for j, x in enumerate(c)]))
            if isinstance(v, float) and v.is_integer():
                out.append(("int_for_float", [dict(x, arguments=dict(x["arguments"], **({k: int(v)} if j == i else {})))
                                              for j, x in enumerate(c)]))
            if isinstance(v, int):
                out.append(("float_for_int", [dict(x, arguments=dict(x["arguments"], **({k: float(v)} if j == i else {})))
                                              for j, x in enumerate(c)]))
    out.append(("unknown_param", [dict(x, arguments=dict(x["arguments"], **({"zz_unknown": 1} if j == i else {})))
                                  for j, x in enumerate(c)]))
    other = [f["name"] for f in functions if f["name"] != c[i]["name"]]
    if other:
        out.append(("other_function", [dict(x, name=other[0]) if j == i else x for j, x in enumerate(c)]))
    return out


@needs_bfcl
def test_reference_checker_agrees():
    """Our bfcl_match against bfcl-eval's own ast_checker on perturbed calls from every AST category."""
    from bfcl_reference_checker import reference_match
    from resrl.tasks.tools.bfcl_data import SINGLE_TURN, bfcl_problems

    rng = random.Random(0)
    compared, disagree, kinds = 0, [], {}
    for category in ("simple", "multiple", "parallel", "parallel_multiple", "live_simple", "live_multiple",
                     "live_parallel", "live_parallel_multiple"):
        problems = bfcl_problems(category)
        for p in rng.sample(problems, min(12, len(problems))) + [q for q in problems if q.id in UNSATISFIABLE]:
            ref = json.loads(p.answer)
            gt, functions = ref["ground_truth"], ref["functions"]
            calls = canonical_calls(gt, functions)
            for kind, variant in _perturbations(rng, calls, functions):
                # round-trip through text, as a model's answer would arrive
                parsed = parse_tool_calls(format_calls(variant, rng.choice(["hermes", "python"])))
                assert parsed.error is None
                ours = bfcl_match(parsed, gt, functions)
                theirs = reference_match(SINGLE_TURN[category], functions, parsed, gt)
                compared += 1
                kinds.setdefault(kind, [0, 0])[ours] += 1
                if ours != theirs:
                    disagree.append((p.id, kind, variant, ours, theirs))
    assert compared >= 300, compared
    assert not disagree, disagree[:3]
    # the perturbations exercise both verdicts
    assert kinds["correct"][1] > 0 and kinds["wrong_value"][0] > 0 and kinds["extra_call"][0] > 0


@needs_bfcl
def test_bfcl_loader_errors_and_names():
    from resrl.tasks.tools.bfcl_data import bfcl_problems, canonical_category

    assert canonical_category("base") == "multi_turn_base" and canonical_category("simple_python") == "simple"
    with pytest.raises(ValueError, match="unknown BFCL category"):
        canonical_category("nope")
    with pytest.raises(ValueError, match="multi-turn"):
        bfcl_problems("multi_turn_base")
    p = bfcl_problems("simple", limit=1)[0]
    assert p.prompt[0]["role"] == "system" and "<tools>" in p.prompt[0]["content"] and p.prompt[-1]["role"] == "user"


def test_tool_rows_load_and_bad_rows_name_the_row(tmp_path):
    from resrl.tasks.data import load_problems
    from resrl.tasks.tools.data import synthetic_tool_rows

    path = tmp_path / "tools.jsonl"
    rows = synthetic_tool_rows(8, seed=1)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    problems = load_problems(path)
    assert [p.id for p in problems] == [r["id"] for r in rows]
    for p, r in zip(problems, rows):
        assert p.prompt[0]["role"] == "system" and p.prompt[1:] == r["messages"]
        # the reference round-trips: the expected calls score 1 with both rewards
        text = format_calls(r["expected"]) if r["expected"] else "No tool fits."
        assert ToolCallExactReward()([text], [p.answer]) == [1.0]
        assert ToolCallReward()([text], [p.answer]) == [4.0]
    bad = dict(rows[0], expected=[{"nope": 1, "x": 2}])
    path.write_text(json.dumps(rows[0]) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(ValueError, match=r"row 2: tool-call reference item"):
        load_problems(path)


@needs_bfcl
def test_bfcl_single_turn_evaluation_and_table(tmp_path):
    """The evaluator with tool_call_exact on BFCL entries gives BFCL's accuracy; the table groups it."""
    from resrl.tasks.data import load_benchmarks
    from resrl.tasks.tools.evaluate import bfcl_rows, bfcl_table, split_bfcl_specs
    from resrl.models.generators import Sample
    from resrl.eval.runner import EvalConfig, evaluate

    assert split_bfcl_specs(["bfcl:simple", "aime24", "bfcl:base"]) == (["bfcl:simple", "aime24"], ["multi_turn_base"])
    benches = load_benchmarks(["bfcl:simple", "bfcl:irrelevance"], limit=4)
    answers = {p.id: json.loads(p.answer) for ps in benches.values() for p in ps}

    def generator(jobs):  # right on simple_python_0, _1; wrong on _2, _3; irrelevance: one call made
        out = []
        for job in jobs:
            ref = answers[job.problem_id]
            if job.benchmark == "bfcl_simple":
                ok = job.problem_id in ("simple_python_0", "simple_python_1")
                text = format_calls(canonical_calls(ref["ground_truth"], ref["functions"])) if ok else "No idea."
            else:
                text = "I can't help." if job.problem_id != "irrelevance_0" else f"[{ref['functions'][0]['name']}()]"
            out.append(Sample(text=text, num_tokens=5, truncated=False))
        return out

    config = EvalConfig(n=1, temperature=0.0, reward="tool_call_exact", plot=False, progress=False)
    summary = evaluate(None, benches, config, tmp_path, generator=generator)
    rows = bfcl_rows(summary, {"multi_turn_base": {"entries": 2, "accuracy": 0.5}})
    assert rows == {"simple": (4, 0.5), "irrelevance": (4, 0.75), "multi_turn_base": (2, 0.5)}
    table = bfcl_table(rows)
    assert "| simple | 4 | 50.00 |" in table and "**Non-live** (mean of 1) | | **50.00**" in table
    assert "**Hallucination** (mean of 1) | | **75.00**" in table and "Live" not in table.replace("Non-live", "")
