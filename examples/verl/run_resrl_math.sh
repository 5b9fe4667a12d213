#!/usr/bin/env bash
# The paper's math recipe (spec §7) as a veRL 0.9.1 job with the resrl plugin — Hydra overrides
# only. NOT RUN END TO END in this project (no GPU with vLLM/SGLang here): see docs/verl.md
# for what is tested.
#
# Setup, in a venv of its own (veRL pins transformers<5.11; the project's TRL stack needs 5.23):
#   pip install torch==2.13.0 && pip install --no-deps verl==0.9.1 && pip install "vllm==<veRL's pin>"
#   pip install --no-deps -e /path/to/resrl   # registers the `verl.plugins` entry point
# `import verl` then registers the estimators resrl, w_reinforce, psr, nsr and the v1 trainer mode
# `resrl` (VERL_USE_EXTERNAL_PLUGINS=auto). ResRL needs that trainer mode: its actor worker returns
# the per-token weights from the old-log-prob pass and its balance keeps groups whole per rank.
#
# ALGO: any estimator the plugin registers: the table in docs/verl.md, which is
# resrl.engines.verl.algorithms.verl_catalog() (from the registry; refused ones say why).  MODEL, TRAIN, VAL: paths (veRL parquet columns:
# data_source, prompt (chat list), ability, reward_model.ground_truth, extra_info).
# MODEL: the authors' train_command.sh trains Qwen/Qwen3-4B (the hybrid-thinking release, not -Base)
# with thinking OFF (its line 53: +data.apply_chat_template_kwargs.enable_thinking=False, set below);
# with a -Base model drop that line (its template has no thinking switch). docs/method.md's table.
set -euo pipefail
ALGO=${ALGO:-resrl}
MODEL=${MODEL:?set MODEL to a local Qwen3 checkpoint}
TRAIN=${TRAIN:?set TRAIN to a training parquet}
VAL=${VAL:?set VAL to a validation parquet}
NGPUS=${NGPUS:-8}
MODE=sync
[ "$ALGO" = resrl ] && MODE=resrl

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
  +data.apply_chat_template_kwargs.enable_thinking=False \
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
  trainer.v1.trainer_mode="$MODE" \
  trainer.n_gpus_per_node="$NGPUS" trainer.nnodes=1 \
  "$@"
# trainer.v1.trainer_mode=resrl: veRL's own balance reorders responses by length and splits groups;
# the resrl trainer moves whole groups (equal group count per rank, balanced tokens), so the batch
# (256·4 = 1024 rows) must be a multiple of NGPUS·n and of the PPO mini-batch (64·4): it refuses
# otherwise rather than letting veRL pad it with rows that would form partial groups.
