"""The states an algorithm reads of the policy's own forward (spec §2): penultimate-layer outputs
(ResRL) and/or the head sketch (NTHR, ResRL's weighting="interference").

Two ways in, matching the TRL adapter's two ResRL modes:
  aligned     `capture(C)` around the training forward; `finish()` turns what it recorded into
              the (hidden, head sketch) pair the core reads.
  extra-pass  `armed()` around a generation round: the one no-grad forward of the policy in that
              round (TRL's old-log-prob pass or the adapter's own) is recorded by `record_forward`
              — only a forward of the policy with its adapters enabled (PEFT's reference is the
              same module with adapters off), never a reference pass.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
from torch import Tensor

from resrl.core.interference import head_sketch
from resrl.engines.hidden import LastLayerStates, PenultimateHidden, adapters_enabled, align_response_hidden


class StateCapture:
    """policy:     () -> the trainer's model as it is now (wrappers change during training)
    unwrap:        the accelerator's unwrap_model
    penultimate / head: what to capture; alignment: ResRL's hidden_alignment; head_topk: K of
    the head sketch; temperature: the sampling temperature (the sketch's softmax)."""

    def __init__(self, policy: Callable[[], torch.nn.Module], unwrap: Callable, *, penultimate: bool, head: bool,
                 alignment: str, head_topk: int, temperature: float):
        self._policy, self._unwrap = policy, unwrap
        model = policy()
        self.hidden = PenultimateHidden(model) if penultimate else None
        # the output head's input (the final norm's output)
        self.head = LastLayerStates(model, detach=True) if head else None
        self.alignment, self.head_topk, self.temperature = alignment, head_topk, temperature
        self._armed: list | None = None  # a list while a generation round wants its no-grad states

    def is_policy_forward(self, model) -> bool:
        """Is `model` the trained policy as it samples (not the reference model, and not the policy
        with its PEFT adapters disabled, which is how TRL computes the reference with LoRA)?"""
        policy = self._policy()
        unwrapped = self._unwrap(model)
        return (model is policy or unwrapped is policy or unwrapped is self._unwrap(policy)) \
            and adapters_enabled(unwrapped)

    @contextlib.contextmanager
    def capture(self, completion_length: int):
        """Record, during one policy forward, what the algorithm reads, at the last C + 1 positions.
        Yields {"hidden": [...], "head": [...]} (lists of (b, C+1, d))."""
        states = {"hidden": [], "head": []}
        with contextlib.ExitStack() as stack:
            if self.hidden is not None:
                states["hidden"] = stack.enter_context(self.hidden.capture(keep_last=completion_length + 1))
            if self.head is not None:
                states["head"] = stack.enter_context(self.head.capture(keep_last=completion_length + 1))
            yield states

    def finish(self, states: dict, completion_ids: Tensor):
        """Captured outputs -> (hidden (B, C, d) aligned as configured | None, HeadSketch | None).
        The head sketch is at the predicting position (the head input that produced token t's
        logits), with the top-K of softmax(x̂ Wᵀ + b) / temperature: one head product over the
        response tokens, in chunks."""
        C = completion_ids.shape[1]
        hidden = head = None
        if self.hidden is not None:
            if not states["hidden"]:
                raise RuntimeError("ResRLTrainer: the policy forward did not run the penultimate decoder layer")
            hidden = align_response_hidden(torch.cat(states["hidden"]), C, self.alignment)
        if self.head is not None:
            if not states["head"]:
                raise RuntimeError("ResRLTrainer: the policy forward did not run the final norm")
            x = align_response_hidden(torch.cat(states["head"]), C, "predicting")
            out_head = self._unwrap(self._policy()).get_output_embeddings()
            bias = getattr(out_head, "bias", None)
            head = head_sketch(x, out_head.weight.detach(), None if bias is None else bias.detach(), completion_ids,
                               self.head_topk, temperature=self.temperature)
        return hidden, head

    @contextlib.contextmanager
    def armed(self, on: bool = True):
        """While open (and `on`), the policy's no-grad forward is recorded: yields the list that
        receives its (hidden, head sketch) pair (empty when no such forward ran)."""
        self._armed = [] if on else None
        try:
            yield self._armed
        finally:
            self._armed = None

    def record_forward(self, model, input_ids: Tensor, logits_to_keep: int, forward: Callable):
        """Run `forward()` (a policy or reference forward over `input_ids`), recording its states
        when armed and it is the policy's no-grad forward."""
        if self._armed is None or torch.is_grad_enabled() or not self.is_policy_forward(model):
            return forward()
        if self._armed:
            raise RuntimeError("ResRLTrainer: two no-grad passes of the policy in one generation round; "
                               "the hidden states for ResRL's weights would be ambiguous")
        with self.capture(logits_to_keep) as states:
            result = forward()
        self._armed.append(self.finish(states, input_ids[:, -logits_to_keep:]))
        return result
