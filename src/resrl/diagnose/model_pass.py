"""One group of sampled completions through the model: the states the diagnostics need.

Two states per response token t, captured by hooks during one forward (no `output_hidden_states`):

    penultimate  output of decoder layer L−1 (ResRL's h, spec §2), via `resrl.engines.hidden`
    head input   the input of the output head (the final norm's output x̂), what Lemma 1 is about

and the model's own logits, to check that the head really is z = W x̂ (+ b) on the captured x̂.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from resrl.engines.hidden import PenultimateHidden


@dataclass
class SampledGroup:
    """G completions of one prompt.

    input_ids (G, S) prompt + completion; attention_mask (G, S); completion_length C (the last C
    positions); completion_mask (G, C) valid up to and including the first end-of-sequence token;
    truncated (G,) bool (no end-of-sequence token within max_new_tokens)."""

    input_ids: Tensor
    attention_mask: Tensor
    completion_length: int
    completion_mask: Tensor
    truncated: Tensor

    @property
    def completion_ids(self) -> Tensor:
        return self.input_ids[:, -self.completion_length:]


@dataclass
class GroupForward:
    """States of a forward over a SampledGroup, at the C + 1 last positions (position j holds the
    state after reading token j; the state at C + j − 1 predicts completion token j).

    penultimate (G, C+1, d) float32; head_input (G, C+1, d_head) float32; logits (G, C, V) float32
    (the model's logits for the completion tokens, predicting alignment)."""

    penultimate: Tensor
    head_input: Tensor
    logits: Tensor


def stable_seed(*parts) -> int:
    """A 31-bit seed from any parts (same parts, same seed, on every machine and process)."""
    return zlib.crc32("|".join(map(str, parts)).encode()) & 0x7FFFFFFF


def sample_group(model, tokenizer, prompt: str, group_size: int, temperature: float, top_p: float,
                 max_new_tokens: int, seed: int, eos_ids: list[int], add_special_tokens: bool = False) -> SampledGroup:
    """G samples of one prompt (the rows share the prompt: no padding in it), temperature and top-p
    (no top-k; temperature 0: greedy). Seeded from `seed` alone, so a group is the same whatever
    else is sampled."""
    from resrl.models.generation import completion_mask, generate_with, sampling_config

    enc = tokenizer([prompt], return_tensors="pt", add_special_tokens=add_special_tokens)
    device = next(model.parameters()).device
    ids = enc["input_ids"].to(device).repeat(group_size, 1)
    attn = torch.ones_like(ids)
    gen_cfg = sampling_config(temperature=temperature, top_p=top_p, top_k=0, max_new_tokens=max_new_tokens,
                              eos_token_id=eos_ids, pad_token_id=tokenizer.pad_token_id)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        out = generate_with(model, gen_cfg, input_ids=ids, attention_mask=attn)
    completion = out[:, ids.shape[1]:]
    cmask, ended = completion_mask(completion, eos_ids)
    truncated = ~ended
    attention_mask = torch.cat([attn, cmask.long()], dim=1)
    return SampledGroup(out, attention_mask, completion.shape[1], cmask, truncated)


def output_head(model: nn.Module) -> nn.Module:
    """The module that maps the last hidden state to logits (a Linear for every HF causal LM)."""
    head = model.get_output_embeddings()
    if head is None or not hasattr(head, "weight"):
        raise ValueError(f"{type(model).__name__} has no output head with a weight")
    return head


def forward_group(model: nn.Module, group: SampledGroup) -> GroupForward:
    """One no-grad forward of the group, capturing the penultimate states and the head input."""
    C = group.completion_length
    head = output_head(model)
    captured: list[Tensor] = []

    def pre_hook(module, args):
        captured.append(args[0][:, -(C + 1):].detach())

    hidden_hook = PenultimateHidden(model)
    handle = head.register_forward_pre_hook(pre_hook)
    try:
        with hidden_hook.capture(keep_last=C + 1) as outs, torch.no_grad():
            out = model(input_ids=group.input_ids, attention_mask=group.attention_mask, logits_to_keep=C + 1)
        penultimate = outs[0]
    finally:  # PenultimateHidden's hook is gone once its capture block closes
        handle.remove()
    if len(captured) != 1:
        raise ValueError(f"the output head ran {len(captured)} times in one forward; cannot tell its input")
    return GroupForward(penultimate.float(), captured[0].float(), out.logits[:, -(C + 1):-1].float())


def sequence_logprobs(model: nn.Module, group: SampledGroup) -> Tensor:
    """(G, C) log-probabilities of the completion tokens under `model` (with grad if enabled)."""
    C = group.completion_length
    out = model(input_ids=group.input_ids, attention_mask=group.attention_mask, logits_to_keep=C + 1)
    logits = out.logits[:, -(C + 1):-1].float()
    return torch.log_softmax(logits, dim=-1).gather(-1, group.completion_ids[..., None])[..., 0]


__all__ = ["SampledGroup", "GroupForward", "stable_seed", "sample_group", "output_head", "forward_group",
           "sequence_logprobs"]
