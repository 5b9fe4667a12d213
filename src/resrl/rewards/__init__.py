"""Rewards: Math-Verify in an isolated process pool, exact match, and user functions by name.

Import the submodules directly (`resrl.rewards.math`, `resrl.rewards.exact`,
`resrl.rewards.registry`); this package imports nothing heavy.
"""
