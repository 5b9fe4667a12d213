"""Deprecated: moved to `resrl.tasks.tools.data` in resrl 0.2 (this name goes away in 0.3).

`python -m resrl.data.tools N OUT.jsonl [SEED]` still writes the synthetic tool rows (now
`python -m resrl.tasks.tools.data ...`)."""

from resrl._deprecation import shim

if __name__ == "__main__":
    import runpy
    import warnings

    warnings.warn("python -m resrl.data.tools moved to python -m resrl.tasks.tools.data in resrl 0.2",
                  DeprecationWarning, stacklevel=1)
    runpy.run_module("resrl.tasks.tools.data", run_name="__main__", alter_sys=True)
else:
    shim(__name__, "resrl.tasks.tools.data")
