"""The veRL plugin: ResRL and the NSR family inside veRL 0.9.

    algorithms.py  every algorithm of the core registry classified for veRL: reward-only ones as
                   estimators (psr, nsr, w_reinforce, passk, ...), resrl with its trainer mode,
                   veRL's own (grpo, drgrpo, dapo), the rest refused with the reason (nthr, flowrl, ...)
    losses.py      every policy loss of the core registry classified for veRL: veRL's own (vanilla,
                   cispo, sapo, clip_cov, kl_cov), the ones veRL lacks registered by the plugin (vespo),
                   FlowRL's refused with the reason
    estimators.py  registers them with veRL's `register_adv_est` / `register_policy_loss`; the
                   `verl.plugins` entry point of pyproject.toml imports it (needs veRL)
    layouts.py     veRL's engine layouts -> per-response penultimate states (packed rmpad with
                   cu_seqlens, right-padded), group-split detection, a group-preserving balance
    weights.py     a rank's groups accumulated over its micro-batches, ResRL weights computed once
                   per rank after the pass (resrl.core), returned as a per-token multiplier
    capture.py     the forward hook on the penultimate layer for the old-log-prob pass of veRL's
                   engine workers (one layer, never output_hidden_states)

Only `estimators.py` imports veRL; the rest needs torch and `resrl.core`/`resrl.engines.hidden`,
so it is tested in the main venv. Nothing here imports TRL, transformers or `resrl.train`: a
veRL venv (transformers < 5.11) has none of the project's TRL stack.
"""
