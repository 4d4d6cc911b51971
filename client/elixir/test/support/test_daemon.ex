defmodule Sandboxd.TestDaemon do
  @moduledoc """
  Starts the real daemon (`$SANDBOXD_BIN`, default the repository's
  `build/sandboxd`) with a temporary config on a temporary socket. The
  daemon runs under a shell that stops it when its stdin closes, so it never
  outlives the test VM.
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

  @doc "Starts a daemon; `overrides` is `%{section => %{key => value}}`. Returns `%{socket:, port:, dir:}`."
  def start(overrides \\ %{}, opts \\ []) do
    dir = Path.join(System.tmp_dir!(), "sandboxd-ex-#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    socket = Keyword.get(opts, :socket, Path.join(dir, "s.sock"))
    conf = Path.join(dir, "sandboxd.conf")
    log = Path.join(dir, "sandboxd.log")
    File.write!(conf, render(Map.merge(@defaults, overrides, fn _, a, b -> Map.merge(a, b) end)))

    script = ~S"""
    "$0" -c "$1" -s "$2" >>"$3" 2>&1 &
    pid=$!
    read _ignored
    kill -TERM $pid 2>/dev/null
    wait $pid
    """

    port =
      Port.open({:spawn_executable, "/bin/sh"}, [
        :binary,
        args: ["-c", script, bin(), conf, socket, log]
      ])

    wait_ready(socket, log, 200)
    %{socket: socket, port: port, dir: dir, log: log}
  end

  @doc """
  Stops the daemon and removes its directory. Returns `:ok`, or `{:error,
  lines}` when the daemon's log shows a sanitizer report (an ASan or UBSan
  build in `$SANDBOXD_BIN`).
  """
  def stop(%{port: port, socket: socket, dir: dir, log: log}) do
    # A line on the shell's stdin stops the daemon (any process may write
    # to the port; only its owner could close it).
    try do
      Port.command(port, "stop\n")
    rescue
      ArgumentError -> :ok
    end

    wait_gone(socket, 200)
    reports = sanitizer_reports(log)
    File.rm_rf(dir)
    if reports == [], do: :ok, else: {:error, reports}
  end

  defp sanitizer_reports(log) do
    case File.read(log) do
      {:ok, text} ->
        text
        |> String.split("\n")
        |> Enum.filter(
          &(&1 =~ ~r/ERROR: (Address|Leak)Sanitizer|\.(c|h):\d+:\d+: runtime error:/)
        )

      _ ->
        []
    end
  end

  defp render(cfg) do
    for {section, values} <- cfg, into: "" do
      "[#{section}]\n" <> Enum.map_join(values, "", fn {k, v} -> "#{k} = #{v}\n" end) <> "\n"
    end
  end

  defp wait_ready(socket, log, 0),
    do: raise("sandboxd did not start on #{socket}: #{File.read!(log)}")

  defp wait_ready(socket, log, n) do
    case :gen_tcp.connect({:local, socket}, 0, [:binary, active: false], 100) do
      {:ok, s} ->
        :gen_tcp.close(s)

      {:error, _} ->
        Process.sleep(25)
        wait_ready(socket, log, n - 1)
    end
  end

  defp wait_gone(_socket, 0), do: :ok

  defp wait_gone(socket, n) do
    if File.exists?(socket) do
      Process.sleep(25)
      wait_gone(socket, n - 1)
    else
      :ok
    end
  end
end
