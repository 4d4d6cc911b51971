defmodule Sandboxd.Legion.Limits do
  @moduledoc false
  # Legion's limits keyword list as the daemon's `limits` object.
  #
  #   max_heap        bytes or :infinity    -> max_heap
  #   max_reductions  integer or :infinity  -> max_reductions (Lua VM
  #                   instructions for the daemon, BEAM reductions for
  #                   Legion: the same number is a looser budget here)
  #   priority        :low | :normal | :high | :max -> "low" | "normal" |
  #                   "high" (:max is "high": workers never run above the
  #                   daemon)
  #   cpu_ms, max_output_bytes, max_bindings_bytes, max_tool_calls: passed on
  #
  # A value above the daemon's ceiling (describe "maximums"), :infinity
  # included, is lowered to the ceiling: the execution runs under a tighter
  # limit than asked instead of being refused.  Unknown keys are ignored,
  # as Legion's Runner ignores them.

  @priorities %{low: "low", normal: "normal", high: "high", max: "high"}
  @order %{"low" => 0, "normal" => 1, "high" => 2}
  @passed [:cpu_ms, :max_output_bytes, :max_bindings_bytes, :max_tool_calls]

  @spec map(keyword, map) :: map
  def map(limits, info) do
    max = info["maximums"] || %{}

    Enum.reduce(limits, %{}, fn
      {:max_heap, v}, acc ->
        put(acc, "max_heap", number(v, max["max_heap"]))

      {:max_reductions, v}, acc ->
        put(acc, "max_reductions", number(v, max["max_reductions"]))

      {:priority, p}, acc ->
        put(acc, "priority", priority(p, max["priority"]))

      {k, v}, acc when k in @passed ->
        put(acc, Atom.to_string(k), number(v, max[Atom.to_string(k)]))

      _, acc ->
        acc
    end)
  end

  defp put(acc, _k, nil), do: acc
  defp put(acc, k, v), do: Map.put(acc, k, v)

  defp number(nil, _ceiling), do: nil
  defp number(:infinity, c) when is_integer(c), do: c
  defp number(:infinity, _), do: "infinity"
  defp number(n, c) when is_integer(n) and is_integer(c), do: min(n, c)
  defp number(n, _) when is_integer(n), do: n
  defp number(_, _), do: nil

  defp priority(p, ceiling) do
    case @priorities do
      %{^p => wire} ->
        if is_map_key(@order, ceiling) and @order[wire] > @order[ceiling], do: ceiling, else: wire

      _ ->
        nil
    end
  end
end
