"""Test-suite settings.

One torch thread: the suite's tensors are small, so threads buy nothing, and on a 2-core machine
that also runs reward worker processes (or other jobs) OpenMP threads waiting at barriers make
some steps 10x slower. Results do not depend on the thread count beyond float rounding.
"""

import torch

torch.set_num_threads(1)


# ---- ALFWorld engine (optional extra 'agents') ----------------------------------------------------
import os  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def alfworld_engine():
    """Skip (or, with RESRL_AGENT_TESTS=1, fail) when the extra 'agents' is not installed."""
    from resrl.tasks.alfworld.engine import EXTRA_HINT, engine_available

    if not engine_available():
        if os.environ.get("RESRL_AGENT_TESTS") == "1":
            pytest.fail(f"RESRL_AGENT_TESTS=1 but {EXTRA_HINT}")
        pytest.skip(f"ALFWorld engine not installed ({EXTRA_HINT}); RESRL_AGENT_TESTS=1 makes this a failure")


@pytest.fixture(scope="session")
def alfworld_synth(alfworld_engine, tmp_path_factory):
    """A small alfworld-synth set generated once per session: 6 train games (one per task type in
    ALFWorld's proportions), 1 valid_seen, 1 valid_unseen (seed 0). Returns its directory."""
    from resrl.tasks.alfworld.generator import generate

    out = tmp_path_factory.mktemp("alfworld-synth")
    generate(out, {"train": 6, "valid_seen": 1, "valid_unseen": 1}, seed=0, progress=None)
    return out
