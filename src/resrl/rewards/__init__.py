"""Rewards the task families build on: the generic exact-match reward and the isolated process
pool verifiers run in. Rewards by name (the families' rewards, and user functions) are
`resrl.tasks.rewards`.

The families' own rewards live in their packages (`resrl.tasks.math.reward`,
`resrl.tasks.code.reward`, ...). Import the submodules directly; this package imports nothing.
"""
