"""Tools as Python callables, and the host-to-JSON table, end to end."""

import dataclasses
import datetime
import enum
import math
import types

import pytest

import sandboxd
from sandboxd import values
from sandboxd.tools import ToolSet


class Color(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: int
    y: float
    tags: tuple = ()


class Model:
    def model_dump(self):
        return {"kind": "model", "n": 3}


def test_value_table():
    assert values.to_jsonable((1, 2)) == [1, 2]
    assert values.to_jsonable({3, 1, 2}) == [1, 2, 3]
    assert values.to_jsonable(frozenset(["b", "a"])) == ["a", "b"]
    assert values.to_jsonable(Point(1, 2.5, ("a",))) == {"x": 1, "y": 2.5, "tags": ["a"]}
    assert values.to_jsonable(Model()) == {"kind": "model", "n": 3}
    assert values.to_jsonable(Color.RED) == "red"
    assert values.to_jsonable(datetime.datetime(2026, 1, 2, 3, 4, 5)) == "2026-01-02T03:04:05"
    assert values.to_jsonable(datetime.date(2026, 1, 2)) == "2026-01-02"
    assert values.to_jsonable(b"caf\xe9") == "caf\ufffd"
    assert values.to_jsonable("a\udcff") == "a\ufffd"
    assert values.to_jsonable({1: "a", False: "b", 2.5: "c"}) == {"1": "a", "false": "b",
                                                                  "2.5": "c"}
    assert values.encode(float("1e300")) == b"1e+300"
    assert values.encode(2.0) == b"2.0"


@pytest.mark.parametrize("bad, words", [
    (float("nan"), "nan"), (float("inf"), "inf"), ([1, {"a": float("-inf")}], "-inf"),
    (object(), "object"), (2 ** 64, "64-bit"), ({(1, 2): 1}, "tuple"),
    (types.SimpleNamespace(a=1), "SimpleNamespace"),
])
def test_unencodable(bad, words):
    with pytest.raises(values.Unencodable) as ei:
        values.encode(bad)
    assert words in str(ei.value)


def test_cycle_is_unencodable():
    a = []
    a.append(a)
    with pytest.raises(values.Unencodable, match="cycle"):
        values.encode(a)


def test_values_reach_lua(sock):
    with sandboxd.Client(sock) as c:
        r = c.execute("local p = T.point() local m = T.model() "
                      "return p.x, p.y, math.type(p.y), T.tup()[2], T.color(), T.when(), T.raw(),"
                      " m.kind",
                      tools={"T": {"point": lambda: Point(1, 2.0), "model": Model,
                                   "tup": lambda: (10, 20), "color": lambda: Color.RED,
                                   "when": lambda: datetime.date(2026, 12, 1),
                                   "raw": lambda: b"ok\xff"}})
        assert r.value == [1, 2.0, "float", 20, "red", "2026-12-01", "ok\ufffd", "model"]


def test_nan_and_unencodable_become_catchable_lua_errors(sock):
    with sandboxd.Client(sock) as c:
        r = c.execute("local a, ea = pcall(T.nan) local b, eb = pcall(T.obj) "
                      "local d, ed = pcall(T.big) return a, ea, b, eb, d, ed",
                      tools={"T": {"nan": lambda: math.nan, "obj": lambda: {"x": object()},
                                   "big": lambda: 2 ** 70}})
        a, ea, b, eb, d, ed = r.value
        assert a is False and ea.startswith("T.nan: cannot encode the result") and "nan" in ea
        assert b is False and "object" in eb and "['x']" in eb
        assert d is False and "64-bit" in ed


def test_tool_exception_is_catchable_and_names_its_type(sock):
    def fail(city):
        raise KeyError(city)

    def plain(x):
        raise Exception("no such city")

    with sandboxd.Client(sock) as c:
        r = c.execute("local _, a = pcall(T.fail, 'x') local _, b = pcall(T.plain, 1) "
                      "return a, b", tools={"T": {"fail": fail, "plain": plain}})
        assert r.value == ["T.fail: KeyError: 'x'", "T.plain: no such city"]


def test_tool_abort(sock):
    def stop():
        raise sandboxd.ToolAbort("user said stop", data={"why": "test"})

    with sandboxd.Client(sock) as c:
        with pytest.raises(sandboxd.ToolAborted) as ei:
            c.execute("print('asking') pcall(T.stop) return 'not reached'",
                      tools={"T": {"stop": stop}})
        e = ei.value
        assert e.kind == "tool_aborted" and e.output == "asking\n"
        assert e.tool_error["message"] == "user said stop"
        assert e.tool_error["data"]["detail"] == {"why": "test"}
        assert isinstance(e.__cause__, sandboxd.ToolAbort)
        assert e.stats["tool_calls"] == 1


def test_arities_from_signatures(sock):
    def two(a, b=1):
        return a + b

    def anyn(*args):
        return len(args)

    ts = ToolSet({"T": {"two": two, "anyn": anyn, "none": lambda: 0}})
    assert ts.wire == [{"name": "T", "functions": [{"name": "two", "arities": [1, 2]}, "anyn",
                                                   {"name": "none", "arities": [0]}]}]
    with sandboxd.Client(sock) as c:
        r = c.execute("local ok, e = pcall(T.two, 1, 2, 3) return T.two(1), T.two(1, 5), "
                      "T.anyn(1, 2, 3, 4), e", tools=ts)
        assert r.value == [2, 6, 4, "T.two takes 1 or 2 argument(s), got 3"]


def test_required_keyword_only_refused():
    def f(a, *, b):
        return a
    with pytest.raises(TypeError, match="keyword-only"):
        ToolSet({"T": {"f": f}})


@pytest.mark.parametrize("name", ["string", "1abc", "a-b", "", "print", "end"])
def test_bad_table_names_refused(name):
    with pytest.raises(ValueError):
        ToolSet({name: {"f": len}})


class Weather:
    """Weather of cities."""

    def __init__(self):
        self.calls = 0

    def get(self, city, units="C"):
        """Current weather of a city.

        More text that the catalog leaves out."""
        self.calls += 1
        return {"city": city, "units": units}

    def _private(self):
        return 1


def test_object_and_module_tools(sock):
    w = Weather()
    mod = types.ModuleType("myapp.tools.kv")
    mod.get = lambda k: "v:" + k
    mod._hidden = lambda: 1
    with sandboxd.Client(sock) as c:
        r = c.execute("return W.get('Paris').units, KV.get('a'), KV.__module, W._private",
                      tools={"W": w, "KV": mod})
        assert r.value == ["C", "v:a", "myapp.tools.kv", None]
        assert w.calls == 1


def test_decorator_names_and_describes():
    @sandboxd.tool(name="get_sum", description="Adds a and b.")
    def add(a, b):
        return a + b

    @sandboxd.tool
    def shown(x):
        """Shown in the catalog."""
        return x

    mod = types.ModuleType("m")
    mod.add, mod.shown, mod.other = add, shown, lambda: 1     # decorated ones only
    ts = ToolSet({"M": mod})
    assert ts.wire[0]["functions"] == [{"name": "get_sum", "arities": [2]},
                                       {"name": "shown", "arities": [1]}]
    cat = sandboxd.catalog({"M": mod, "W": Weather(), "Ref": sandboxd.Table({}, module="X.Y")})
    assert "`M.get_sum(a, b)`: Adds a and b." in cat
    assert "`M.shown(x)`: Shown in the catalog." in cat
    assert "`W.get(city, units?)`: Current weather of a city." in cat
    assert "More text" not in cat
    assert "### Ref (module `X.Y`)" in cat and "reference only" in cat


def test_max_tool_calls(sock):
    with sandboxd.Client(sock) as c:
        n = []
        with pytest.raises(sandboxd.LimitExceeded) as ei:
            c.execute("for i = 1, 10 do pcall(T.f, i) end", tools={"T": {"f": n.append}},
                      max_tool_calls=3)
        assert ei.value.kind == "tool_call_limit"
        assert n == [1, 2, 3]
        r = c.execute("return T.f(1)", tools={"T": {"f": lambda x: x}}, max_tool_calls=1)
        assert r.value == 1


def test_max_tool_calls_enforced_by_the_client_without_the_feature(sock):
    """A daemon without the max_tool_calls limit: the client counts and stops
    the execution itself, reported as tool_call_limit as well."""
    with sandboxd.Client(sock) as c:
        c._connection().info.features = frozenset()
        n = []
        with pytest.raises(sandboxd.LimitExceeded) as ei:
            c.execute("for i = 1, 10 do pcall(T.f, i) end", tools={"T": {"f": n.append}},
                      max_tool_calls=3)
        assert ei.value.kind == "tool_call_limit" and ei.value.data["client"] is True
        assert n == [1, 2, 3]
