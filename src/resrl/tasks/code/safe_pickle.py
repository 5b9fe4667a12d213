"""Decode LiveCodeBench's encoded private tests without running anything.

The `code_generation_lite` releases store a problem's private tests as
base64(zlib(pickle(json_text))) (`lcb_runner/benchmarks/code_generation.py` decodes them with a
plain `pickle.loads`). A pickle is a program for a small stack machine whose opcodes can import
any callable and call it (GLOBAL / STACK_GLOBAL + REDUCE, INST, OBJ, NEWOBJ, BUILD, the copyreg
extension codes, persistent ids): unpickling a file a user downloaded is running code from it.
Here a payload is decoded in two independent steps, so that neither alone has to be right:

1. `pickletools.genops` lists every opcode without executing any; a payload with an opcode outside
   `ALLOWED_OPCODES` (strings, numbers, None / booleans, lists, tuples, dicts, the memo, framing) is
   refused with an error naming the row, the opcode and its byte offset;
2. only then `RestrictedUnpickler` loads it; its `find_class` and `persistent_load` refuse
   everything, so even an opcode missed by step 1 could not reach a callable.

Both, and the zlib step, are bounded before anything is allocated (`resrl.tasks.code.pickle_guard`:
streamed inflate, memo indices, the size every reference expands to, nesting depth), and a payload
is decoded in a child interpreter with an address-space limit (`DECODE_MEMORY_BYTES`), so that
whatever slips past the checks fails there, not in the trainer. Every refusal is a DataError that
names the file, the row and the key (the `where` of the caller).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from resrl.errors import DataError
from resrl.tasks.code.pickle_guard import ALLOWED_OPCODES, RestrictedUnpickler, check_pickle, load

# decompressed size limit of one encoded payload (LiveCodeBench's largest private test sets are tens
# of MB): a bomb is refused having cost at most this much
MAX_DECODED_BYTES = 192 << 20
# the decoding child's address space: the payload, the unpickled text and the child's own interpreter
DECODE_MEMORY_BYTES = 4 * MAX_DECODED_BYTES + (256 << 20)
_GUARD = Path(__file__).with_name("pickle_guard.py")
last_decode_peak_kb: int | None = None  # the last decoding child's peak resident memory (diagnostics, tests)


def check_opcodes(data: bytes, where: str, max_bytes: int = MAX_DECODED_BYTES) -> None:
    """DataError naming `where` and the opcode for anything `pickle_guard.check_pickle` refuses
    (nothing is executed)."""
    try:
        check_pickle(data, max_bytes)
    except ValueError as exc:
        raise DataError(f"{where}: {exc}") from None


def safe_loads(data: bytes, where: str):
    """The plain data (str, numbers, None, bool, list, tuple, dict) pickled in `data`; DataError
    naming `where` for anything else (see the module docstring)."""
    check_opcodes(data, where)
    try:
        return load(data)
    except ValueError as exc:
        raise DataError(f"{where}: {exc}") from None


def _decode_in_child(text: str, where: str, max_bytes: int, memory_bytes: int):
    global last_decode_peak_kb
    code = _GUARD.read_text(encoding="utf-8") + "\nmain()\n"
    try:
        proc = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(max_bytes), str(memory_bytes)],
                              input=text.encode("ascii", "replace"), capture_output=True, timeout=600,
                              env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    except subprocess.TimeoutExpired:
        raise DataError(f"{where}: decoding the encoded payload took over 600 s; refused") from None
    lines = proc.stderr.decode("utf-8", "replace").strip().splitlines()
    if lines and lines[-1].startswith("peak_kb="):
        last_decode_peak_kb = int(lines.pop()[8:])
    if proc.returncode != 0:
        why = lines[-1] if lines else f"the decoding process ended with status {proc.returncode}"
        if proc.returncode < 0 or "MemoryError" in why:
            why = f"decoding ran out of its {memory_bytes >> 20} MB ({why}); refused"
        raise DataError(f"{where}: {why}")
    out = proc.stdout
    if out[:1] == b"S":
        return out[1:].decode("utf-8", "surrogatepass")
    try:
        return json.loads(out[1:])
    except (ValueError, RecursionError):
        raise DataError(f"{where}: the decoded payload is nested too deeply; refused") from None


def decode_lcb_payload(text: str, where: str, max_bytes: int = MAX_DECODED_BYTES,
                       memory_bytes: int = DECODE_MEMORY_BYTES):
    """LiveCodeBench's private-test field: JSON text (the original release), or
    base64(zlib(pickle(JSON text))) (`code_generation_lite`), decoded in a bounded child. Returns the
    decoded JSON value; DataError naming `where` for anything refused."""
    from resrl.tasks.code.sandbox.code_tests import loads_json

    stripped = text.strip()
    if not stripped.startswith(("[", "{")):
        value = _decode_in_child(stripped, where, max_bytes, memory_bytes)
        if not isinstance(value, str):
            return value
        stripped = value
        kind = "the decoded payload is not JSON"
    else:
        kind = "not valid JSON"
    try:
        return loads_json(stripped)
    except json.JSONDecodeError as exc:
        raise DataError(f"{where}: {kind} ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise DataError(f"{where}: the JSON is nested too deeply; refused") from None
    except ValueError as exc:  # an int over LiveCodeBench's digit limit
        raise DataError(f"{where}: {exc}") from None


__all__ = ["ALLOWED_OPCODES", "MAX_DECODED_BYTES", "DECODE_MEMORY_BYTES", "RestrictedUnpickler", "check_opcodes",
           "safe_loads", "decode_lcb_payload"]
