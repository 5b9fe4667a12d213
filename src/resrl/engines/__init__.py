"""Training engines. `trl/` is the TRL engine (`ResRLTrainer`, a TRL 1.16 GRPOTrainer subclass, and
everything only it uses), `verl/` the veRL plugin. Engine-neutral here: `hidden.py` the
penultimate-layer hooks, `multiturn.py` multi-turn rollouts, `steps.py` step-level rollouts.
Import the submodules directly (`from resrl.engines.trl import ResRLTrainer`): this package
imports nothing heavy."""
