"""Run by test_engine_distributed.py under two CPU processes (gloo): one ResRL update whose prompt
groups straddle both the processes and the micro-batches, checked against a single-process
recomputation of the same global batch.

Layout: 3 prompts x G = 4 = 12 completions, 6 per process (not a multiple of G), micro-batches of
2 rows, so group 1 is split 2 | 2 across the processes and micro-batches cut groups.

Checks (each printed as `CHECK <name> ok|FAIL <detail>`; exit 1 if any fails):
  world        two processes really ran, and the batch was sized for two
  straddle     a group really has rows on both processes, and a micro-batch holds parts of two groups
  once         every completion of the round reached the loss exactly once (no row dropped or doubled)
  completions  the logged `completions/update_rows` = rollout_prompts x G
  weights      the token advantages used equal resrl.core on the whole global batch (hidden states
               recomputed with output_hidden_states on the initial model)
  params       after the update the parameters equal one single-process SGD step on the global
               batch's loss (seq-mean-token-mean over all 12 completions, same grad clipping)

    argv: MODEL_DIR OUTPUT_DIR
"""

import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).parent))
torch.set_num_threads(1)

from train_helpers import length_reward, overrides  # noqa: E402

from resrl.core.loss import policy_loss  # noqa: E402
from resrl.core.registry import AdvantageInputs, compute_token_advantages  # noqa: E402
from resrl.engines.trl import trainer as trl_engine  # noqa: E402
from resrl.engines.trl.batches import concat_batches  # noqa: E402
from resrl.engines.hidden import align_response_hidden, reference_penultimate  # noqa: E402
from resrl.train import load_config, run_training  # noqa: E402

ROW_KEYS = ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "rewards", "group_index",
            "truncated", "advantages")
PROMPTS, G = 3, 4


def equal_length_dataset(n: int = 16):
    """Prompts of one token length: without position ids, left padding would shift positions and
    make per-process states differ from the whole batch's for reasons unrelated to the engine."""
    from datasets import Dataset

    return Dataset.from_list([{"prompt": [{"role": "user", "content": f"{i}+1="}], "answer": str(i + 1)}
                              for i in range(10, 10 + n)])


def check(name: str, ok: bool, detail: str = "") -> bool:
    print(f"CHECK {name} {'ok' if ok else 'FAIL'} {detail}", flush=True)
    return ok


def finish(ok: bool) -> int:
    """Every rank's verdict gathered, the process group closed, the exit code: 0 only when every rank passed.
    Every dist_*_script ends with it."""
    flags = [torch.zeros(1) for _ in range(dist.get_world_size())]
    dist.all_gather(flags, torch.tensor([float(ok)]))
    dist.destroy_process_group()  # before exit: left to interpreter shutdown it can abort the process
    return 0 if all(f.item() == 1.0 for f in flags) else 1


def main() -> int:
    model_dir, out_dir = sys.argv[1], sys.argv[2]
    rounds, micro_batches = [], []
    real_gen = trl_engine.ResRLTrainer._generate_and_score_completions
    real_loss = trl_engine.ResRLTrainer._compute_loss

    def gen_spy(self, inputs):
        out = real_gen(self, inputs)
        rounds.append({k: out[k].detach().clone() for k in ROW_KEYS})
        return out

    def loss_spy(self, model, inputs):
        micro_batches.append({k: inputs[k].detach().clone() for k in ("group_index", "completion_ids")})
        return real_loss(self, model, inputs)

    trl_engine.ResRLTrainer._generate_and_score_completions = gen_spy
    trl_engine.ResRLTrainer._compute_loss = loss_spy
    cfg = load_config(None, overrides(model_dir, out_dir, "algorithm.name=resrl", f"train.rollout_prompts={PROMPTS}",
                                      f"train.group_size={G}", "train.micro_batch_size=2", "train.max_steps=1",
                                      "train.learning_rate=0.05", "train.max_grad_norm=1.0",
                                      "algorithm.resrl.svd=exact", "trl.optim=sgd"))
    result = run_training(cfg, train_dataset=equal_length_dataset(), reward_fn=length_reward, save_final=False)
    rank, world = dist.get_rank(), dist.get_world_size()
    ok = True
    if rank == 0:
        ok &= check("world", world == 2 and len(rounds) == 1 and rounds[0]["rewards"].numel() == PROMPTS * G // 2,
                    f"world={world} rounds={len(rounds)} local rows={rounds[0]['rewards'].numel()}")

    everything = [None] * world
    dist.all_gather_object(everything, {"round": rounds[0], "micro": micro_batches,
                                        "params": [p.detach().clone() for p in result.model.parameters()]})
    if rank == 0:
        parts = [e["round"] for e in everything]
        gids = [set(p["group_index"].tolist()) for p in parts]
        shared = gids[0] & gids[1]
        # a group cut by micro-batches: its rows reach the loss in more than one micro-batch
        cut = any(sum(int((m["group_index"] == g).sum() > 0) for m in e["micro"]) > 1
                  for e in everything for g in e["round"]["group_index"].unique())
        ok &= check("straddle", bool(shared) and cut, f"groups on both processes {sorted(shared)}, cut by micro-batches {cut}")

        # every completion exactly once: per process, the multiset of (group, completion row) of the
        # micro-batches equals that of the generation round (same local padding, rows are only moved)
        def rows(batches):
            return sorted((int(g), tuple(c.tolist())) for b in batches
                          for g, c in zip(b["group_index"], b["completion_ids"]))

        same_rows = all(rows(e["micro"]) == rows([e["round"]]) for e in everything)
        n_used = sum(len(rows(e["micro"])) for e in everything)
        ok &= check("once", same_rows and n_used == PROMPTS * G, f"{n_used} rows used of {PROMPTS * G}")
        logged = [m.get("completions/update_rows") for m in result.metrics]
        ok &= check("completions", logged == [float(PROMPTS * G)], f"logged {logged}")

        # the global batch, one process's rows after the other (TRL's order)
        full = concat_batches(parts, pad_token_id=0)  # padding is masked out everywhere below
        from transformers import AutoModelForCausalLM

        initial = AutoModelForCausalLM.from_pretrained(model_dir).eval()
        ids = torch.cat([full["prompt_ids"], full["completion_ids"]], 1)
        attn = torch.cat([full["prompt_mask"], full["completion_mask"]], 1)
        C = full["completion_ids"].shape[1]
        hidden = align_response_hidden(reference_penultimate(initial, ids, attn), C, "predicting")
        mask = full["completion_mask"].bool()
        expected, _ = compute_token_advantages(
            AdvantageInputs(full["rewards"], full["group_index"], mask, hidden, full["truncated"]), cfg.algorithm)
        err = (full["advantages"] - expected).abs().max().item()
        ok &= check("weights", err < 1e-4 and bool((expected[mask] != 0).any()), f"max |err| = {err:.2e}")

        # one single-process SGD step on the same global batch
        initial.train()
        logits = initial(input_ids=ids, attention_mask=attn).logits[:, -C - 1:-1].float()
        logps = torch.log_softmax(logits, -1).gather(-1, full["completion_ids"][..., None])[..., 0]
        loss, _ = policy_loss(logps, logps.detach(), expected, mask, cfg.loss)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(initial.parameters(), cfg.train.max_grad_norm)
        with torch.no_grad():
            for p in initial.parameters():
                p -= cfg.train.learning_rate * p.grad
        moved = max((a - b.detach()).abs().max().item() for a, b in
                    zip(everything[0]["params"], AutoModelForCausalLM.from_pretrained(model_dir).parameters()))
        diff = max((a - b.detach()).abs().max().item() for a, b in zip(everything[0]["params"], initial.parameters()))
        same = all(torch.equal(a, b) for a, b in zip(everything[0]["params"], everything[1]["params"]))
        ok &= check("params", same and diff < 1e-5 and moved > 1e-3,
                    f"max |two-process - single-process| = {diff:.2e}, update size {moved:.2e}, ranks equal {same}")
    return finish(ok)


if __name__ == "__main__":
    sys.exit(main())
