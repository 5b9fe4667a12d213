"""`resrl demo --algorithms` accepts variants of a registry algorithm (`name/key=value`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from resrl.demo.tasks import get_demo_task
from resrl.errors import InputError
from resrl.experiments.kinds import kind_of
from resrl.experiments.layout import run_dir_name
from resrl.train.variants import parse_variant


def train_config(label, output_dir):
    task = get_demo_task("math")
    return kind_of(task).train_config(task.config(quick=False), label, {"data_path": "rows.jsonl"}, output_dir)


def test_variant_label_sets_the_algorithm_section():
    cfg = train_config("resrl/resrl.rank=4/resrl.hidden_alignment=token", Path("runs/x"))
    assert cfg.algorithm.name == "resrl"
    assert cfg.algorithm.resrl.rank == 4 and cfg.algorithm.resrl.hidden_alignment == "token"
    plain = train_config("resrl", Path("runs/x"))
    assert plain.algorithm.resrl.rank != 4 and plain.algorithm.resrl.hidden_alignment == "predicting"
    assert parse_variant("w-reinforce/wreinforce_lambda=0.5").algorithm_section() == {"name": "w-reinforce",
                                                                                      "wreinforce_lambda": 0.5}
    assert run_dir_name("resrl/resrl.rank=4") == "resrl+resrl.rank=4"


def test_a_variant_carries_its_own_training_keys():
    cfg = train_config("resrl/train.learning_rate=3e-5/resrl.pos_scale=1.0/loss.kl_coef=0.01", Path("runs/x"))
    assert cfg.train.learning_rate == 3e-5 and cfg.algorithm.resrl.pos_scale == 1.0 and cfg.loss.kl_coef == 0.01
    assert train_config("resrl", Path("runs/x")).train.learning_rate == 1e-4  # the math task's
    assert run_dir_name("grpo/train.learning_rate=3e-4") == "grpo+train.learning_rate=3e-4"
    with pytest.raises(InputError, match=r"train\.nope"):
        train_config("grpo/train.nope=1", Path("runs/x"))


def test_bad_variant_settings_name_the_key():
    with pytest.raises(InputError, match="key=value"):
        parse_variant("resrl/rank")
    with pytest.raises(InputError, match=r"algorithm\.resrl\.nope"):
        train_config("resrl/resrl.nope=1", Path("runs/x"))
