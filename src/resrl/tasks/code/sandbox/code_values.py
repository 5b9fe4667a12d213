"""Return values as text a program cannot forge into a pass: the exact-builtin encoding.

Standalone (stdlib only): the sandbox harness imports it as the top-level module `code_values`,
the parent as `resrl.tasks.code.sandbox.code_values`.

`encode(value)` runs in the sandbox, right after the program returns. It walks the value by its
*exact* type (`type(v)`, which a program cannot fake the way it can fake `__class__` for
`isinstance`), and turns an instance of a subclass of a builtin into that builtin through the
builtin's own C methods (`str.__str__`, `int.__int__`, `float.__float__`, `list.__iter__`,
`dict.items`, ...), which read the object's storage and never call a method the subclass
defines. Anything that is not builtin data (a class instance, a generator, a numpy array) raises
TypeError: no `__eq__`, `__repr__`, `__str__` or `__iter__` of the program is ever called.

`decode(text)` runs in the parent: it builds only None / bool / int / float / complex / str / bytes
/ list / tuple / dict / set / frozenset, so the parent's comparison (`==` of builtins, numpy's
`allclose`) is honest whatever the program returned. The text is JSON where a plain JSON value
means itself (arrays are lists) and a one-key object is a tag:

    {"t": [..]} tuple   {"s": [..]} set   {"fs": [..]} frozenset   {"d": [[k, v], ..]} dict
    {"b": "hex"} bytes  {"c": [re, im]} complex   {"f": "nan" | "inf" | "-inf"} float
    {"h": "hex"} an int too long for decimal JSON
"""

import json

_MAX_DEPTH = 100
_BIG = 1 << 4000  # ints at least this large go as hex: decimal conversion has a 4300-digit limit
_NAN_INF = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}
_dumps_str = json.encoder.encode_basestring_ascii  # C escaping of an exact str


class NotData(TypeError):
    """The value is not builtin data (or nests deeper than the limit)."""


def _int_text(v):
    if -_BIG < v < _BIG:
        return int.__repr__(v)
    return '{"h":"' + int.__format__(v, "x") + '"}'


def _float_text(v):
    if v != v:
        return '{"f":"nan"}'
    if v in (_INF, _NINF):
        return '{"f":"inf"}' if v > 0 else '{"f":"-inf"}'
    return float.__repr__(v)


_INF, _NINF = float("inf"), float("-inf")


def _enc(v, depth, out):
    if depth > _MAX_DEPTH:
        raise NotData(f"return value nests deeper than {_MAX_DEPTH} levels")
    t = type(v)
    if v is None:
        out.append("null")
    elif t is bool:
        out.append("true" if v else "false")
    elif t is int:
        out.append(_int_text(v))
    elif t is float:
        out.append(_float_text(v))
    elif t is str:
        out.append(_dumps_str(v))
    elif t is list:
        out.append("[")
        _seq(list.__iter__(v), depth, out)
        out.append("]")
    elif t is tuple:
        out.append('{"t":[')
        _seq(tuple.__iter__(v), depth, out)
        out.append("]}")
    elif t is dict:
        out.append('{"d":[')
        first = True
        for k, val in dict.items(v):
            if not first:
                out.append(",")
            first = False
            out.append("[")
            _enc(k, depth + 1, out)
            out.append(",")
            _enc(val, depth + 1, out)
            out.append("]")
        out.append("]}")
    elif t is set or t is frozenset:
        out.append('{"s":[' if t is set else '{"fs":[')
        _seq((set if t is set else frozenset).__iter__(v), depth, out)
        out.append("]}")
    elif t is bytes:
        out.append('{"b":"' + bytes.hex(v) + '"}')
    elif t is complex:
        out.append('{"c":[' + _float_text(complex.real.__get__(v)) + "," + _float_text(complex.imag.__get__(v)) + "]}")
    else:
        _enc(_exact(v, t), depth, out)


def _exact(v, t):
    """An instance of a subclass of a builtin -> the builtin value it stores (the C method of the
    builtin reads the storage; nothing of the subclass runs)."""
    if issubclass(t, bool):  # cannot happen (bool is final), kept for clarity
        return bool.__bool__(v)
    if issubclass(t, int):
        return int.__int__(v)
    if issubclass(t, float):
        return float.__float__(v)
    if issubclass(t, str):
        return str.__str__(v)
    if issubclass(t, bytes):
        return bytes(memoryview(v))
    if issubclass(t, complex):
        return complex(complex.real.__get__(v), complex.imag.__get__(v))
    if issubclass(t, list):
        return [x for x in list.__iter__(v)]
    if issubclass(t, tuple):
        return tuple([x for x in tuple.__iter__(v)])
    if issubclass(t, dict):
        return dict(dict.items(v))  # a key's own __hash__ may run: still in the sandbox, still data out
    if issubclass(t, frozenset):
        return frozenset(frozenset.__iter__(v))
    if issubclass(t, set):
        return set(set.__iter__(v))
    raise NotData(f"return value of type {t.__name__} is not builtin data")


def _seq(it, depth, out):
    first = True
    for x in it:
        if not first:
            out.append(",")
        first = False
        _enc(x, depth + 1, out)


def encode(value):
    """The exact-builtin text of `value` (module docstring). Raises NotData (a TypeError)."""
    out = []
    _enc(value, 0, out)
    return "".join(out)


# ---- parent side --------------------------------------------------------------------------------
class BadValue(ValueError):
    """The text is not a value of the encoding."""


def _dec(x, depth):
    if depth > _MAX_DEPTH + 2:
        raise BadValue("nested too deeply")
    t = type(x)
    if x is None or t is bool or t is int or t is float or t is str:
        return x
    if t is list:
        return [_dec(v, depth + 1) for v in x]
    if t is dict and len(x) == 1:
        (tag, body), = x.items()
        if tag == "t" and type(body) is list:
            return tuple(_dec(v, depth + 1) for v in body)
        if tag in ("s", "fs") and type(body) is list:
            try:
                members = [_dec(v, depth + 1) for v in body]
                return set(members) if tag == "s" else frozenset(members)
            except TypeError as exc:  # an unhashable member
                raise BadValue(str(exc)) from None
        if tag == "d" and type(body) is list:
            out = {}
            for pair in body:
                if type(pair) is not list or len(pair) != 2:
                    raise BadValue("dict item is not a pair")
                try:
                    out[_dec(pair[0], depth + 1)] = _dec(pair[1], depth + 1)
                except TypeError as exc:
                    raise BadValue(str(exc)) from None
            return out
        if tag == "b" and type(body) is str:
            try:
                return bytes.fromhex(body)
            except ValueError:
                raise BadValue("bad bytes") from None
        if tag == "c" and type(body) is list and len(body) == 2:
            re_, im = (_dec(v, depth + 1) for v in body)
            if type(re_) is not float or type(im) is not float:
                raise BadValue("bad complex")
            return complex(re_, im)
        if tag == "f" and body in _NAN_INF:
            return _NAN_INF[body]
        if tag == "h" and type(body) is str:
            try:
                return int(body, 16)
            except ValueError:
                raise BadValue("bad int") from None
    raise BadValue(f"not a value of the encoding: {type(x).__name__}")


def decode(text):
    """Text from `encode` -> the builtin value. BadValue (a ValueError) for anything else."""
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise BadValue(f"not JSON: {exc}"[:200]) from None
    return decode_structure(raw)


def decode_structure(raw):
    """The same, from the JSON already parsed (e.g. expected outputs stored inside a data row)."""
    try:
        return _dec(raw, 0)
    except RecursionError:
        raise BadValue("nested too deeply") from None


__all__ = ["encode", "decode", "decode_structure", "NotData", "BadValue"]
