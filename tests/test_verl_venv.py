"""Runs tests/verl_venv/ inside the veRL venv (.cache/verl-venv, built and cached by
scripts/verl-venv.sh; veRL 0.9.1 cannot share the main venv: transformers < 5.11).

CI builds the venv (.ci/run) and sets RESRL_VERL_TESTS=1, which makes a missing venv a failure.
Elsewhere the test is skipped, with the command that enables it, when the venv was not built."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("VERL_VENV", ROOT / ".cache" / "verl-venv"))
PY = VENV / "bin" / "python"


@pytest.mark.slow
def test_verl_plugin_in_its_own_venv():
    if not PY.exists():
        if os.environ.get("RESRL_VERL_TESTS") == "1":
            pytest.fail(f"RESRL_VERL_TESTS=1 but {PY} does not exist: run `bash scripts/verl-venv.sh`")
        pytest.skip("veRL venv not built: `bash scripts/verl-venv.sh` (about 2-3 min, PyPI), then rerun")
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}{os.pathsep}{ROOT}", OMP_NUM_THREADS="1")
    env.pop("VERL_USE_EXTERNAL_PLUGINS", None)
    proc = subprocess.run([str(PY), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/verl_venv"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    sys.stdout.write(proc.stdout[-4000:])
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert " passed" in proc.stdout and "skipped" not in proc.stdout.splitlines()[-1]
