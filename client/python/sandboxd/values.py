"""sandboxd.values - host values to JSON, for tool results (and every other
value the client sends).

The table (documented in the package README):

  None, bool, int, str      as they are (int within the signed 64-bit range)
  float                     a finite float; NaN and the infinities are refused
  dict                      an object; keys str, int, float or bool become strings
                            (json's rule); other keys are refused
  list, tuple               an array
  set, frozenset            an array (sorted when its items sort)
  dataclass instance        an object of its fields
  object with model_dump()  what model_dump() returns (pydantic v2 models)
  enum.Enum member          its value, encoded by these rules
  datetime, date, time      the ISO 8601 string (isoformat())
  bytes, bytearray,         the text decoded as UTF-8, an invalid byte
  memoryview                becoming U+FFFD
  str with lone surrogates  each surrogate becomes U+FFFD

Anything else (and a cycle, or nesting deeper than MAX_DEPTH) raises
Unencodable, whose message names the type and where it was found; the tool
call layer turns it into a tool error, so Lua gets a catchable error.

encode(v) -> bytes returns the compact UTF-8 JSON text; it never writes NaN.
"""

import dataclasses
import datetime
import enum
import json
from typing import Any, Callable

__all__ = ["Unencodable", "encode", "to_jsonable", "MAX_DEPTH"]

MAX_DEPTH = 200
INT_MIN, INT_MAX = -(1 << 63), (1 << 63) - 1

_dumps: Callable[[Any], str] = json.JSONEncoder(ensure_ascii=False, allow_nan=False,
                                                check_circular=False,
                                                separators=(",", ":")).encode


class Unencodable(ValueError):
    """A value the table above cannot carry."""


def _where(path: list[str]) -> str:
    return "".join(path) if path else "the value"


def _key(k: object, path: list[str]) -> str:
    if isinstance(k, str):
        return _str(k)
    if isinstance(k, bool):
        return "true" if k else "false"
    if isinstance(k, int):
        if not INT_MIN <= k <= INT_MAX:
            raise Unencodable("integer key %d at %s is out of the 64-bit range" % (k, _where(path)))
        return str(k)
    if isinstance(k, float):
        if k != k or k in (float("inf"), float("-inf")):
            raise Unencodable("float key %r at %s cannot be encoded as JSON" % (k, _where(path)))
        return repr(k)
    if isinstance(k, enum.Enum):
        return _key(k.value, path)
    raise Unencodable("a dict key of type %s at %s cannot be encoded as JSON"
                      % (type(k).__name__, _where(path)))


def _str(s: str) -> str:
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in s)


def _convert(v: Any, path: list[str], stack: set[int]) -> Any:
    t = type(v)
    if t is str:
        return _str(v)
    if t is bool or v is None:
        return v
    if t is int:
        if not INT_MIN <= v <= INT_MAX:
            raise Unencodable("integer %d at %s is out of the 64-bit range" % (v, _where(path)))
        return v
    if t is float:
        if v != v or v in (float("inf"), float("-inf")):
            raise Unencodable("float %r at %s cannot be encoded as JSON (no NaN or infinity)"
                              % (v, _where(path)))
        return v
    if len(stack) >= MAX_DEPTH:
        raise Unencodable("nesting deeper than %d at %s" % (MAX_DEPTH, _where(path)))
    if isinstance(v, enum.Enum):
        return _convert(v.value, path, stack)
    if isinstance(v, str):                  # subclasses: their plain value
        return _str(str.__str__(v))
    if isinstance(v, int):
        return _convert(int.__int__(v), path, stack)
    if isinstance(v, float):
        return _convert(float.__float__(v), path, stack)
    if isinstance(v, (datetime.datetime, datetime.date, datetime.time)):
        return v.isoformat()
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).decode("utf-8", "replace")
    vid = id(v)
    if vid in stack:
        raise Unencodable("a cycle at %s cannot be encoded as JSON" % _where(path))
    stack.add(vid)
    try:
        if isinstance(v, dict):
            out: dict[str, Any] = {}
            for k, x in v.items():
                ks = _key(k, path)
                path.append("[%r]" % (k,))
                out[ks] = _convert(x, path, stack)
                path.pop()
            return out
        if isinstance(v, (list, tuple, set, frozenset)):
            items = v
            if isinstance(v, (set, frozenset)):
                try:
                    items = sorted(v)
                except TypeError:
                    items = list(v)
            lst: list[Any] = []
            for i, x in enumerate(items):
                path.append("[%d]" % i)
                lst.append(_convert(x, path, stack))
                path.pop()
            return lst
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return _convert({f.name: getattr(v, f.name) for f in dataclasses.fields(v)},
                            path, stack)
        dump = getattr(v, "model_dump", None)
        if callable(dump) and not isinstance(v, type):
            return _convert(dump(), path, stack)
    finally:
        stack.discard(vid)
    raise Unencodable("a value of type %s at %s cannot be encoded as JSON"
                      % (t.__qualname__, _where(path)))


def to_jsonable(v: Any) -> Any:
    """v converted by the table above into plain dict/list/str/int/float/bool/None.
    Raises Unencodable."""
    return _convert(v, [], set())


_LITERALS: dict[bool | None, bytes] = {True: b"true", False: b"false", None: b"null"}
# the C version when there is one (typeshed does not declare it)
_quote: Callable[[str], str] = getattr(json.encoder, "encode_basestring")


def encode(v: Any) -> bytes:
    """The compact UTF-8 JSON text of v by the table above, as bytes.  Raises
    Unencodable."""
    t = type(v)
    if t is int and INT_MIN <= v <= INT_MAX:        # fast paths: the common tool results
        return b"%d" % v
    if t is str:
        try:
            return _quote(v).encode("utf-8")
        except UnicodeEncodeError:
            pass
    elif t is bool or v is None:
        return _LITERALS[v]
    return _dumps(to_jsonable(v)).encode("utf-8")
