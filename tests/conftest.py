"""Test-suite settings.

One torch thread: the suite's tensors are small, so threads buy nothing, and on a 2-core machine
that also runs reward worker processes (or other jobs) OpenMP threads waiting at barriers make
some steps 10x slower. Results do not depend on the thread count beyond float rounding.
"""

import torch

torch.set_num_threads(1)
