"""Config, data and reward errors are caught before training, with the key / file / row named;
a reward that never returns is cut off."""

from __future__ import annotations

import argparse
import json
import textwrap

import pytest
from train_helpers import build_small_model, overrides, toy_dataset

from resrl.train import load_config, run_training
from resrl.train.config import ConfigError


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("tiny") / "model")


def check(overrides_, **validate):
    cfg = load_config(None, overrides_)
    cfg.validate(need_model=False, need_data=False, **validate)
    return cfg


@pytest.mark.parametrize("bad,key", [
    (["train.group_sizes=4"], "train.group_sizes"),
    (["trian.group_size=4"], "trian"),
    (["algorithm.resrl.ranks=4"], "algorithm.resrl.ranks"),
    (["train.group_size=four"], "train.group_size"),
    (["train.learning_rate=fast"], "train.learning_rate"),
    (["log.report_to=tensorboard"], "log.report_to"),
    (["algorithm.resrl.rank=0"], "algorithm.resrl.rank"),
    (["algorithm.name=reinforce-plus-plus"], "algorithm.name"),
    (["loss.agg=mean"], "loss.agg"),
    (["engine.resrl_mode=fast"], "engine.resrl_mode"),
    (["train.rollout_prompts=3", "train.group_size=4", "train.micro_batch_size=8"], "train.micro_batch_size"),
    (["train.rollout_prompts=8", "train.update_prompts=3"], "train.update_prompts"),
    (["train.group_size=1"], "train.group_size"),
    (["train.rollout_prompts=8", "train.update_prompts=4", "engine.resrl_mode=aligned"], "engine.resrl_mode"),
    (["train.rollout_prompts=8", "train.update_prompts=4", "checkpoint.save_steps=3"], "checkpoint.save_steps"),
    (["reward.timeout_s=0"], "reward.timeout_s"),
    (["train.max_steps"], "key=value"),
])
def test_bad_values_name_the_key(bad, key):
    with pytest.raises(ConfigError) as info:
        check(bad)
    assert key in str(info.value)


def test_process_count_is_checked():
    with pytest.raises(ConfigError, match="train.update_prompts"):
        check(["train.rollout_prompts=3", "train.group_size=3"], num_processes=2)
    with pytest.raises(ConfigError, match="engine.dynamic_sampling"):
        check(["algorithm.name=dapo", "train.rollout_prompts=3", "train.group_size=4"], num_processes=2)


def test_values_types_and_algorithm_defaults():
    cfg = check(["algorithm.name=dapo", "train.learning_rate=1e-6", "loss.clip_eps_high=0.3",
                 "log.report_to=[tensorboard,wandb]", "algorithm.resrl.rank=32", "train.update_prompts=null"])
    assert cfg.train.learning_rate == 1e-6 and isinstance(cfg.train.learning_rate, float)
    assert cfg.loss.agg == "token-mean"           # DAPO's default
    assert cfg.loss.clip_eps_high == 0.3          # the user's value wins over DAPO's 0.28
    assert cfg.dynamic_sampling
    assert cfg.log.report_to == ["tensorboard", "wandb"]
    assert cfg.algorithm.resrl.rank == 32
    assert check(["algorithm.name=drgrpo"]).loss.agg == "seq-mean-token-sum-norm"
    assert check(["algorithm.name=drgrpo"]).loss.max_response_length == 256  # = train.max_completion_length


def test_yaml_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    bad.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(bad)


def test_example_configs_validate():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "configs"
    files = sorted(root.glob("*.yaml"))
    assert files, "no example configs"
    for path in files:
        cfg = load_config(path)
        cfg.validate(need_model=False, need_data=False)
    # the paper recipe validates for the 8-GPU launch it documents, vLLM settings included
    cfg = load_config(root / "qwen3_math_resrl.yaml")
    cfg.validate(num_processes=8, need_model=False, need_data=False)
    assert cfg.trl["use_vllm"] and cfg.trl["vllm_mode"] == "colocate"


def test_accelerate_configs_load():
    """configs/accelerate/*.yaml are accelerate launch configs it accepts (it rejects unknown keys)."""
    from pathlib import Path

    from accelerate.commands.config.config_args import ClusterConfig

    files = sorted((Path(__file__).resolve().parents[1] / "configs" / "accelerate").glob("*.yaml"))
    kinds = {p.stem: ClusterConfig.from_yaml_file(str(p)) for p in files}
    assert set(kinds) == {"deepspeed_zero2", "deepspeed_zero3", "fsdp2"}
    assert kinds["deepspeed_zero3"].deepspeed_config["zero_stage"] == 3
    assert kinds["fsdp2"].fsdp_config["fsdp_version"] == 2


def test_cli_check_and_error(tmp_path, capsys):
    from resrl.train.command import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    good = tmp_path / "c.yaml"
    good.write_text(textwrap.dedent(f"""
        model: {{path: {tmp_path}}}
        data: {{train: gsm8k}}
        algorithm: {{name: resrl}}
    """))
    args = parser.parse_args(["train", "--config", str(good), "train.max_steps=3", "--check"])
    assert args.func(args) == 0
    args = parser.parse_args(["train", "--config", str(good), "train.max_stepz=3", "--check"])
    assert args.func(args) == 2
    assert "train.max_stepz" in capsys.readouterr().err


def test_data_and_reward_errors(model_dir, tmp_path):
    rows = tmp_path / "train.jsonl"
    rows.write_text(json.dumps({"problem": "1+1", "answer": "2"}) + "\n" + json.dumps({"question": "?"}) + "\n")
    cfg = load_config(None, overrides(model_dir, tmp_path / "run", f"data.train={rows}", "reward.function=exact"))
    with pytest.raises(ValueError, match=r"train.jsonl.*row 2"):
        run_training(cfg)
    cfg = load_config(None, overrides(model_dir, tmp_path / "run", f"data.train={rows}",
                                      "reward.function=no_such_module:score"))
    with pytest.raises(ConfigError, match="reward.function"):
        run_training(cfg)
    cfg = load_config(None, overrides(model_dir, tmp_path / "run"))
    with pytest.raises(ValueError, match="answer"):
        run_training(cfg, train_dataset=toy_dataset().remove_columns("answer"), reward_fn=lambda c, a: [0.0] * len(c))


def test_reward_that_never_returns_is_cut_off(model_dir, tmp_path):
    module = tmp_path / "hanging_reward.py"
    module.write_text(textwrap.dedent("""
        import time

        def score(completions, answers):
            out = []
            for c in completions:
                if sum(map(ord, c)) % 2:
                    time.sleep(10 ** 6)  # a pathological item: never returns
                out.append(1.0)
            return out
    """))
    cfg = load_config(None, overrides(model_dir, tmp_path / "run", "train.max_steps=1",
                                      f"reward.function={module}:score", "reward.isolate=true",
                                      "reward.timeout_s=0.5"))
    result = run_training(cfg, train_dataset=toy_dataset(), save_final=False)
    step = result.metrics[0]
    assert step["reward/timeouts"] > 0  # counted in the logs
    assert 0 < step["reward"] < 1  # timed-out items scored 0, the others 1


def test_make_tiny_model_command(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from resrl.models.command import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    out = tmp_path / "tiny"
    args = parser.parse_args(["make-tiny-model", str(out), "--hidden-size", "32", "--layers", "2", "--heads", "2",
                              "--kv-heads", "1", "--head-dim", "16", "--intermediate-size", "64"])
    assert args.func(args) == 0
    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.config.hidden_size == 32 and model.config.num_hidden_layers == 2
    assert AutoTokenizer.from_pretrained(out).chat_template
    args = parser.parse_args(["make-tiny-model", str(tmp_path / "bad"), "--heads", "3", "--kv-heads", "2"])
    assert args.func(args) == 2


def test_cli_trains_the_example_config(model_dir, tmp_path, capsys):
    """`resrl train --config configs/tiny_math.yaml` end to end (GSM8K rows, Math-Verify in its
    worker pool), shortened by overrides; then --resume continues from its final checkpoint."""
    from pathlib import Path

    from resrl.train.command import register

    config = Path(__file__).resolve().parents[1] / "configs" / "tiny_math.yaml"
    data = tmp_path / "problems.jsonl"  # GSM8K-style rows, so the test needs no shared data
    data.write_text("".join(json.dumps({"problem": f"What is {i} + {i}?", "answer": str(2 * i)}) + "\n"
                            for i in range(8)))
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    common = ["--config", str(config), f"model.path={model_dir}", f"train.output_dir={tmp_path / 'run'}",
              f"data.train={data}", "train.max_completion_length=16", "log.progress=false",
              "log.report_to=[none]", "checkpoint.save_steps=1"]
    args = parser.parse_args(["train", *common, "train.max_steps=2"])
    assert args.func(args) == 0
    assert "done:" in capsys.readouterr().out
    args = parser.parse_args(["train", *common, "train.max_steps=3", "--resume"])
    assert args.func(args) == 0
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [1, 2, 3]
    assert "reward/timeouts" in json.loads(lines[0])  # the math verifier's stats reach the log
