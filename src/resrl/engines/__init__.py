"""Training engines. `engines/trl.py` holds `ResRLTrainer` (TRL 1.16 GRPOTrainer subclass);
`hidden.py` the penultimate-layer hook, `batches.py` group-aware batch plumbing and the
split-group gather, `rewards.py` the reward-function adapters. Import the submodules directly
(`from resrl.engines.trl import ResRLTrainer`): this package imports nothing heavy."""
