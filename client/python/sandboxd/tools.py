"""sandboxd.tools - Python callables as the tool tables a chunk sees.

`tools` (the argument of execute, check and session) maps a Lua table name to
one of:
  * a dict {function name: callable};
  * an object or a module: its public callables (names not starting with "_";
    classes left out; for a module only what `__all__` lists when it has one).
    When some of them carry the @tool decorator, only those are exposed;
  * a Table(functions, module=None, description=None) for the table's
    `__module` string and a description for the prompt.

A function gets the Lua arguments positionally.  Its arities come from
inspect.signature: positional parameters give the range from the required
count to the total (sent to the daemon, which then refuses other counts
itself); *args, a signature that cannot be read, or a range of more than 16
counts send none.  A required keyword-only parameter cannot be passed from
Lua and is refused when the tools are built.

ToolSet is what the clients keep per execution: the wire `tools` array and a
lookup from (table, function) to the callable.  Building one validates names
(table names are Lua identifiers that the sandbox does not define) and raises
TypeError/ValueError before anything is sent.
"""

import inspect
import re
from typing import Any, Callable, TypeVar, overload

from ._types import Tools

__all__ = ["tool", "Table", "ToolSet", "catalog"]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
RESERVED = frozenset("""
    _G _ENV _VERSION assert collectgarbage error getmetatable ipairs load next pairs pcall
    print rawequal rawget rawlen rawset select setmetatable tonumber tostring type xpcall
    unpack string table math utf8 coroutine os parallel
    and break do else elseif end false for function goto if in local nil not or repeat
    return then true until while""".split())
MAX_ARITIES = 16
_ATTR = "__sandboxd_tool__"
F = TypeVar("F", bound=Callable[..., Any])


class _Info:
    __slots__ = ("name", "description", "inline")

    def __init__(self, name: str | None, description: str | None, inline: bool) -> None:
        self.name = name
        self.description = description
        self.inline = inline


@overload
def tool(func: F, *, name: str | None = None, description: str | None = None,
         inline: bool = False) -> F: ...


@overload
def tool(func: None = None, *, name: str | None = None, description: str | None = None,
         inline: bool = False) -> Callable[[F], F]: ...


def tool(func: F | None = None, *, name: str | None = None, description: str | None = None,
         inline: bool = False) -> F | Callable[[F], F]:
    """Decorator: mark a function as a tool function, optionally under another
    Lua name, with a description for the prompt (default: its docstring).
    inline=True lets AsyncClient call a plain function on the event loop
    itself instead of in a thread: for quick functions that never block.

        @sandboxd.tool
        def get(city): ...

        @sandboxd.tool(name="get-sum", description="Adds two numbers.")
        def get_sum(a, b): ...
    """
    def mark(f: F) -> F:
        if not callable(f):
            raise TypeError("@sandboxd.tool needs a callable, got %r" % (f,))
        setattr(f, _ATTR, _Info(name, description, inline))
        return f
    return mark(func) if func is not None else mark


class Table:
    """An explicit tool table: functions (dict or object, as for `tools`), the
    `__module` string the chunk sees, and a description for the prompt."""

    def __init__(self, functions: Any, *, module: str | None = None,
                 description: str | None = None) -> None:
        self.functions = functions
        self.module = module
        self.description = description


class Function:
    """One tool function: the callable, its Lua name, arities and signature."""

    __slots__ = ("name", "fn", "arities", "is_async", "inline", "params", "description", "wire")

    def __init__(self, name: str, fn: Callable[..., Any]) -> None:
        self.name = name
        self.fn = fn
        info = getattr(fn, _ATTR, None)
        self.description: str = (info.description if info and info.description
                            else inspect.getdoc(fn) or "")
        target = fn
        while not inspect.iscoroutinefunction(target) and hasattr(target, "__wrapped__"):
            target = target.__wrapped__
        self.is_async = (inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(target)
                         or inspect.iscoroutinefunction(getattr(fn, "__call__", None)))
        self.inline = bool(info and info.inline) and not self.is_async
        self.arities, self.params = _arities(name, fn)
        self.wire: dict[str, Any] | str = (
            {"name": name, "arities": self.arities} if self.arities is not None else name)


def _arities(name: str, fn: Callable[..., Any]
             ) -> tuple[list[int] | None, list[tuple[str, bool]] | None]:
    """(arities list or None, [(param name, optional?)] or None for '...')."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None, None
    required = total = 0
    params = []
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            total += 1
            if p.default is p.empty:
                if total != required + 1:
                    break                           # cannot happen in a valid signature
                required += 1
            params.append((p.name, p.default is not p.empty))
        elif p.kind is p.VAR_POSITIONAL:
            return None, params + [("...", True)]
        elif p.kind is p.KEYWORD_ONLY and p.default is p.empty:
            raise TypeError("tool function %s: the keyword-only parameter %r has no default, "
                            "and Lua passes arguments positionally" % (name, p.name))
    if total - required + 1 > MAX_ARITIES:
        return None, params
    return list(range(required, total + 1)), params


def _members(obj: Any) -> dict[str, Callable[..., Any]]:
    """{name: callable} of an object or module (see the module comment)."""
    if inspect.ismodule(obj) and hasattr(obj, "__all__"):
        names = list(obj.__all__)
    else:
        names = sorted(n for n in dir(obj) if not n.startswith("_"))
    found: dict[str, Callable[..., Any]] = {}
    for n in names:
        try:
            v = getattr(obj, n)
        except AttributeError:
            continue
        if callable(v) and not isinstance(v, type):
            found[n] = v
    marked = {n: v for n, v in found.items() if getattr(v, _ATTR, None) is not None}
    return marked or found


class ToolSet:
    """The tools of one execute (or session): `wire` for the request and
    `lookup(table, function)` for the tool calls."""

    __slots__ = ("wire", "tables", "_fns")

    EMPTY: "ToolSet"

    def __init__(self, tools: "Tools | ToolSet | None" = None) -> None:
        self.wire: list[dict[str, Any]] = []
        self.tables: list[tuple[str, str | None, str | None, list[Function]]] = []
        self._fns: dict[tuple[str, str], Function] = {}
        if tools is None:
            return
        if isinstance(tools, ToolSet):
            self.wire, self.tables, self._fns = tools.wire, tools.tables, tools._fns
            return
        if not isinstance(tools, dict):
            raise TypeError("tools must be a dict {table name: functions}, got %s"
                            % type(tools).__name__)
        for tname, spec in tools.items():
            if not isinstance(tname, str) or not _IDENT.match(tname) or len(tname) > 128:
                raise ValueError("tool table name %r is not a Lua identifier" % (tname,))
            if tname in RESERVED:
                raise ValueError("tool table name %r is a name the sandbox defines" % tname)
            module: str | None = None
            description: str | None = None
            if isinstance(spec, Table):
                module, description, spec = spec.module, spec.description, spec.functions
            if spec is None:
                fns = {}
            elif isinstance(spec, dict):
                fns = spec
            else:
                fns = _members(spec)
                if module is None and inspect.ismodule(spec):
                    module = spec.__name__
                if description is None:
                    description = inspect.getdoc(spec) if inspect.ismodule(spec) else None
            funcs = []
            for key, fn in fns.items():
                if not callable(fn):
                    raise TypeError("tool %s.%s is not callable" % (tname, key))
                info = getattr(fn, _ATTR, None)
                lname = info.name if info is not None and info.name else key
                if not isinstance(lname, str) or not lname or "\0" in lname:
                    raise ValueError("tool %s: function name %r is not a non-empty string"
                                     % (tname, lname))
                if (tname, lname) in self._fns:
                    raise ValueError("tool %s: function %r given twice" % (tname, lname))
                f = Function(lname, fn)
                funcs.append(f)
                self._fns[(tname, lname)] = f
            entry: dict[str, Any] = {"name": tname, "functions": [f.wire for f in funcs]}
            if module is not None:
                entry["module"] = module
            self.wire.append(entry)
            self.tables.append((tname, module, description, funcs))

    def lookup(self, table: object, function: object) -> Function | None:
        if type(table) is not str or type(function) is not str:
            return None
        return self._fns.get((table, function))

    def __bool__(self) -> bool:
        return bool(self.wire)


ToolSet.EMPTY = ToolSet()


def _first_paragraph(text: str | None) -> str:
    return text.strip().split("\n\n", 1)[0].replace("\n", " ").strip() if text else ""


def _shape(tname: str, f: Function) -> str:
    if f.params is None:
        args = "..."
    else:
        parts = []
        for pname, opt in f.params:
            if pname == "...":
                parts.append("...")
            elif opt:
                parts.append(pname + "?")
            else:
                parts.append(pname)
        args = ", ".join(parts)
    key = ("." + f.name) if _IDENT.match(f.name) else '["%s"]' % f.name.replace('"', '\\"')
    return "%s%s(%s)" % (tname, key, args)


def catalog(tools: "Tools | ToolSet | None") -> str:
    """Markdown: each tool table and the Lua call shape of each function (from
    the Python signature; `x?` is optional, `...` any number) with the first
    paragraph of its description."""
    ts = ToolSet(tools)
    out = []
    for tname, module, description, funcs in ts.tables:
        head = "### %s" % tname
        if module and module != tname:
            head += " (module `%s`)" % module
        out.append(head)
        if description:
            out.append(_first_paragraph(description))
        if not funcs:
            out.append("- reference only: a table holding `__module`, nothing to call")
        for f in funcs:
            line = "- `%s`" % _shape(tname, f)
            d = _first_paragraph(f.description)
            if d:
                line += ": " + d
            out.append(line)
        out.append("")
    return "\n".join(out).rstrip() + ("\n" if out else "")
