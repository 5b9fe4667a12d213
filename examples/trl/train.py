"""A TRL GRPO script switched to resrl: `GRPOTrainer` -> `ResRLTrainer`, `GRPOConfig` -> `ResRLGRPOConfig`.
Everything else is what a TRL user already has: a `datasets.Dataset` with a `prompt` column, reward
functions `f(completions, **columns) -> list[float]` with weights, LoRA through `peft_config`.

    python examples/trl/train.py --model_name_or_path MODEL --output_dir out --algorithm resrl
    python examples/trl/train.py --config examples/trl/resrl.yaml --model_name_or_path MODEL
    python examples/trl/train.py ... --conversational true --lora_r 16      # chat prompts, LoRA

Any GRPOConfig flag works as in TRL (`--beta`, `--epsilon`, `--loss_type`, `--num_generations`, ...);
resrl's are flat flags (`--algorithm`, `--resrl_rank`, `--resrl_pos_scale`, `--loss_agg`, ...).
See docs/coming-from-trl.md for what maps to what.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from datasets import Dataset
from trl import TrlParser

from resrl import ResRLGRPOConfig, ResRLTrainer   # was: from trl import GRPOConfig, GRPOTrainer


@dataclass
class ScriptArguments:
    model_name_or_path: str = field(metadata={"help": "A local causal-LM directory (or a Hub id)."})
    conversational: bool = field(default=False, metadata={"help": "Chat-message prompts instead of plain text."})
    num_prompts: int = field(default=64, metadata={"help": "Size of the toy arithmetic dataset."})
    lora_r: int = field(default=0, metadata={"help": "LoRA rank (0: full fine-tuning)."})


def arithmetic_dataset(n: int, conversational: bool) -> Dataset:
    """A toy verifiable task: `a+b=` with the sum in an `answer` column (reward functions see it)."""
    rows = []
    for i in range(n):
        a, b = i % 10, (3 * i) % 10
        question = f"{a}+{b}="
        prompt = [{"role": "user", "content": question}] if conversational else question
        rows.append({"prompt": prompt, "answer": str(a + b)})
    return Dataset.from_list(rows)


def _text(completion) -> str:
    return completion[-1]["content"] if isinstance(completion, list) else completion


def correctness(completions, answer, **kwargs) -> list[float]:
    """1 when the first number of the completion is the answer."""
    out = []
    for completion, target in zip(completions, answer):
        found = re.search(r"-?\d+", _text(completion))
        out.append(float(found is not None and found.group() == target))
    return out


def brevity(completions, completion_ids, **kwargs) -> list[float]:
    """A small bonus for short completions (TRL passes the token ids too)."""
    return [1.0 - min(len(ids), 64) / 64 for ids in completion_ids]


def main(argv: list[str] | None = None):
    parser = TrlParser((ScriptArguments, ResRLGRPOConfig))
    script, config = parser.parse_args_and_config(argv)
    if config.reward_weights is None:
        config.reward_weights = [1.0, 0.1]    # correctness counts, brevity breaks ties
    peft_config = None
    if script.lora_r > 0:
        from peft import LoraConfig

        peft_config = LoraConfig(r=script.lora_r, lora_alpha=2 * script.lora_r, target_modules="all-linear",
                                 task_type="CAUSAL_LM")
    trainer = ResRLTrainer(                     # was: GRPOTrainer(
        model=script.model_name_or_path,
        reward_funcs=[correctness, brevity],
        args=config,
        train_dataset=arithmetic_dataset(script.num_prompts, script.conversational),
        peft_config=peft_config,
    )
    trainer.train()
    trainer.save_model(config.output_dir)
    return trainer


if __name__ == "__main__":
    main()
