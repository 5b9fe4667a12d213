"""Partial fine-tuning: train only a causal LM's last N decoder layers (`model.trainable_layers`).

On a CPU the backward pass is two thirds of a training step; with the lower layers frozen autograd
stops at the first trainable layer, so the backward pass costs about N / L of a full one (the
forward pass and generation are unchanged). The embeddings, and the output head that shares or
mirrors them, stay frozen; the final norm trains with the top layer it normalises.
"""

from __future__ import annotations

from resrl.errors import InputError


def decoder_layers(model):
    """The decoder's list of layers and its final norm (Llama / Qwen / SmolLM2 layout:
    `model.get_decoder().layers` and `.norm`); InputError naming the model otherwise."""
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else getattr(model, "model", None)
    layers = getattr(decoder, "layers", None)
    norm = getattr(decoder, "norm", None)
    if layers is None or norm is None:
        raise InputError(f"config key 'model.trainable_layers': {type(model).__name__} has no decoder "
                          "`layers` and final `norm` to freeze below (Llama-style causal LMs do)")
    return layers, norm


def train_last_layers(model, n: int) -> tuple[int, int]:
    """Freeze every parameter of `model` except the last `n` decoder layers and the final norm.
    Returns (trainable, total) parameter counts."""
    layers, norm = decoder_layers(model)
    if not 1 <= n <= len(layers):
        raise InputError(f"config key 'model.trainable_layers' = {n}: the model has {len(layers)} decoder layers")
    model.requires_grad_(False)
    for module in [*layers[len(layers) - n:], norm]:
        module.requires_grad_(True)
    params = {id(p): p for p in model.parameters()}.values()  # tied weights once
    return sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params)


__all__ = ["decoder_layers", "train_last_layers"]
