"""`resrl diagnose`: does ResRL's residual proxy track real gradient interference on a given model?

Lemma 1 (head gradients factorise), Theorem 1 (the residual bounds the representation term) on every
(negative, positive) token pair, the rank correlation of ResRL's residual with the true head-gradient
interference, and lazy likelihood displacement after one step per algorithm (spec §6).
"""
