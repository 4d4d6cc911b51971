defmodule Sandboxd.Legion.Eval do
  @moduledoc false
  # Runs the client side of one execution (the wait, and the tool code) in a
  # process spawned by the caller, under the limits Legion's Runner sets on
  # its eval process: scheduler priority (default :low) and a heap budget
  # (max_heap, in bytes; killed by the VM when exceeded).  Used when
  # Legion.Sandbox.Runner is not loaded.  The process is killed when the
  # caller dies; its result, `{:ok, _}` or `{:error, _}`, is passed through;
  # a kill by the heap budget is Legion's memory-limit message, any other
  # death `{:error, {:process_crashed, reason}}`.

  @doc false
  @spec run((-> {:ok, term} | {:error, term}), keyword) :: {:ok, term} | {:error, term}
  def run(fun, limits) do
    parent = self()
    callers = [parent | Process.get(:"$callers", [])]
    priority = Keyword.get(limits, :priority, :low)
    max_heap = Keyword.get(limits, :max_heap, :infinity)

    {pid, ref} =
      spawn_monitor(fn ->
        Process.put(:"$callers", callers)
        watch(parent)
        Process.flag(:priority, priority)

        if is_integer(max_heap) do
          {:min_heap_size, min_words} = :erlang.system_info(:min_heap_size)
          words = max(div(max_heap, :erlang.system_info(:wordsize)), min_words)
          Process.flag(:max_heap_size, %{size: words, kill: true, error_logger: false})
        end

        send(parent, {__MODULE__, self(), fun.()})
      end)

    receive do
      {__MODULE__, ^pid, result} ->
        Process.demonitor(ref, [:flush])
        result

      {:DOWN, ^ref, :process, _, :killed} when is_integer(max_heap) ->
        {:error, "evaluation exceeded the memory limit and was killed"}

      {:DOWN, ^ref, :process, _, reason} ->
        {:error, {:process_crashed, reason}}
    end
  end

  # A watcher that kills the eval when the caller dies (the eval itself is
  # busy waiting for the daemon).
  defp watch(parent) do
    eval = self()

    spawn(fn ->
      p = Process.monitor(parent)
      e = Process.monitor(eval)

      receive do
        {:DOWN, ^p, _, _, _} -> Process.exit(eval, :kill)
        {:DOWN, ^e, _, _, _} -> :ok
      end
    end)
  end
end
