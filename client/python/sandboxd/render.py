"""sandboxd.render - the text an agent shows its model.

render(result_or_error) turns a Result into the value (JSON, cut at
max_chars), the printed output and "Available variables: ...", and a
SandboxdError into its kind and message, the output printed before the end,
how many tool calls had run, and a note when a daemon session was lost: what
the model needs to fix the next chunk (after Legion's Eval.format_result and
format_error).

system_prompt(tools, prompt_info) joins the daemon's prompt_info (the
language, its constraints, how tools are called) with the catalog of the
tools: the Lua call shape of each function, from its Python signature, and
its docstring.
"""

import json
from typing import Any

from . import errors
from ._core import Result
from ._types import Tools
from .tools import ToolSet, catalog

__all__ = ["render", "system_prompt", "catalog"]


def _cut(text: str, n: int | None) -> str:
    if n is not None and len(text) > n:
        return text[:n] + "\n... (%d more characters cut)" % (len(text) - n)
    return text


def _json(v: Any) -> str:
    try:
        return json.dumps(v, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return repr(v)


def render(outcome: Result | BaseException, *, max_chars: int | None = 8000) -> str:
    """Model-facing text for a Result or an exception from execute."""
    if isinstance(outcome, Result):
        parts = ["Result: " + _cut(_json(outcome.value), max_chars)]
        if outcome.output:
            parts.append("Output:\n" + _cut(outcome.output.rstrip("\n"), max_chars)
                         + ("\n(output truncated)" if outcome.output_truncated else ""))
        if outcome.binding_names:
            parts.append("Available variables: " + ", ".join(
                "`%s`" % n for n in outcome.binding_names))
        return "\n".join(parts)
    if isinstance(outcome, errors.SandboxdError):
        parts = ["Code execution failed (%s): %s" % (outcome.kind, _cut(outcome.message,
                                                                          max_chars))]
        if isinstance(outcome, errors.LuaError) and outcome.line is not None:
            parts.append("Line: %s" % outcome.line)
        if outcome.output:
            parts.append("Output before the error:\n"
                         + _cut(outcome.output.rstrip("\n"), max_chars))
        st = outcome.stats
        if st and st.get("tool_calls"):
            parts.append("Tool calls that had run: %d" % st["tool_calls"])
        if outcome.session_closed:
            parts.append("The session ended: its functions and variables are gone, "
                         "the next chunk starts fresh.")
        elif "session_closed" in outcome.data:
            parts.append("The session goes on, its state as the chunk left it (what ran "
                         "before the error stays).")
        elif not isinstance(outcome, (errors.DaemonUnavailable, errors.Busy)):
            parts.append("Variables from before this chunk are unchanged.")
        parts.append("Please fix the error and try again.")
        return "\n".join(parts)
    if isinstance(outcome, BaseException):
        return "Code execution failed: %s: %s" % (type(outcome).__name__, outcome)
    raise TypeError("render() takes a Result or an exception, got %s" % type(outcome).__name__)


def system_prompt(tools: "Tools | ToolSet | None", prompt_info: Any) -> str:
    """The system prompt section for the sandbox: prompt_info (as answered by
    the daemon's prompt_info) and the catalog of `tools`."""
    pi = prompt_info if isinstance(prompt_info, dict) else {}
    parts = ["You can run code in a sandbox: %s." % pi.get("language", "Lua 5.3")]
    if pi.get("constraints"):
        parts.append(pi["constraints"].rstrip())
    if pi.get("tool_usage"):
        parts.append(pi["tool_usage"].rstrip())
    cat = catalog(tools) if tools else ""
    if cat:
        parts.append("Tools (Lua arguments are positional; `x?` may be left out):\n\n"
                     + cat.rstrip())
        parts.append("Python values reach Lua as: None -> nil, lists and tuples -> sequences, "
                     "dicts and dataclasses -> string-keyed tables, datetimes -> ISO strings.")
    return "\n\n".join(parts) + "\n"
