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

The zlib step is bounded (`MAX_DECODED_BYTES`, a zip bomb is refused before it fills memory).
"""

from __future__ import annotations

import base64
import binascii
import io
import pickle
import pickletools
import zlib

from resrl.errors import DataError

# what a pickled JSON text (or plain data) needs; everything that imports, calls or builds objects is absent
ALLOWED_OPCODES = frozenset({
    "PROTO", "FRAME", "STOP", "MARK", "POP", "POP_MARK", "DUP",
    "PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE", "GET", "BINGET", "LONG_BINGET",
    "NONE", "NEWTRUE", "NEWFALSE",
    "INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4", "FLOAT", "BINFLOAT",
    "STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8",
    "EMPTY_LIST", "APPEND", "APPENDS", "LIST",
    "EMPTY_TUPLE", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3",
    "EMPTY_DICT", "DICT", "SETITEM", "SETITEMS",
})

# decompressed size limit of one encoded payload (LiveCodeBench's largest private test sets are tens of MB)
MAX_DECODED_BYTES = 1 << 30


class RestrictedUnpickler(pickle.Unpickler):
    """An Unpickler that resolves no global and no persistent id: plain data only."""

    def find_class(self, module, name):  # GLOBAL, STACK_GLOBAL, INST, the extension registry
        raise pickle.UnpicklingError(f"refused to load the global {module}.{name}")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("refused a persistent id")


def check_opcodes(data: bytes, where: str) -> None:
    """DataError naming the first opcode of `data` outside ALLOWED_OPCODES (none is executed)."""
    try:
        for op, _, pos in pickletools.genops(data):
            if op.name not in ALLOWED_OPCODES:
                raise DataError(f"{where}: the pickled payload uses opcode {op.name} at byte {pos}, which imports or "
                                f"calls code; refused (only strings, numbers, lists and dicts are accepted)")
    except DataError:
        raise
    except Exception as exc:  # noqa: BLE001 - truncated or malformed opcode stream
        raise DataError(f"{where}: not a valid pickle ({exc})") from None


def safe_loads(data: bytes, where: str):
    """The plain data (str, numbers, None, bool, list, tuple, dict) pickled in `data`; DataError
    naming `where` for anything else (see the module docstring)."""
    check_opcodes(data, where)
    try:
        return RestrictedUnpickler(io.BytesIO(data)).load()
    except Exception as exc:  # noqa: BLE001 - UnpicklingError, EOFError, ValueError, MemoryError...
        raise DataError(f"{where}: the pickled payload cannot be decoded as plain data ({exc})") from None


def _inflate(raw: bytes, where: str, max_bytes: int) -> bytes:
    d = zlib.decompressobj()
    try:
        out = d.decompress(raw, max_bytes + 1)
        if len(out) <= max_bytes and not d.eof:
            out += d.flush()
    except zlib.error as exc:
        raise DataError(f"{where}: not zlib-compressed data ({exc})") from None
    if len(out) > max_bytes:
        raise DataError(f"{where}: the encoded payload decompresses to more than {max_bytes} bytes; refused")
    return out


def decode_lcb_payload(text: str, where: str, max_bytes: int = MAX_DECODED_BYTES):
    """LiveCodeBench's private-test field: JSON text (the original release), or
    base64(zlib(pickle(JSON text))) (`code_generation_lite`). Returns the decoded JSON value."""
    import json

    stripped = text.strip()
    if stripped.startswith(("[", "{")):
        try:
            return json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise DataError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    try:
        raw = base64.b64decode(stripped, validate=True)
    except (binascii.Error, ValueError):
        raise DataError(f"{where}: neither JSON nor base64 (LiveCodeBench's encoded private tests)") from None
    value = safe_loads(_inflate(raw, where, max_bytes), where)
    if isinstance(value, (bytes, bytearray)):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise DataError(f"{where}: the decoded payload is not JSON ({exc.msg} at column {exc.colno})") from None
    return value


__all__ = ["ALLOWED_OPCODES", "MAX_DECODED_BYTES", "RestrictedUnpickler", "check_opcodes", "safe_loads",
           "decode_lcb_payload"]
