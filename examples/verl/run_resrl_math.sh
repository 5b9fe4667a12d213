#!/usr/bin/env bash
# The paper's math recipe (spec §7) as a veRL 0.9.1 job with the resrl plugin — Hydra overrides
# only. NOT RUN END TO END in this project (no GPU with vLLM/SGLang here): see README "veRL plugin"
# for what is tested and for the part of ResRL's wiring that veRL 0.9.1 does not expose yet.
#
# Setup, in a venv of its own (veRL pins transformers<5.11; the project's TRL stack needs 5.23):
#   pip install torch==2.13.0 && pip install --no-deps verl==0.9.1 && pip install "vllm==<veRL's pin>"
#   pip install --no-deps -e /path/to/resrl   # registers the `verl.plugins` entry point
# `import verl` then registers the estimators resrl, w_reinforce, psr, nsr (VERL_USE_EXTERNAL_PLUGINS=auto).
#
# ALGO: resrl | w_reinforce | psr | nsr.  MODEL, TRAIN, VAL: paths (veRL parquet columns:
# data_source, prompt (chat list), ability, reward_model.ground_truth, extra_info).
set -euo pipefail
ALGO=${ALGO:-resrl}
MODEL=${MODEL:?set MODEL to a local Qwen3 checkpoint}
TRAIN=${TRAIN:?set TRAIN to a training parquet}
VAL=${VAL:?set VAL to a validation parquet}
NGPUS=${NGPUS:-8}

python3 -m verl.trainer.main_ppo \
  algorithm.adv_estimator="$ALGO" \
  algorithm.use_kl_in_reward=False \
  algorithm.norm_adv_by_std_in_grpo=True \
  +algorithm.resrl.rank=64 \
  +algorithm.resrl.max_pos_tokens=4096 \
  +algorithm.resrl.wreinforce_lambda=0.1 \
  data.train_files="$TRAIN" data.val_files="$VAL" \
  data.train_batch_size=256 \
  data.max_prompt_length=2048 \
  data.max_response_length=4096 \
  actor_rollout_ref.model.path="$MODEL" \
  actor_rollout_ref.model.use_remove_padding=True \
  actor_rollout_ref.rollout.name=vllm \
  actor_rollout_ref.rollout.n=4 \
  actor_rollout_ref.rollout.temperature=0.6 \
  actor_rollout_ref.actor.ppo_mini_batch_size=64 \
  actor_rollout_ref.actor.optim.lr=1e-6 \
  actor_rollout_ref.actor.optim.lr_warmup_steps=10 \
  actor_rollout_ref.actor.optim.weight_decay=0.1 \
  actor_rollout_ref.actor.use_kl_loss=False \
  actor_rollout_ref.actor.kl_loss_coef=0 \
  actor_rollout_ref.actor.entropy_coeff=0 \
  actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean \
  trainer.balance_batch=False \
  trainer.n_gpus_per_node="$NGPUS" trainer.nnodes=1 \
  "$@"
# trainer.balance_batch=False: veRL's balance reorders responses by length and splits groups;
# ResRL's weights need whole groups per rank (the plugin refuses a split group, naming this key).
# With it off, each rank's share (256·4 / NGPUS = 128 rows on 8 GPUs) must be a multiple of n = 4.
