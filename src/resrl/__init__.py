"""resrl: ResRL and RLVR baselines for LLMs.

Data flow of one RL step, module by module:
rollout (engines/) -> reward (rewards/) -> advantage (core/advantages.py)
-> token weights (core/residual.py) -> loss (core/loss.py) -> eval (eval/).
"""

__version__ = "0.2.0"
