"""Decode one LiveCodeBench private-tests payload, bounded before anything is allocated (standalone:
stdlib only; `resrl.tasks.code.safe_pickle` runs it in a child interpreter with an address-space limit).

base64(zlib(pickle(JSON text))), in three steps, each refusing with a ValueError whose text says why:

1. `inflate`: zlib, streamed in 1 MiB pieces; past `max_bytes` of output it stops (a 2 GiB bomb costs
   `max_bytes`, not 2 GiB);
2. `check_pickle`: walks the opcodes (`pickletools.genops`, nothing executed) and refuses
   - any opcode outside ALLOWED_OPCODES (imports, calls, object building: what runs code),
   - a memo index that skips ahead (the C unpickler sizes its memo array to the largest index: a
     LONG_BINPUT of 2**26 in a 96-character field allocates 1 GB),
   - a value that EXPANDS past `max_bytes`: the walk keeps the size every object would have written out
     (a string its length, a container the sum of its items, a memo reference the size of what it
     names), so that aliasing (a list holding the same list twice, 30 levels deep) is refused before
     the unpickler builds it or anyone serialises it,
   - nesting deeper than MAX_DEPTH (JSON text of a test set is a few levels deep);
3. `load`: a restricted Unpickler (no global, no persistent id) builds the value.

`main()` is the child's entry point: base64 text on stdin, the value on stdout ("S" + UTF-8 text for a
string, else "J" + JSON), a refusal as one line on stderr and exit status 3; the last line of stderr
also carries the child's peak resident memory (`peak_kb=`).
"""

import base64
import binascii
import io
import json
import pickle
import pickletools
import sys
import zlib

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
MAX_DEPTH = 1000
_PUT = {"PUT", "BINPUT", "LONG_BINPUT"}
_GET = {"GET", "BINGET", "LONG_BINGET"}
_SCALAR = {"NONE": 4, "NEWTRUE": 4, "NEWFALSE": 5, "BININT": 11, "BININT1": 3, "BININT2": 5, "INT": 11,
           "FLOAT": 24, "BINFLOAT": 24}


class Refused(ValueError):
    """A payload refused by `check_pickle` (anything else it raises means a malformed pickle)."""


class _Box:
    """A container on the walk's stack: the size it would write out and its nesting depth (mutable:
    APPEND grows the list every memo reference to it names)."""

    __slots__ = ("size", "depth")

    def __init__(self, size=2, depth=1):
        self.size, self.depth = size, depth


_MARK = object()


def _size(x):
    return x.size if isinstance(x, _Box) else x


def _depth(x):
    return x.depth if isinstance(x, _Box) else 0


def inflate(raw, max_bytes):
    """zlib-decompressed `raw`, streamed; ValueError past `max_bytes`."""
    d = zlib.decompressobj()
    parts, total = [], 0  # pieces, joined once at the end: no reallocation doubles the peak
    data = raw
    try:
        while True:
            piece = d.decompress(data, 1 << 20)
            parts.append(piece)
            total += len(piece)
            if total > max_bytes:
                raise ValueError(f"the encoded payload decompresses to more than {max_bytes} bytes; refused")
            data = d.unconsumed_tail
            if d.eof or not data:
                break
        if not d.eof:
            piece = d.flush()
            parts.append(piece)
            total += len(piece)
    except zlib.error as exc:
        raise ValueError(f"not zlib-compressed data ({exc})") from None
    if total > max_bytes:
        raise ValueError(f"the encoded payload decompresses to more than {max_bytes} bytes; refused")
    return b"".join(parts)


def check_pickle(data, max_bytes):
    """ValueError naming the opcode and its offset for anything of the module docstring's step 2."""
    stack, marks, memo = [], [], {}
    try:
        ops = pickletools.genops(data)
        for op, arg, pos in ops:
            name = op.name
            if name not in ALLOWED_OPCODES:
                raise Refused(f"the pickled payload uses opcode {name} at byte {pos}, which imports or calls code; "
                                 f"refused (only strings, numbers, lists and dicts are accepted)")
            if name in ("PROTO", "FRAME", "STOP"):
                continue
            if name == "MARK":
                marks.append(len(stack))
                stack.append(_MARK)
            elif name == "POP":
                stack.pop()
            elif name == "POP_MARK":
                del stack[marks.pop():]
            elif name == "DUP":
                stack.append(stack[-1])
            elif name in _PUT or name == "MEMOIZE":
                index = len(memo) if name == "MEMOIZE" else arg
                if not isinstance(index, int) or index < 0 or index > len(memo):
                    raise Refused(f"the pickled payload stores memo index {index} at byte {pos} with {len(memo)} "
                                     f"entries so far (a memo bomb: the unpickler would allocate for every index "
                                     f"below it); refused")
                memo[index] = stack[-1]
            elif name in _GET:
                if arg not in memo:
                    raise Refused(f"the pickled payload refers to memo index {arg} at byte {pos}, never stored; refused")
                stack.append(memo[arg])
            elif name in _SCALAR:
                stack.append(_SCALAR[name])
            elif name.startswith("LONG"):
                stack.append(2 + (arg.bit_length() // 3 if isinstance(arg, int) else 8))
            elif "STRING" in name or "UNICODE" in name:
                stack.append(2 + len(arg))
            elif name in ("EMPTY_LIST", "EMPTY_DICT", "EMPTY_TUPLE"):
                stack.append(_Box())
            elif name in ("APPEND", "SETITEM"):
                items = stack[-1:] if name == "APPEND" else stack[-2:]
                del stack[-len(items):]
                _grow(stack[-1], items, pos, max_bytes)
            elif name in ("APPENDS", "SETITEMS"):
                start = marks.pop()
                items = stack[start + 1:]
                del stack[start:]
                _grow(stack[-1], items, pos, max_bytes)
            elif name in ("LIST", "TUPLE", "DICT"):
                start = marks.pop()
                items = stack[start + 1:]
                del stack[start:]
                box = _Box()
                _grow(box, items, pos, max_bytes)
                stack.append(box)
            elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
                k = int(name[-1])
                items = stack[-k:]
                del stack[-k:]
                box = _Box()
                _grow(box, items, pos, max_bytes)
                stack.append(box)
    except Refused:
        raise
    except Exception as exc:  # noqa: BLE001 - truncated or malformed opcode stream, an empty stack
        raise ValueError(f"not a valid pickle ({type(exc).__name__}: {exc})") from None


def _grow(box, items, pos, max_bytes):
    if not isinstance(box, _Box) or any(x is _MARK for x in items):
        raise Refused(f"not a valid pickle (an item added to something that is not a container at byte {pos})")
    for x in items:
        if x is box:
            raise Refused(f"the pickled payload puts a container inside itself at byte {pos}; refused")
        box.size += _size(x) + 1
        box.depth = max(box.depth, _depth(x) + 1)
    if box.size > max_bytes:
        raise Refused(f"the pickled payload expands to more than {max_bytes} bytes at byte {pos} (references "
                         f"repeat what they name); refused")
    if box.depth > MAX_DEPTH:
        raise Refused(f"the pickled payload nests deeper than {MAX_DEPTH} levels at byte {pos}; refused")


class RestrictedUnpickler(pickle.Unpickler):
    """An Unpickler that resolves no global and no persistent id: plain data only."""

    def find_class(self, module, name):  # GLOBAL, STACK_GLOBAL, INST, the extension registry
        raise pickle.UnpicklingError(f"refused to load the global {module}.{name}")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("refused a persistent id")


def load(data):
    try:
        return RestrictedUnpickler(io.BytesIO(data)).load()
    except Exception as exc:  # noqa: BLE001 - UnpicklingError, EOFError, ValueError, MemoryError...
        raise ValueError(f"the pickled payload cannot be decoded as plain data ({exc})") from None


def decode(text, max_bytes):
    """base64(zlib(pickle(value))) -> value, bounded (module docstring)."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("neither JSON nor base64 (LiveCodeBench's encoded private tests)") from None
    data = inflate(raw, max_bytes)
    check_pickle(data, max_bytes)
    return load(data)


def _peak_kb():
    """This process's peak resident memory in kB: VmHWM of its own address space (getrusage's ru_maxrss
    would also count the parent's, recorded when the child was forked from it and exec'd)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return -1


def main():
    """The decoding child: argv = [max_bytes, address-space limit]; stdin: the base64 text."""
    max_bytes, memory = int(sys.argv[1]), int(sys.argv[2])
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    except (ImportError, ValueError, OSError):
        pass
    text = sys.stdin.buffer.read().strip()
    try:
        value = decode(text, max_bytes)
        if isinstance(value, (bytes, bytearray)):
            value = bytes(value).decode("utf-8", "replace")
        out = b"S" + value.encode("utf-8", "surrogatepass") if isinstance(value, str) else b"J" + json.dumps(value).encode()
    except (ValueError, RecursionError, MemoryError) as exc:
        msg = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__} while decoding; refused"
        sys.stderr.write(msg.replace("\n", " ") + f"\npeak_kb={_peak_kb()}\n")
        sys.exit(3)
    sys.stdout.buffer.write(out)
    sys.stdout.flush()
    sys.stderr.write(f"peak_kb={_peak_kb()}\n")
