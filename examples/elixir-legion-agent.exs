# A minimal agent loop on Sandboxd.Legion, driven the way Legion's executor
# drives a sandbox: prompt_info/0 for the system prompt, then per step
# execute/5 with the agent's tools, timeout, bindings and limits, the result
# or error rendered for the model, and binding_names/1 for "Available
# variables".  A scripted model stands in for the LLM.
#
#   build/sandboxd -s /tmp/sbx.sock &
#   cd client/elixir && SANDBOXD_SOCKET=/tmp/sbx.sock mix run ../../examples/elixir-legion-agent.exs
#
# In a Legion application none of this is written by hand: it is
# `config :legion, :config, %{sandbox: Sandboxd.Legion}`.

unless Code.ensure_loaded?(Legion.Tool) do
  defmodule Legion.Tool do
    @moduledoc "Stand-in for Legion's behaviour when Legion is not installed."
    @callback description() :: String.t()
  end
end

defmodule Example.Tools.Catalog do
  @behaviour Legion.Tool
  def description, do: "Catalog.search(query) -> list of %{id, title, price}"

  def search(query) do
    [
      %{id: 1, title: "Lua in practice", price: 30.0},
      %{id: 2, title: "Elixir in action", price: 45.5},
      %{id: 3, title: "Programming in Lua", price: 39.9}
    ]
    |> Enum.filter(&String.contains?(String.downcase(&1.title), String.downcase(query)))
  end
end

defmodule Example.ScriptedModel do
  # What a model might write, step by step: a bare expression first (a
  # syntax error with Legion's hint), then code that keeps a global.
  def steps do
    [
      "books = Catalog.search('lua')\n#books",
      "books = Catalog.search('lua')\nreturn #books",
      "local total = 0\nfor _, b in ipairs(books) do total = total + b.price end\nreturn total"
    ]
  end
end

sandbox = Sandboxd.Legion
tools = [Example.Tools.Catalog]
limits = [max_heap: 256_000_000, max_reductions: :infinity, priority: :low]

IO.puts("system prompt language: #{sandbox.prompt_info().language}\n")

Enum.reduce(Example.ScriptedModel.steps(), [], fn code, bindings ->
  IO.puts("model wrote:\n" <> code)

  case sandbox.execute(code, 60_000, tools, bindings, limits) do
    {:ok, {value, new_bindings}} ->
      vars = sandbox.binding_names(new_bindings) |> Enum.map_join(", ", &"`#{&1}`")

      IO.puts(
        "=> Code executed successfully. Result: #{inspect(value)}\n   Available variables: #{vars}\n"
      )

      new_bindings

    {:error, reason} ->
      text = if is_binary(reason), do: reason, else: inspect(reason)
      IO.puts("=> Code execution failed:\n   #{text}\n")
      # after an error the previous bindings stand, as in Legion
      bindings
  end
end)
