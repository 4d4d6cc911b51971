defmodule Sandboxd.Legion.Prompt do
  @moduledoc false
  # The texts Sandboxd.Legion adds to the daemon's prompt_info: what holds
  # for tools written in Elixir (Legion's conversion rules), Legion's
  # tool_usage line, and the constraints used when the daemon cannot be
  # asked.

  @spec elixir_bullets() :: String.t()
  def elixir_bullets do
    """
    - Tools are Elixir functions. Lua tables arrive in them as maps with string keys, or as lists when array-shaped (keys exactly 1..n). Their results come back with maps and structs as tables (string keys), tuples and lists as arrays from 1, and atoms as strings (`:ok` arrives as `"ok"`, so `{:ok, x}` is `{"ok", x}`: use `table.unpack` or `[2]`).
    - To pass a module where a tool expects one (e.g. `AgentTool.call(PlannerAgent, task)`), pass that module's global table by its short name.\
    """
  end

  @spec tool_usage() :: String.t()
  def tool_usage do
    "Each tool below is implemented in Elixir and exposed as a global Lua table - call it " <>
      "from Lua as `ShortName.fun(...)`. The source shown is Elixir; call the same function " <>
      "names with positional arguments. Each call returns one value and raises " <>
      "`ShortName.fun: message` on failure, which `pcall` can catch."
  end

  @spec fallback_constraints() :: String.t()
  def fallback_constraints do
    """
    - Your code is one Lua 5.3 chunk. To produce a value, end with `return <expression>`; a bare expression on its own line is a syntax error.
    - Only global data persists between executions (strings, numbers, booleans and tables of these); `local` variables and functions do not, so define helper functions again in every chunk.
    - `print` output is not shown to you: return the values you need.
    - There is no file, network or process access: `io`, `require`, `package`, `debug` and most of `os` are absent.\
    """
  end
end
