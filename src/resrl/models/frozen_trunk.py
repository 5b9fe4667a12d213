"""Frozen bottom layers computed once per token: generation's outputs of the frozen trunk, reused by
the training forward.

With `model.trainable_layers: N` (resrl.models.freeze) the embeddings and the bottom L - N decoder
layers never change. Generation runs them over every prompt and completion token; the training
forward would run them again over the same tokens with the same weights. Here generation records
the output of the last frozen layer at every position (`TrunkRecorder`, one forward hook), and the
training forward starts above it (`above_trunk`): the decoder runs only its top N layers on the
recorded states. Mathematically the same forward; numerically the states of a batched decode and of
a full-sequence forward differ by float rounding (float32: ~1e-6), the tolerance the on-policy test
(tests/test_rollout.py) holds the log-probabilities to.

    depth = frozen_depth(model)                          # L - N, or 0 when nothing below trains is frozen
    with TrunkRecorder(model, depth) as rec:             # around generate
        ...
    rec.chunks                                           # the layer's outputs, one (b, s, d) per forward call
    with above_trunk(model, depth, states, input_ids):   # around the training forward of these rows
        model(input_ids=input_ids, attention_mask=...)   # runs layers depth..L-1 on `states`

Positions: the states are aligned with `input_ids` (B, T) position for position, left padding
included (a padding position's state may be anything finite: it is masked out as a key, and a
query at a padding position feeds nothing that is scored). Rotary position encodings depend on
relative positions only, so a trunk computed with padding-aware positions (`generate`) and a top
computed with the forward's own positions agree. Models with active dropout in the trunk are
refused (`frozen_depth` returns 0): a training forward would draw different noise.
"""

from __future__ import annotations

import contextlib

import torch
from torch import Tensor, nn

from resrl.models.freeze import decoder_layers


def _dropout_active(module: nn.Module) -> bool:
    if any(isinstance(m, nn.Dropout) and m.p > 0 for m in module.modules()):
        return True
    return float(getattr(getattr(module, "self_attn", None), "attention_dropout", 0.0) or 0.0) > 0


def frozen_depth(model) -> int:
    """How many bottom decoder layers are frozen together with the input embeddings (0: none, or
    every layer — then nothing trains above a trunk). PEFT adapters inside a layer make it trainable."""
    try:
        layers, _ = decoder_layers(model)
    except Exception:  # noqa: BLE001 - not a Llama-style decoder: no trunk to reuse
        return 0
    embeddings = model.get_input_embeddings()
    if embeddings is None or any(p.requires_grad for p in embeddings.parameters()):
        return 0
    depth = 0
    for layer in layers:
        if any(p.requires_grad for p in layer.parameters()) or _dropout_active(layer):
            break
        depth += 1
    return depth if depth < len(layers) else 0


class TrunkRecorder:
    """While open, records the output of decoder layer `depth - 1` of every forward call (detached):
    `chunks` holds one (b, s, d) tensor per call, in call order."""

    def __init__(self, model, depth: int) -> None:
        if depth < 1:
            raise ValueError(f"TrunkRecorder: depth must be >= 1, got {depth}")
        layers, _ = decoder_layers(model)
        self.layer = layers[depth - 1]
        self.chunks: list[Tensor] = []
        self._handle = None

    def _hook(self, module, args, output) -> None:
        out = output[0] if isinstance(output, (tuple, list)) else output
        self.chunks.append(out.detach())

    def __enter__(self) -> "TrunkRecorder":
        self._handle = self.layer.register_forward_hook(self._hook)
        return self

    def __exit__(self, *exc) -> None:
        self._handle.remove()
        self._handle = None


class _Rows:
    """Hands out consecutive row blocks of `states` to successive decoder forwards, checking that
    each forward's input ids are the recorded rows' ids (a misaligned reuse fails loudly)."""

    def __init__(self, states: Tensor, input_ids: Tensor) -> None:
        self.states, self.input_ids, self.cursor = states, input_ids, 0
        self.current: Tensor | None = None  # the rows of the forward under way

    def take(self, input_ids: Tensor) -> Tensor:
        b = input_ids.shape[0]
        rows = slice(self.cursor, self.cursor + b)
        expected = self.input_ids[rows]
        if expected.shape != input_ids.shape or not bool((expected == input_ids).all()):
            raise RuntimeError("above_trunk: the forward's input ids are not the rows whose frozen-layer states "
                               f"were recorded (rows {rows.start}:{rows.stop}, shapes {tuple(input_ids.shape)} vs "
                               f"{tuple(expected.shape)})")
        self.cursor += b
        return self.states[rows]


class _Skipped(nn.Module):
    """Stands in for a frozen layer below the recorded one: its output is never used (the recorded
    states replace the next layer's), so it passes its input through without computing anything."""

    def forward(self, hidden_states, *args, **kwargs):
        return hidden_states


class _Recorded(nn.Module):
    """Stands in for the last frozen layer (index depth - 1): returns the recorded output of that
    layer for the rows of the current forward.

    Under reentrant activation checkpointing a layer's parameters get gradients only if one of its
    positional inputs requires grad (torch.utils.checkpoint's CheckpointFunction); the recorded
    states are data, so they are returned as a leaf that requires grad whenever the next layer
    checkpoints reentrantly (without this every trainable layer got a zero gradient and only the
    final norm trained: issue 51)."""

    def __init__(self, rows: "_Rows", above: nn.Module) -> None:
        super().__init__()
        self.rows = rows
        self.above = [above]  # the first layer that runs (a list: not registered as a submodule)

    def forward(self, hidden_states, *args, **kwargs):
        states = self.rows.current.to(dtype=hidden_states.dtype, device=hidden_states.device)
        if torch.is_grad_enabled() and reentrant_checkpointing(self.above[0]):
            states = states.detach().requires_grad_(True)
        return states


def reentrant_checkpointing(layer: nn.Module) -> bool:
    """Does `layer` (a transformers GradientCheckpointingLayer) checkpoint reentrantly in this
    forward? Unknown keyword settings count as reentrant (torch's historical default)."""
    if not (getattr(layer, "gradient_checkpointing", False) and layer.training):
        return False
    func = getattr(layer, "_gradient_checkpointing_func", None)
    keywords = getattr(func, "keywords", None) or {}
    return keywords.get("use_reentrant", True) is not False


@contextlib.contextmanager
def above_trunk(model, depth: int, states: Tensor, input_ids: Tensor):
    """Within, forwards of `model` over `input_ids` (B, T) — in one call or in consecutive row
    chunks, as TRL's chunked forward makes them — run decoder layers depth..L-1 only, on `states`
    (B, T, d): the recorded output of layer depth - 1 at every position.

    The layer list keeps its length: layers below depth - 1 are replaced by pass-throughs, layer
    depth - 1 by one that returns the recorded states, and the layers that run keep their own
    index, hence their own `config.layer_types[i]` mask (sliding window or full) and, in Gemma 3
    and Olmo 3, their own RoPE table. (The list used to be sliced to its top layers, so that the
    i-th remaining layer read layer_types[i] of the *bottom* layers: on Qwen3 with a sliding window
    the gradient was off by a relative 0.78, on Gemma 3 by 0.05 — issue 51.)"""
    if states.shape[:2] != input_ids.shape:
        raise ValueError(f"above_trunk: states {tuple(states.shape)} do not match input ids {tuple(input_ids.shape)}")
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else model.model
    layers, _ = decoder_layers(model)
    if not 1 <= depth < len(layers):
        raise ValueError(f"above_trunk: depth {depth} for a decoder of {len(layers)} layers")
    rows = _Rows(states, input_ids)

    def pre_hook(module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is None:
            raise RuntimeError("above_trunk: the decoder was called without input_ids")
        rows.current = rows.take(ids)
        # the embeddings are frozen and their output unused: the recorded states stand in for them (the
        # decoder reads only their shape, dtype and device before layer depth - 1 replaces them)
        kwargs["inputs_embeds"] = rows.current.to(module.get_input_embeddings().weight.dtype)
        kwargs["input_ids"] = None
        return (), kwargs

    handle = decoder.register_forward_pre_hook(pre_hook, with_kwargs=True)
    decoder.layers = nn.ModuleList([*(_Skipped() for _ in range(depth - 1)), _Recorded(rows, layers[depth]),
                                    *list(layers)[depth:]])
    try:
        yield rows
    finally:
        decoder.layers = layers
        handle.remove()


__all__ = ["frozen_depth", "TrunkRecorder", "above_trunk", "reentrant_checkpointing"]
