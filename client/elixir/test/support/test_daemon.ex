defmodule Sandboxd.TestDaemon do
  @moduledoc """
  Starts the real daemon (`$SANDBOXD_BIN`, default the repository's
  `build/sandboxd`) with a temporary config on a temporary socket, by
  `tests/launch.py`, the launcher every suite shares (docs/hacking.md,
  "Starting a daemon in a test"), run as a program: it writes the config
  (`@defaults` with the overrides merged over it), answers `ready SOCKET`
  once the daemon has said READY=1, and on `stop` stops it by SIGTERM and
  reports any sanitizer report in its log.

  A process of its own, linked to no test, owns the launcher's port, so an
  `on_exit` callback can still stop the daemon after the test process has
  ended. When the VM exits the port closes, the launcher's stdin with it,
  and the launcher stops the daemon: it never outlives the test VM.
  """

  @defaults %{
    "daemon" => %{
      "max_workers" => 8,
      "max_queue" => 128,
      "pool_size" => 2,
      "max_message_bytes" => 16_777_216,
      "max_code_bytes" => 65_536,
      "log_level" => "info"
    },
    "defaults" => %{
      "timeout_ms" => 20_000,
      "max_heap" => 256_000_000,
      "max_reductions" => "infinity",
      "cpu_ms" => "infinity",
      "priority" => "low",
      "max_output_bytes" => 1_048_576,
      "max_bindings_bytes" => 10_000_000
    },
    "ceilings" => %{
      "timeout_ms" => 600_000,
      "max_heap" => 1_073_741_824,
      "max_reductions" => "infinity",
      "cpu_ms" => "infinity",
      "priority" => "high",
      "max_output_bytes" => 16_777_216,
      "max_bindings_bytes" => 16_777_216
    }
  }

  def bin do
    System.get_env("SANDBOXD_BIN") || Path.expand("../../../../build/sandboxd", __DIR__)
  end

  defp launcher, do: Path.expand("../../../../tests/launch.py", __DIR__)

  @doc "Starts a daemon; `overrides` is `%{section => %{key => value}}`. Returns `%{socket:, owner:, dir:, log:}`."
  def start(overrides \\ %{}, opts \\ []) do
    dir = Path.join(System.tmp_dir!(), "sandboxd-ex-#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    socket = Keyword.get(opts, :socket, Path.join(dir, "s.sock"))
    log = Path.join(dir, "sandboxd.log")
    cfg = Map.merge(@defaults, overrides, fn _, a, b -> Map.merge(a, b) end)

    settings =
      for {section, values} <- cfg, {k, v} <- values, do: ["--set", "#{section}.#{k}=#{v}"]

    args =
      [launcher(), "--bin", bin(), "--socket", socket, "--log", log] ++ List.flatten(settings)

    caller = self()
    ref = make_ref()
    owner = spawn(fn -> own(args, caller, ref) end)

    receive do
      {^ref, :ready} -> %{socket: socket, owner: owner, dir: dir, log: log}
      {^ref, {:failed, why}} -> raise "sandboxd did not start on #{socket}: #{why}"
    end
  end

  # The owner of the launcher's port: waits for its first answer, then for
  # the stop.
  defp own(args, caller, ref) do
    port =
      Port.open({:spawn_executable, "/usr/bin/python3"}, [
        :binary,
        :exit_status,
        {:line, 65_536},
        args: args
      ])

    receive do
      {^port, {:data, {:eol, "ready " <> _}}} ->
        send(caller, {ref, :ready})

        receive do
          {:stop, from, sref} ->
            Port.command(port, "stop\n")
            send(from, {sref, reports(port, [])})
        end

      {^port, {:data, {_, line}}} ->
        send(caller, {ref, {:failed, line}})

      {^port, {:exit_status, n}} ->
        send(caller, {ref, {:failed, "the launcher exited with #{n}"}})
    end
  end

  defp reports(port, acc) do
    receive do
      {^port, {:data, {:eol, "report " <> line}}} -> reports(port, [line | acc])
      {^port, {:data, _}} -> reports(port, acc)
      {^port, {:exit_status, _}} -> Enum.reverse(acc)
    end
  end

  @doc """
  Stops the daemon and removes its directory. Returns `:ok`, or `{:error,
  lines}` when the daemon's log shows a sanitizer report (an ASan or UBSan
  build in `$SANDBOXD_BIN`).
  """
  def stop(%{owner: owner, dir: dir}) do
    ref = Process.monitor(owner)
    send(owner, {:stop, self(), ref})

    result =
      receive do
        {^ref, []} -> :ok
        {^ref, reports} -> {:error, reports}
        {:DOWN, ^ref, :process, _, _} -> :ok
      end

    Process.demonitor(ref, [:flush])
    File.rm_rf(dir)
    result
  end
end
