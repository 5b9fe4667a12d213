"""The capture against veRL 0.9.1's own engine code (CPU, no FSDP: the engine's input/output
helpers are called on a stand-in `self`): `FSDPEngineWithLMHead.prepare_model_inputs` builds the
real remove-padding (packed (1, nnz), position ids restarting per row) and padded inputs from a
veRL micro-batch (jagged `input_ids`/`prompts`/`responses`), the tiny Qwen3 runs them with the hook,
and the response states equal (a) veRL's own response slicing `no_padding_2_padding` of the
packed states and (b) each row's `hidden_states[-2]` run alone."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

os.environ.setdefault("VERL_USE_EXTERNAL_PLUGINS", "resrl")
pytest.importorskip("verl", reason="veRL is installed only in .cache/verl-venv (scripts/verl-venv.sh)")

import torch  # noqa: E402
from verl.utils import tensordict_utils as tu  # noqa: E402
from verl.utils.ulysses import ulysses_pad  # noqa: E402
from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead  # noqa: E402
from verl.workers.utils.padding import no_padding_2_padding  # noqa: E402

from resrl.core import ResRLConfig, grpo_advantages, resrl_token_advantages  # noqa: E402
from resrl.engines.hidden import reference_penultimate  # noqa: E402
from resrl.engines.verl.capture import OldLogProbCapture  # noqa: E402
from resrl.engines.verl.layouts import pad_responses, response_states_from_packed  # noqa: E402
from resrl.engines.verl.weights import apply_multiplier  # noqa: E402
from resrl.models.tiny import TinyModelConfig, build_tiny_model  # noqa: E402


@pytest.fixture(scope="module")
def model():
    m, _ = build_tiny_model(config=TinyModelConfig(hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
                                                   num_key_value_heads=1, head_dim=16, intermediate_size=64))
    return m.eval()


def micro_batch(rows, use_remove_padding):
    """A veRL engine micro-batch as the worker builds it (jagged tensors, no padding)."""
    nested = lambda xs: torch.nested.as_nested_tensor(xs, layout=torch.jagged)  # noqa: E731
    seqs = [torch.cat([p, r]) for p, r in rows]
    return tu.get_tensordict(
        tensor_dict={"input_ids": nested(seqs), "position_ids": nested([torch.arange(len(s)) for s in seqs]),
                     "prompts": nested([p for p, _ in rows]), "responses": nested([r for _, r in rows])},
        non_tensor_dict={"use_remove_padding": use_remove_padding, "temperature": 1.0, "pad_token_id": 0})


ENGINE = SimpleNamespace(pad_to_length=False, use_ulysses_sp=False, ulysses_sequence_parallel_size=1,
                         pass_packed_cu_seqlens=False, _get_packed_pad_size=lambda n: 0)


def make_rows(seed, n=8):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randint(5, 60, (int(torch.randint(1, 5, (1,), generator=g)),), generator=g),
             torch.randint(5, 60, (int(torch.randint(2, 7, (1,), generator=g)),), generator=g)) for _ in range(n)]


def per_row_reference(model, rows):
    out = []
    for p, r in rows:
        ids = torch.cat([p, r])[None]
        h = reference_penultimate(model, ids, torch.ones_like(ids))[0]
        out.append(h[len(p) - 1:len(p) - 1 + len(r)])
    return out


@pytest.mark.parametrize("use_remove_padding", [True, False])
def test_capture_through_verl_prepare_model_inputs(model, use_remove_padding):
    rows = make_rows(0)
    uids = [i // 4 for i in range(8)]
    rewards = torch.tensor([1.0, 0, 0, 1, 0, 0, 1, 1])
    cfg = ResRLConfig(rank=4)
    cap = OldLogProbCapture(model, cfg)
    for sl in (slice(0, 5), slice(5, 8)):                           # group 1 split over two micro-batches
        mb = micro_batch(rows[sl], use_remove_padding)
        inputs, _ = FSDPEngineWithLMHead.prepare_model_inputs(ENGINE, mb)
        if use_remove_padding:
            assert inputs["input_ids"].shape[0] == 1 and inputs["attention_mask"] is None   # packed (1, nnz)
        pl, rl = mb["prompts"].offsets().diff(), mb["responses"].offsets().diff()
        with torch.no_grad(), cap.micro_batch(row_ids=range(sl.start, sl.stop), prompt_lens=pl, response_lens=rl,
                                               rewards=rewards[sl], uids=uids[sl],
                                               cu_seqlens=mb["input_ids"].offsets() if use_remove_padding else None):
            model(**inputs, use_cache=False)
    out = cap.finish(group_size=4)
    ref = per_row_reference(model, rows)
    hidden, mask = pad_responses(ref)
    adv = grpo_advantages(rewards, torch.tensor(uids))
    want, _ = resrl_token_advantages(hidden, mask, adv, torch.tensor(uids), cfg)
    torch.testing.assert_close(apply_multiplier(adv, out.multiplier, out.positive) * mask, want, rtol=0, atol=1e-5)


def test_packed_slicing_equals_verl_no_padding_2_padding_and_ulysses_tail_pad(model):
    """Our cut of the packed states is veRL's own log-prob slicing (`no_padding_2_padding`); with
    veRL's Ulysses pad (sp = 4) appended at the tail, stripping it gives the same rows."""
    rows = make_rows(1, n=5)
    mb = micro_batch(rows, True)
    inputs, _ = FSDPEngineWithLMHead.prepare_model_inputs(ENGINE, mb)
    ids, pos, pad = ulysses_pad(inputs["input_ids"], inputs["position_ids"], sp_size=4)
    if pad == 0:  # make sure the tail pad is exercised
        ids, pos, pad = ulysses_pad(inputs["input_ids"], inputs["position_ids"], sp_size=7)
    assert pad > 0
    hooked = {}
    layer = model.model.layers[-2]
    handle = layer.register_forward_hook(lambda m, a, o: hooked.setdefault("h", (o[0] if isinstance(o, tuple) else o)))
    with torch.no_grad():
        model(input_ids=ids, position_ids=pos, use_cache=False)
    handle.remove()
    packed = hooked["h"][0]                                              # (nnz + pad, d), the gathered shards
    pl, rl = mb["prompts"].offsets().diff(), mb["responses"].offsets().diff()
    ours = response_states_from_packed(packed, mb["input_ids"].offsets(), pl, rl, pad_size=pad)
    theirs = no_padding_2_padding(packed[:packed.shape[0] - pad], mb)   # veRL: (B, max_resp, d)
    for i, o in enumerate(ours):
        assert torch.equal(o, theirs[i, :len(o)])
    for o, ref in zip(ours, per_row_reference(model, rows)):
        torch.testing.assert_close(o, ref, rtol=0, atol=1e-5)
