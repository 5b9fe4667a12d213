"""Issue 53: a setting given to `resrl demo` reaches trl.GRPOConfig through at most twice the stops
(functions, and files) that it passes from `resrl train`'s entry (tests/setting_route.py measures
both routes as the program runs). Before the change that made it so (HEAD of 2026-12-07), the demo's
route was 21 functions in 11 files against `resrl train`'s 9 in 5: this test failed there."""

import pytest
from setting_route import demo_and_train_routes, route

pytestmark = pytest.mark.slow


def test_a_command_that_never_builds_grpo_config_is_not_reached(tmp_path):
    """The measure can tell: `--print-config` builds no GRPOConfig, so no route is reported (the next
    test checks that `resrl train`'s route holds the functions that carry the setting and none that
    only read it aside)."""
    assert not route(["demo", "--quick", "--print-config", "--out", str(tmp_path / "d")]).reached


def test_a_demo_setting_reaches_grpo_config_in_at_most_twice_the_stops_of_resrl_train(tmp_path):
    demo, train = demo_and_train_routes(tmp_path)
    shown = f"\nresrl demo:\n{demo}\nresrl train:\n{train}"
    assert demo.reached and train.reached, shown
    names = {name for _, name in train.functions}
    # the setting's own path in `resrl train`: parsed, overridden, typed, handed to TRL
    assert {"run", "load_config", "apply_overrides", "config_from_dict", "run_training", "grpo_args"} <= names, shown
    assert not any("validate" in name for name in names), shown  # a check reads it aside: no stop
    demo_names = {name for _, name in demo.functions}
    assert {"config_from_args", "run_experiment", "run_one", "grpo_args"} <= demo_names, shown
    assert len(demo.functions) <= 2 * len(train.functions), shown
    assert len(demo.files) <= 2 * len(train.files), shown
