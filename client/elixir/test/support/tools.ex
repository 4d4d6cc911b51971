defmodule Sandboxd.Test.Item do
  @moduledoc false
  defstruct [:id, :name]
end

defmodule Sandboxd.Test.EchoTool do
  @moduledoc "The tool of Legion's Lua sandbox tests, rebuilt: one function per behaviour checked."
  @behaviour Legion.Tool

  @impl true
  def description, do: "echo tool"
  def description(_sandbox), do: "echo tool for a sandbox"
  def summary, do: "echoes"
  def extra_allowed_modules, do: []

  def add(a, b), do: a + b
  def add(a, b, c), do: a + b + c
  def shape(arg), do: %{received: arg, tag: :ok}
  def items(n), do: for(i <- 1..n, do: %Sandboxd.Test.Item{id: i, name: "item #{i}"})
  def ok_tuple, do: {:ok, 42}
  def with_fun, do: %{f: fn -> 1 end, x: 1}
  def boom, do: raise("tool exploded")
  def escape, do: throw(:tool_escaped)
  def quit, do: exit(:tool_exited)
  def pid, do: self()
  def kind_of(x) when is_atom(x), do: "atom:" <> Atom.to_string(x)
  def kind_of(x) when is_map(x), do: "map"
  def kind_of(_), do: "other"
  def echo(x), do: x
  def date, do: ~D[2026-12-01]
  def keyword, do: [a: 1, b: 2]
  def big(n), do: String.duplicate("x", n)
  def valid?(x), do: is_integer(x)
  def sleep(ms), do: Process.sleep(ms)
  def whoami, do: inspect(self())
  def priority, do: Process.info(self(), :priority) |> elem(1)
  def dict(key), do: Sandboxd.Test.VaultLike.get(key)
  def callers, do: Enum.map(Process.get(:"$callers", []), &inspect/1)

  # ra() returns "a" only once rb() has been called meanwhile (a process
  # registered as :sandboxd_test_coord pairs them): calls served at once.
  def ra do
    send(:sandboxd_test_coord, {:a, self()})

    receive do
      :go -> "a"
    after
      300 -> "a gave up"
    end
  end

  def rb, do: send(:sandboxd_test_coord, {:b, self()}) && "b"
end

defmodule Sandboxd.Test.OtherTool do
  @moduledoc false
  @behaviour Legion.Tool
  def description, do: "another"
  def hello(name), do: "hello " <> name
end

defmodule Sandboxd.Test.PlainModule do
  @moduledoc "Not a tool: listed modules without Legion.Tool are reference-only."
  def secret, do: "never callable from Lua"
end

defmodule Sandboxd.Test.VaultLike do
  @moduledoc """
  Reads a key from the process dictionary of the nearest process up the
  caller tree that has it (`$callers`, `$ancestors`, the OTP 25 `:parent`),
  the way Legion's Vault finds per-agent context.
  """
  def get(key), do: find([self()], key, MapSet.new())

  defp find([], _key, _seen), do: nil

  defp find([pid | rest], key, seen) do
    if MapSet.member?(seen, pid) or not Process.alive?(pid) do
      find(rest, key, seen)
    else
      {:dictionary, dict} = Process.info(pid, :dictionary)

      case List.keyfind(dict, key, 0) do
        {^key, value} ->
          value

        nil ->
          up =
            Keyword.get(dict, :"$callers", []) ++
              Enum.filter(Keyword.get(dict, :"$ancestors", []), &is_pid/1) ++
              parent(pid)

          find(rest ++ up, key, MapSet.put(seen, pid))
      end
    end
  end

  defp parent(pid) do
    case Process.info(pid, :parent) do
      {:parent, p} when is_pid(p) -> [p]
      _ -> []
    end
  end
end

defmodule Sandboxd.Test.Runner do
  @moduledoc """
  Stands in for `Legion.Sandbox.Runner` (configured with `config :sandboxd,
  legion_runner: ...`): reports how it was called, then runs the eval in a
  spawned process as Legion's does.
  """
  def run(fun, timeout_ms, limits) do
    if pid = Application.get_env(:sandboxd, :runner_report),
      do: send(pid, {:runner, timeout_ms, limits})

    parent = self()
    {pid, ref} = spawn_monitor(fn -> send(parent, {:result, self(), fun.()}) end)

    receive do
      {:result, ^pid, result} ->
        Process.demonitor(ref, [:flush])
        result

      {:DOWN, ^ref, :process, _, reason} ->
        {:error, {:process_crashed, reason}}
    end
  end
end
