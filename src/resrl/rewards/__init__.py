"""Rewards: the reward registry (`resrl.rewards.registry`: the task families' rewards by name, and
user functions), the generic exact-match reward and the isolated process pool verifiers run in.

The families' own rewards live in their packages (`resrl.tasks.math.reward`,
`resrl.tasks.code.reward`, ...). Import the submodules directly; this package imports nothing.
"""
