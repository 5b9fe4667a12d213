"""Generation paths stay on-policy (issue 42, resrl.models.rollout, resrl.models.generation_paths).

1. The log-probability each path records for a sampled token equals the training forward's
   log softmax(z / T) within float32 rounding — for hf, hf with a shared prefill, and the compiled
   path (static cache; torch.compile's "eager" backend here: inductor's CPU compile takes minutes)
   with and without the shared prefill; and through the trainer, whose training forward may start
   above the frozen layers (generation.reuse_frozen): `generation/logp_diff_max` is logged.
2. Temperature / top-k / top-p give the token distribution HF `generate` gives: the rank of every
   sampled token (at a decode step, not the prefill's) under the exact processed distribution of
   its own prefix, pooled over rows and compared by a chi-square test; transformers' continuous
   batching ("paged", TRL's use_transformers_continuous_batching) too, with fewer rows (slow on CPU).
3. Each test also shows it can fail: the planted variants the issue names — a log-prob shifted by one
   position, a dropped temperature — are computed on the same samples and must be rejected.
"""

from __future__ import annotations

import math

import pytest
import torch
from train_helpers import SMALL

from resrl.models.rollout import RolloutSettings, generate_rollouts, left_pad
from resrl.models.tiny import build_tiny_model

PATHS = [RolloutSettings("hf"), RolloutSettings("hf", shared_prefill=True),
         RolloutSettings("compiled", compile_backend="eager", prompt_bucket=16),
         RolloutSettings("compiled", shared_prefill=True, compile_backend="eager", prompt_bucket=16)]
IDS = ["hf", "hf+shared", "compiled", "compiled+shared"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The suite's small tiny model with sharpened logits (the final norm x 4: a random model's
    next-token distribution is otherwise near uniform, and temperature would hardly show)."""
    torch.set_num_threads(1)
    model, tok = build_tiny_model(tmp_path_factory.mktemp("rollout") / "m", SMALL)
    with torch.no_grad():
        model.model.norm.weight.mul_(4.0)
    model.eval()
    return model, tok


def _prompts(tok, n: int, group: int) -> list[list[int]]:
    prompts = [list(tok.apply_chat_template([{"role": "user", "content": "1+" * (i + 1) + "1="}],
                                            add_generation_prompt=True, tokenize=True, return_dict=False))
               for i in range(n)]  # different lengths: left padding in play
    return [p for p in prompts for _ in range(group)]


def _config(tok, **kw):
    from transformers import GenerationConfig

    settings = dict(max_new_tokens=10, do_sample=True, temperature=0.7, top_p=1.0, top_k=0, min_p=None,
                    repetition_penalty=1.0, pad_token_id=tok.pad_token_id, eos_token_id=[tok.eos_token_id],
                    disable_compile=True)
    settings.update(kw)
    return GenerationConfig(**settings)


def _layout(rows, completions, pad):
    """TRL's training batch: prompts left-padded, completions right-padded; (ids, mask, P)."""
    ids, pmask = left_pad(rows, pad)
    C = max(len(c) for c in completions)
    comp = torch.full((len(rows), C), pad)
    cmask = torch.zeros((len(rows), C), dtype=torch.long)
    for i, c in enumerate(completions):
        comp[i, :len(c)] = torch.tensor(c)
        cmask[i, :len(c)] = 1
    return torch.cat([ids, comp], 1), torch.cat([pmask, cmask], 1), ids.shape[1], cmask


def training_logprobs(model, rows, completions, pad, temperature: float):
    """The training forward's log softmax(z / T) at every completion token (B, C) and its mask."""
    ids, mask, P, cmask = _layout(rows, completions, pad)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits[:, P - 1:-1].float() / temperature
    return torch.log_softmax(logits, -1).gather(-1, ids[:, P:, None])[..., 0], cmask.bool()


def _recorded(out):
    C = max(len(c) for c in out.completion_ids)
    lp = torch.zeros(len(out.logprobs), C)
    for i, row in enumerate(out.logprobs):
        lp[i, :len(row)] = torch.tensor(row)
    return lp


# ---- 1. recorded log-probs = the training forward's ------------------------------------------------

@pytest.mark.parametrize("settings", PATHS, ids=IDS)
def test_recorded_logprobs_equal_the_training_forward(tiny, settings):
    model, tok = tiny
    rows = _prompts(tok, 3, 4)
    torch.manual_seed(0)
    out = generate_rollouts(model, rows, _config(tok), settings, pad_token_id=tok.pad_token_id,
                            eos_token_ids=[tok.eos_token_id])
    assert [len(c) for c in out.completion_ids] == [len(lp) for lp in out.logprobs]
    assert out.prefill_rows == (3 if settings.shared_prefill else 12)
    ref, mask = training_logprobs(model, rows, out.completion_ids, tok.pad_token_id, 0.7)
    got = _recorded(out)
    assert mask.sum() > 60
    assert (got - ref)[mask].abs().max() < 1e-4
    # the planted bugs the test must reject, on the same samples: shifted by one position, no temperature
    shifted = torch.roll(got, 1, dims=1)
    assert (shifted - ref)[mask].abs().max() > 1e-2
    untempered, _ = training_logprobs(model, rows, out.completion_ids, tok.pad_token_id, 1.0)
    assert (got - untempered)[mask].abs().max() > 1e-2


def test_paths_draw_the_same_tokens_as_hf_on_this_model(tiny):
    """Same seed, same sampler: the shared prefill and the static cache change no token here (on a
    model this small the float rounding of the prefill never tips a draw)."""
    model, tok = tiny
    rows = _prompts(tok, 3, 4)
    outs = []
    for settings in PATHS:
        torch.manual_seed(0)
        outs.append(generate_rollouts(model, rows, _config(tok), settings, pad_token_id=tok.pad_token_id,
                                      eos_token_ids=[tok.eos_token_id]).completion_ids)
    assert all(o == outs[0] for o in outs[1:])


# ---- 2. the token distribution --------------------------------------------------------------------

def reference_distribution(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """(B, V) the distribution the sampling settings define, written out independently of the code
    under test, in HF's order: softmax of z / T restricted to the top_k most likely tokens, then to
    the smallest set of most likely tokens holding at least top_p of the mass, renormalised."""
    p = torch.softmax(logits.double() / temperature, -1)
    if top_k:
        kth = p.topk(top_k, -1).values[:, -1:]
        p = torch.where(p >= kth, p, torch.zeros_like(p))
        p = p / p.sum(-1, keepdim=True)
    if top_p < 1.0:
        sorted_p, order = p.sort(-1, descending=True)
        before = sorted_p.cumsum(-1) - sorted_p  # mass of the more likely tokens
        keep = torch.zeros_like(p, dtype=torch.bool).scatter(-1, order, before < top_p)
        p = torch.where(keep, p, torch.zeros_like(p))
        p = p / p.sum(-1, keepdim=True)
    return p


def _processed_probs(model, rows, completions, pad, cfg, step: int):
    """(B, V) the exact distribution token `step` was drawn from, for each row: the settings'
    distribution (`reference_distribution`) at the row's own prefix (prompt + its first `step` tokens)."""
    prefixes = [r + c[:step] for r, c in zip(rows, completions)]
    ids, mask = left_pad(prefixes, pad)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits[:, -1].float()
    return reference_distribution(logits, cfg.temperature, cfg.top_k or 0, cfg.top_p if cfg.top_p is not None else 1.0)


def rank_chi2_pvalue(probs: torch.Tensor, tokens: torch.Tensor, bins: int = 6) -> float:
    """P-value that `tokens` (B,) were drawn from the rows' distributions `probs` (B, V): the rank
    of each drawn token in its row's sorted distribution, binned (ranks >= bins-1 pooled), against
    the expected counts (the sum over rows of each rank's probability); Pearson's chi-square
    (conservative for rows with different distributions)."""
    order = probs.argsort(-1, descending=True)
    sorted_p = probs.gather(-1, order)
    rank = (order == tokens[:, None]).float().argmax(-1)
    expected = torch.cat([sorted_p[:, :bins - 1].sum(0), sorted_p[:, bins - 1:].sum(0).sum()[None]])
    observed = torch.bincount(rank.clamp(max=bins - 1), minlength=bins).float()
    keep = expected > 5  # a bin too thin for the approximation is merged into the last kept one
    obs = torch.cat([observed[keep][:-1], (observed.sum() - observed[keep][:-1].sum())[None]])
    exp = torch.cat([expected[keep][:-1], (expected.sum() - expected[keep][:-1].sum())[None]])
    chi2 = float(((obs - exp) ** 2 / exp).sum())
    dof = max(1, obs.numel() - 1)
    return float(torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64),
                                         torch.tensor(chi2 / 2, dtype=torch.float64)))


SAMPLING = {"temperature": dict(temperature=0.5), "top_k": dict(temperature=1.0, top_k=4),
            "top_p": dict(temperature=0.8, top_p=0.6)}
STEP = 3  # the 4th token: drawn in a decode step (the compiled step, the shared prefill's continuation)


def _trls_paged_call(model, rows, cfg):
    """Transformers' continuous batching as TRL 1.16 calls it (use_transformers_continuous_batching:
    `generate_batch` with its GenerationConfig, grpo_trainer.py), under the hiding of the model's
    generation defaults the trainer puts around TRL's generation (resrl.engines.trl.trainer): TRL's
    code runs this path, resrl only selects it."""
    from transformers.generation import ContinuousBatchingConfig

    from resrl.models.generation import model_defaults_hidden

    with torch.no_grad(), model_defaults_hidden(model):
        outputs = model.generate_batch([list(r) for r in rows], generation_config=cfg, progress_bar=False,
                                       continuous_batching_config=ContinuousBatchingConfig(max_memory_percent=0.5))
    return [list(o.generated_tokens) for o in outputs.values()]


def _draw(model, tok, settings, cfg, rows):
    torch.manual_seed(1)
    if settings == "paged":
        return _trls_paged_call(model, rows, cfg)
    return generate_rollouts(model, rows, cfg, settings, pad_token_id=tok.pad_token_id, eos_token_ids=[]).completion_ids


@pytest.mark.parametrize("sampling", list(SAMPLING))
@pytest.mark.parametrize("settings", [*PATHS, "hf-generate"], ids=[*IDS, "hf-generate"])
def test_token_distribution_matches_the_processed_softmax(tiny, settings, sampling):
    model, tok = tiny
    rows = _prompts(tok, 4, 100)
    cfg = _config(tok, max_new_tokens=STEP + 1, eos_token_id=None, **SAMPLING[sampling])
    if settings == "hf-generate":  # HF generate itself, the reference sampler: the test accepts it
        torch.manual_seed(1)
        ids, mask = left_pad(rows, tok.pad_token_id)
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=mask, generation_config=cfg)
        completions = out[:, ids.shape[1]:].tolist()
    else:
        completions = _draw(model, tok, settings, cfg, rows)
    assert all(len(c) == STEP + 1 for c in completions)
    tokens = torch.tensor([c[STEP] for c in completions])
    probs = _processed_probs(model, rows, completions, tok.pad_token_id, cfg, STEP)
    assert rank_chi2_pvalue(probs, tokens) > 1e-3
    # planted: the sampler dropped the temperature / the truncation -> the same draws are rejected
    # against the distribution the config asks for, when drawn from the untruncated softmax at T = 1
    plain = _config(tok, max_new_tokens=STEP + 1, eos_token_id=None, temperature=1.0)
    wrong = _draw(model, tok, PATHS[0], plain, rows)
    wrong_tokens = torch.tensor([c[STEP] for c in wrong])
    wrong_probs = _processed_probs(model, rows, wrong, tok.pad_token_id, cfg, STEP)
    assert rank_chi2_pvalue(wrong_probs, wrong_tokens) < 1e-6


@pytest.mark.slow  # transformers' continuous batching: ~10 tokens/s on one CPU core
def test_paged_token_distribution(tiny):
    model, tok = tiny
    rows = _prompts(tok, 2, 90)
    cfg = _config(tok, max_new_tokens=STEP + 1, eos_token_id=None, **SAMPLING["top_k"])
    completions = _draw(model, tok, "paged", cfg, rows)
    assert all(len(c) == STEP + 1 for c in completions)
    tokens = torch.tensor([c[STEP] for c in completions])
    assert rank_chi2_pvalue(_processed_probs(model, rows, completions, tok.pad_token_id, cfg, STEP), tokens) > 1e-3


def test_rank_chi2_rejects_a_wrong_distribution_and_accepts_the_right_one():
    g = torch.Generator().manual_seed(0)
    probs = torch.softmax(torch.randn(2000, 30, generator=g) * 2, -1)
    right = torch.multinomial(probs, 1, generator=g)[:, 0]
    wrong = torch.multinomial(torch.softmax(torch.log(probs) / 2, -1), 1, generator=g)[:, 0]  # T = 2
    assert rank_chi2_pvalue(probs, right) > 1e-3
    assert rank_chi2_pvalue(probs, wrong) < 1e-6
    assert math.isfinite(rank_chi2_pvalue(probs, right))


def test_trls_static_cache_with_the_shared_prefill_and_the_frozen_layers_states(tiny):
    """hf path with TRL's cache_implementation="static": the shared prefill goes into a static cache,
    the log-probs stay exact, and the frozen layers' states (trunk_depth) match a full forward's
    at every prompt and completion position, the last token's included."""
    model, tok = tiny
    rows = _prompts(tok, 3, 4)
    cfg = _config(tok, cache_implementation="static")
    torch.manual_seed(0)
    out = generate_rollouts(model, rows, cfg, RolloutSettings("hf", shared_prefill=True),
                            pad_token_id=tok.pad_token_id, eos_token_ids=[tok.eos_token_id], trunk_depth=1)
    assert out.prefill_rows == 3
    ref, mask = training_logprobs(model, rows, out.completion_ids, tok.pad_token_id, 0.7)
    assert (_recorded(out) - ref)[mask].abs().max() < 1e-4
    ids, attn, P, _ = _layout(rows, out.completion_ids, tok.pad_token_id)
    assert P == out.prompt_width
    with torch.no_grad():
        full = model(input_ids=ids, attention_mask=attn, output_hidden_states=True).hidden_states[1]
    states = out.trunk_states[:, :ids.shape[1]]
    assert (states - full)[attn.bool()].abs().max() < 1e-5


def test_the_compiled_decode_step_keeps_one_shape_across_prompt_buckets(tiny):
    """The compiled path's static cache only grows (Rollouts.cache_length passed back, as the trainer
    does): batches whose prompts fall in a shorter bucket reuse the one compiled decode step instead
    of compiling another (on an H200 each recompile cost 30-39 s of a 3-step run). Counted with
    dynamo's own graph counter; the same calls without passing the length back compile a second
    graph, which shows the count can fail."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    model, tok = tiny
    cfg = _config(tok, max_new_tokens=4)
    short_rows = _prompts(tok, 1, 2)  # one prompt, 2 rows
    long_rows = [p + [p[-1]] * 10 for p in short_rows]  # 10 tokens longer: the next 16-token bucket
    short_bucket, long_bucket = (-(-len(rows[0]) // 16) * 16 for rows in (short_rows, long_rows))
    assert long_bucket > short_bucket
    graphs = {}
    for pass_back in (True, False):
        torch._dynamo.reset()
        counters.clear()
        length = 0
        for rows in (long_rows, short_rows, long_rows):
            s = RolloutSettings("compiled", compile_backend="eager", prompt_bucket=16,
                                cache_length=length if pass_back else 0)
            out = generate_rollouts(model, rows, cfg, s, pad_token_id=tok.pad_token_id, eos_token_ids=[-1])
            assert all(len(c) == 4 for c in out.completion_ids)
            length = out.cache_length
        graphs[pass_back] = counters["stats"]["unique_graphs"]
        assert length == long_bucket + 4  # the last call's cache: the long bucket + 4 new tokens
    torch._dynamo.reset()
    assert graphs == {True: 1, False: 2}, graphs
