"""Load bfcl-eval's own AST checker without importing its model configs (which need vendor SDKs).

`bfcl_eval.eval_checker.ast_eval.ast_checker` imports `bfcl_eval.constants.model_config` only for
`MODEL_CONFIG_MAPPING[model].underscore_to_dot`; a stand-in module answering False for every model
is put in `sys.modules` first, so the checker's code itself runs unchanged. Test helper only.
"""

from __future__ import annotations

import sys
import types


def load_reference_checker():
    """(ast_checker function, Language enum) from the installed bfcl-eval; ImportError if absent."""
    if "bfcl_eval.constants.model_config" not in sys.modules:
        import bfcl_eval.constants  # noqa: F401  (light: enums, type mappings)

        class _Config:
            underscore_to_dot = False

        class _Mapping(dict):
            def __missing__(self, key):
                return _Config()

        stub = types.ModuleType("bfcl_eval.constants.model_config")
        stub.MODEL_CONFIG_MAPPING = _Mapping()
        sys.modules["bfcl_eval.constants.model_config"] = stub
    from bfcl_eval.constants.enums import Language
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker

    return ast_checker, Language


def reference_match(category: str, functions: list, calls: list[dict], possible_answer: list) -> bool:
    """bfcl-eval's verdict for our parsed calls ({"name", "arguments"} -> BFCL's {name: args})."""
    ast_checker, Language = load_reference_checker()
    model_output = [{c["name"]: dict(c["arguments"])} for c in calls]
    result = ast_checker(functions, model_output, possible_answer, Language.PYTHON, category, "stub_model")
    return bool(result["valid"])
