"""Penultimate-layer hidden states through one forward hook (spec §2), never `output_hidden_states`.

`output_hidden_states=True` keeps all L+1 layer outputs of a forward; ResRL needs only the
output of decoder layer L−1 (Hugging Face's `hidden_states[-2]`, before the final norm). A hook
on that layer keeps one `(B, S, d)` tensor, and only while a `capture()` block is open: the hook
is registered when the block opens and removed when it closes, so generation forwards,
gradient-checkpoint recomputations (they run in backward, after the block) and forwards of other
models never reach it, and an object that is dropped leaves nothing behind on the model.

Which forward is the policy's is decided by the caller, explicitly (`is_policy_forward`), never
by the order of calls: with PEFT the reference policy is the same module with its adapters
disabled, so a hook alone cannot tell the two apart.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch import Tensor, nn


def find_decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The list of decoder blocks of a causal LM (Qwen/Llama `model.layers`, GPT-2 `transformer.h`, ...)."""
    for attr in ("module", "base_model"):  # DDP / PEFT wrappers
        inner = getattr(model, attr, None)
        if isinstance(inner, nn.Module) and inner is not model and not isinstance(inner, nn.ModuleList):
            try:
                return find_decoder_layers(inner)
            except ValueError:
                pass
    best = None
    for name, module in model.named_modules():
        if isinstance(module, nn.ModuleList) and name.split(".")[-1] in ("layers", "h", "blocks", "layer"):
            if best is None or len(module) > len(best):
                best = module
    if best is None or len(best) < 2:
        raise ValueError(
            f"cannot find the decoder layers of {type(model).__name__} (need >= 2 for a penultimate layer)"
        )
    return best


def adapters_enabled(model: nn.Module) -> bool:
    """False while a PEFT model runs with its adapters disabled (`disable_adapter()`, TRL's
    reference pass); True for a plain model or an adapted one."""
    try:
        from peft.tuners.tuners_utils import BaseTunerLayer
    except ImportError:  # no PEFT installed: no adapters to disable
        return True
    for module in model.modules():
        if isinstance(module, BaseTunerLayer):
            return not module.disable_adapters
    return True


class ModuleOutputs:
    """Records a module's `(b, S, d)` outputs while `capture()` is open: the forward hook is
    registered when the block opens and removed when it closes.

    detach=True keeps constants (ResRL's states); detach=False keeps the graph, so a loss built on
    the captured tensors sends gradients into the backbone (FlowRL's log Z head input).
    """

    def __init__(self, module: nn.Module, detach: bool = True):
        self.layer = module
        self.detach = detach
        self._keep: slice | None = None
        self.outputs: list[Tensor] = []

    def _hook(self, module, args, output) -> None:
        h = output[0] if isinstance(output, (tuple, list)) else output
        if self._keep is not None:
            h = h[:, self._keep]
        self.outputs.append(h.detach() if self.detach else h)

    @contextmanager
    def capture(self, keep_last: int | None = None, keep_first: int | None = None):
        """keep_last=n: only the last n positions of each output; keep_first=n: only the first n."""
        if keep_last is not None and keep_first is not None:
            raise ValueError("capture: give keep_last or keep_first, not both")
        self.outputs = []
        self._keep = slice(-keep_last, None) if keep_last is not None else (
            slice(0, keep_first) if keep_first is not None else None)
        handle = self.layer.register_forward_hook(self._hook)
        try:
            yield self.outputs
        finally:
            handle.remove()
            self._keep = None


class PenultimateHidden(ModuleOutputs):
    """Decoder layer L−1's outputs (ResRL's states, spec §2), detached.

    Each forward inside `capture(keep_last)` appends one `(b, keep_last, d)` tensor (the last
    `keep_last` positions, i.e. what the response alignment needs, so prompts cost nothing).
    """

    def __init__(self, model: nn.Module):
        super().__init__(find_decoder_layers(model)[-2], detach=True)


FINAL_NORM_NAMES = ("norm", "ln_f", "final_layernorm", "final_layer_norm", "norm_f")


def find_final_norm(model: nn.Module) -> nn.Module:
    """The norm after the last decoder layer (its output is Hugging Face's `hidden_states[-1]`):
    Qwen/Llama `model.norm`, GPT-2 `transformer.ln_f`, Phi `final_layernorm`, ..."""
    found = [(name.count("."), name, module) for name, module in model.named_modules()
             if name.split(".")[-1] in FINAL_NORM_NAMES and not isinstance(module, nn.ModuleList)]
    if not found:
        raise ValueError(f"cannot find the final norm of {type(model).__name__} "
                         f"(looked for a module named one of {FINAL_NORM_NAMES})")
    return min(found, key=lambda t: (t[0], t[1]))[2]


class LastLayerStates(ModuleOutputs):
    """The final norm's outputs (`hidden_states[-1]`), with their graph (FlowRL's log Z input)."""

    def __init__(self, model: nn.Module, detach: bool = False):
        super().__init__(find_final_norm(model), detach=detach)


def align_response_hidden(hidden: Tensor, completion_length: int, alignment: str = "predicting") -> Tensor:
    """Response-aligned states from states over `[prompt | completion]` positions.

    hidden: (B, S, d) with the completion occupying the last `completion_length` positions
    (S >= completion_length + 1). Returns (B, C, d):
      "predicting": the state at position t−1, the one feeding the output head for token t (spec §2)
      "token":      the state at position t, after token t has been read
    """
    C = completion_length
    if hidden.shape[1] < C + 1:
        raise ValueError(f"need >= {C + 1} positions of hidden states, got {hidden.shape[1]}")
    if alignment == "predicting":
        return hidden[:, -C - 1:-1]
    if alignment == "token":
        return hidden[:, -C:]
    raise ValueError(f"hidden_alignment must be 'predicting' or 'token', got {alignment!r}")


@torch.no_grad()
def reference_last_layer(model: nn.Module, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
    """(B, S, d) `hidden_states[-1]` via output_hidden_states — for tests only."""
    out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
    return out.hidden_states[-1]


@torch.no_grad()
def reference_penultimate(model: nn.Module, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
    """(B, S, d) `hidden_states[-2]` via output_hidden_states — for tests only (keeps every layer)."""
    out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
    return out.hidden_states[-2]
