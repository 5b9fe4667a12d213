"""A run stopped after any checkpoint and resumed ends bit for bit where the uninterrupted run ends:
final weights, every logged metric (timings aside), the prompts of every generation round and of
every dynamic-sampling refill. Two epochs, a checkpoint after every step; one chain of runs per
layout stops after checkpoint 1, resumes from it and stops after checkpoint 2, ..., so that every
checkpoint, the epoch boundary included, is resumed from once (single-turn, multi-turn, the step
layout, dynamic sampling)."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file
from train_helpers import build_small_model, length_reward, overrides, toy_dataset
from transformers import TrainerCallback

from resrl.engines import multiturn
from resrl.engines.trl import dynamic_sampling
from resrl.engines.trl.trainer import ResRLTrainer
from resrl.train import load_config, run_training


class Stop(Exception):
    """Raised right after checkpoint N is published: the run ends there as if killed."""


def _stop_after(step: int):
    class StopAfter(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            if state.global_step == step:
                raise Stop(step)

    return StopAfter()


def _timing(key: str) -> bool:
    return "time" in key or "per_second" in key


def _logged(out) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if not _timing(k)}
            for line in (out / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_small_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture
def recorder(monkeypatch):
    """Records the prompts of every generation round and refill batch, and every checkpoint loaded."""
    seen = {"rounds": [], "refills": [], "loaded": []}
    real_round, real_refill = ResRLTrainer.generation_round, dynamic_sampling.RefillStream.next_batch
    real_loaded = ResRLTrainer.checkpoint_loaded

    def generation_round(self, inputs):
        if self.model.training:
            seen["rounds"].append([json.dumps(x["prompt"]) for x in inputs])
        return real_round(self, inputs)

    def next_batch(self):
        batch = real_refill(self)
        seen["refills"].append([json.dumps(x["prompt"]) for x in batch])
        return batch

    def checkpoint_loaded(self, path):
        seen["loaded"].append(str(path))
        return real_loaded(self, path)

    monkeypatch.setattr(ResRLTrainer, "generation_round", generation_round)
    monkeypatch.setattr(dynamic_sampling.RefillStream, "next_batch", next_batch)
    monkeypatch.setattr(ResRLTrainer, "checkpoint_loaded", checkpoint_loaded)
    return seen


def _check_chain(make_config, run_kwargs, tmp_path, recorder, max_steps: int, steps_per_epoch: int):
    """Uninterrupted run, then the chain stopped after every checkpoint, then one resumed run crossing the
    epoch boundary; returns the (full, chain) records."""
    assert max_steps == 2 * steps_per_epoch
    full_dir, chain_dir = tmp_path / "full", tmp_path / "chain"
    run_training(make_config(full_dir, "checkpoint.save_total_limit=null"), **run_kwargs())
    full = {k: list(v) for k, v in recorder.items()}
    assert full["loaded"] == []
    assert len(full["rounds"]) == max_steps
    per_epoch = steps_per_epoch
    # the two epochs serve their prompts in different orders (else the epoch boundary tests nothing)
    assert full["rounds"][:per_epoch] != full["rounds"][per_epoch:]
    for key in recorder:
        recorder[key].clear()

    epoch_of = {}  # checkpoint -> its trainer_state epoch
    for stop in range(1, max_steps + 1):
        logged = []
        before = len(recorder["loaded"])
        callbacks = [_stop_after(stop)] if stop < max_steps else []
        kwargs = dict(run_kwargs(), resume=stop > 1, callbacks=callbacks, save_final=stop == max_steps,
                      on_log=logged.append)
        if stop < max_steps:
            with pytest.raises(Stop):
                run_training(make_config(chain_dir), **kwargs)
        else:
            run_training(make_config(chain_dir), **kwargs)
        # the run really resumed from checkpoint stop-1 and logged from the step after it
        if stop > 1:
            assert recorder["loaded"][before:] == [str(chain_dir / f"checkpoint-{stop - 1}")]
        assert [m["step"] for m in logged] == [stop]
        state = json.loads((chain_dir / f"checkpoint-{stop}" / "trainer_state.json").read_text())
        assert state["global_step"] == stop
        epoch_of[stop] = state["epoch"]
    # the chain resumed at the epoch boundary (epoch 1.0) and inside the second epoch
    assert epoch_of[steps_per_epoch] == 1.0
    assert any(1.0 < epoch_of[s] < 2.0 for s in range(steps_per_epoch + 1, max_steps))

    chain = {k: list(v) for k, v in recorder.items()}
    assert chain["rounds"] == full["rounds"]            # the data order, round by round
    assert chain["refills"] == full["refills"]          # dynamic sampling's refill stream
    assert _logged(chain_dir) == _logged(full_dir)      # every logged metric, bit for bit
    full_w, chain_w = (load_file(d / "model" / "model.safetensors") for d in (full_dir, chain_dir))
    assert full_w.keys() == chain_w.keys()
    different = [k for k in full_w if not torch.equal(full_w[k], chain_w[k])]
    assert different == []

    # one resumed run that crosses the epoch boundary itself: from the step before it to the end
    # (the killed run's log lines after that checkpoint are in metrics.jsonl: trimmed on resume)
    cross_dir, start = tmp_path / "cross", steps_per_epoch - 1
    shutil.copytree(full_dir / f"checkpoint-{start}", cross_dir / f"checkpoint-{start}")
    shutil.copy(full_dir / "metrics.jsonl", cross_dir / "metrics.jsonl")
    before = {k: len(v) for k, v in recorder.items()}
    run_training(make_config(cross_dir), **run_kwargs(), resume=True)
    assert recorder["loaded"][before["loaded"]:] == [str(cross_dir / f"checkpoint-{start}")]
    assert recorder["rounds"][before["rounds"]:] == full["rounds"][start:]
    assert _logged(cross_dir) == _logged(full_dir)
    cross_w = load_file(cross_dir / "model" / "model.safetensors")
    assert [k for k in full_w if not torch.equal(full_w[k], cross_w[k])] == []
    return full, chain


def _single_turn_config(model_dir, *extra):
    def make(out, *more):
        return load_config(None, overrides(model_dir, out, "algorithm.name=grpo", "train.max_steps=8",
                                           "checkpoint.save_steps=1", *extra, *more))
    return make


def test_resume_is_exact_after_every_checkpoint_single_turn(model_dir, tmp_path, recorder):
    # 16 prompts, 4 per round: 4 steps per epoch, 8 steps
    _check_chain(_single_turn_config(model_dir), lambda: dict(train_dataset=toy_dataset(), reward_fn=length_reward),
                 tmp_path, recorder, max_steps=8, steps_per_epoch=4)


def test_resume_is_exact_after_every_checkpoint_ppo(model_dir, tmp_path, recorder):
    """PPO: the critic (separate trunk) and its AdamW state are in every checkpoint, and its warm-up
    (3 updates, across checkpoints) resumes where it was: every metric, the critic's included, and the
    final weights bit for bit."""
    full, _ = _check_chain(_single_turn_config(model_dir, "algorithm.name=ppo", "critic.warmup_steps=3"),
                           lambda: dict(train_dataset=toy_dataset(), reward_fn=length_reward),
                           tmp_path, recorder, max_steps=8, steps_per_epoch=4)
    logged = _logged(tmp_path / "full")
    assert [m["critic/warmup"] for m in logged] == [1.0] * 3 + [0.0] * 5
    assert all("critic/value_loss" in m and "critic/explained_variance" in m for m in logged)
    critic = load_file(tmp_path / "chain" / "checkpoint-8" / "critic.safetensors")
    full_critic = load_file(tmp_path / "full" / "checkpoint-8" / "critic.safetensors")
    assert [k for k in full_critic if not torch.equal(full_critic[k], critic[k])] == []


def test_resume_is_exact_after_every_checkpoint_dynamic_sampling(model_dir, tmp_path, recorder):
    full, _ = _check_chain(_single_turn_config(model_dir, "engine.dynamic_sampling=true"),
                           lambda: dict(train_dataset=toy_dataset(), reward_fn=length_reward),
                           tmp_path, recorder, max_steps=8, steps_per_epoch=4)
    # refills happened, more than a whole pass of the refill stream (16 prompts = 4 batches): the
    # resumed runs continued the stream in its second epoch too
    assert len(full["refills"]) > 4


def test_resume_is_exact_after_every_checkpoint_multi_turn(model_dir, tmp_path, recorder, monkeypatch):
    real_policy = multiturn.HFStepPolicy.__call__

    def short_messages(self, contexts, max_new_tokens):  # EOS after <= 4 sampled tokens (a random tiny model)
        outs = real_policy(self, contexts, [min(4, m) for m in max_new_tokens])
        return [((ids if ids and ids[-1] in self.eos_token_ids else ids + [self.eos_token_ids[0]]), None)
                for ids, _ in outs]

    monkeypatch.setattr(multiturn.HFStepPolicy, "__call__", short_messages)

    def make(out, *more):
        return load_config(None, overrides(model_dir, out, "algorithm.name=grpo", "train.max_steps=4",
                                           "train.rollout_prompts=2", "train.group_size=2",
                                           "env.name=train_helpers:make_two_step_env", "reward.function=env",
                                           "env.max_turns=3", "env.max_step_tokens=6",
                                           "train.max_completion_length=48", "checkpoint.save_steps=1", *more))

    # 4 prompts, 2 per round: 2 steps per epoch
    _check_chain(make, lambda: dict(train_dataset=toy_dataset(4)), tmp_path, recorder, max_steps=4,
                 steps_per_epoch=2)


@pytest.mark.slow  # environment worker processes (spawn) in every run of the chain
def test_resume_is_exact_after_every_checkpoint_step_layout(model_dir, tmp_path, recorder, monkeypatch):
    from agent_helpers import ScriptedPolicy, write_games

    # the tiny random model never writes an <action>: a scripted policy whose random replies are
    # seeded from the global torch RNG (which a checkpoint restores) stands in for sampling
    def scripted(model, tokenizer, **kwargs):
        return ScriptedPolicy(tokenizer, p_random=0.6, seed=int(torch.randint(2**31 - 1, ()).item()))

    monkeypatch.setattr(multiturn, "HFStepPolicy", scripted)
    games = write_games(tmp_path / "games.jsonl", n=4)

    def make(out, *more):
        return load_config(None, [
            f"model.path={model_dir}", f"data.train={games}", "reward.function=env",
            "env.name=resrl.envs.toy:make_toy_env", "env.layout=step", "env.history_window=2", "env.max_steps=4",
            "env.max_step_tokens=32", "env.num_workers=1", f"train.output_dir={out}", "train.max_steps=4",
            "train.rollout_prompts=2", "train.group_size=2", "train.learning_rate=0.01", "train.max_prompt_length=700",
            "train.seed=0", "loss.agg=token-mean", "log.progress=false", "log.report_to=[none]",
            "algorithm.name=gigpo", "checkpoint.save_steps=1", *more])

    # 4 games, 2 per round: 2 steps per epoch
    full, _ = _check_chain(make, dict, tmp_path, recorder, max_steps=4, steps_per_epoch=2)
    assert len({g for r in full["rounds"] for g in r}) == 4


def test_refill_stream_shards_whole_groups_and_resumes_from_its_state():
    from types import SimpleNamespace

    data = [{"prompt": f"p{i}"} for i in range(10)]

    def stream(rank):  # 2 processes, 4 prompts x G=2 per refill batch: 4 rows per process
        return dynamic_sampling.RefillStream(data, SimpleNamespace(process_index=rank), group_size=2,
                                             generation_batch_size=8, local_batch_size=4, seed=1)

    ranks = [stream(0), stream(1)]
    assert ranks[0].batches_per_epoch == 2  # 10 prompts: 2 whole batches of 4 per epoch
    served = [[[x["prompt"] for x in s.next_batch()] for s in ranks] for _ in range(5)]  # 2.5 epochs
    for local0, local1 in served:
        rows = local0 + local1
        assert rows[::2] == rows[1::2]                    # G = 2 copies of a prompt in a row, on one process
        assert len(set(rows)) == 4                        # 4 distinct prompts per batch
    epoch0 = {p for b in served[:2] for part in b for p in part}
    assert len(epoch0) == 8                               # no prompt twice inside an epoch
    assert served[:2] != served[2:4]                      # the next epoch has another order

    # a stream restored from a state continues as the original does, in and across epochs
    for k in range(5):
        fresh = stream(1)
        original = stream(1)
        for _ in range(k):
            original.next_batch()
        fresh.load_state_dict(json.loads(json.dumps(original.state_dict())))
        assert [x["prompt"] for x in fresh.next_batch()] == served[k][1]
