defmodule Sandboxd.DaemonsTest do
  @moduledoc """
  Cases that need a daemon with another config, or none: they change the
  socket Sandboxd.Legion uses, so they run on their own (async: false; ExUnit
  runs these after the async modules).
  """
  use ExUnit.Case, async: false

  alias Sandboxd.{Error, Result}
  alias Sandboxd.Legion, as: L
  alias Sandboxd.Test.EchoTool

  defp with_socket(path, fun) do
    old = Application.get_env(:sandboxd, :socket)
    Application.put_env(:sandboxd, :socket, path)

    try do
      fun.()
    after
      Application.put_env(:sandboxd, :socket, old)
    end
  end

  defp one_worker_daemon do
    d =
      Sandboxd.TestDaemon.start(%{
        "daemon" => %{"max_workers" => 1, "max_queue" => 0, "pool_size" => 0}
      })

    on_exit(fn -> assert :ok = Sandboxd.TestDaemon.stop(d) end)
    d
  end

  # Waits until the daemon's one worker is taken (pool_size 0: a worker
  # exists only while it runs an execution), asking describe, which takes
  # no worker itself.
  defp wait_busy(conn) do
    assert wait_until(
             fn ->
               {:ok, %{"state" => state}} = Sandboxd.describe(conn)
               state["workers"] >= 1
             end,
             5000
           )
  end

  defp wait_until(fun, deadline_ms) do
    t0 = System.monotonic_time(:millisecond)

    Stream.repeatedly(fn -> fun.() || (Process.sleep(20) && nil) end)
    |> Enum.find(fn r -> r || System.monotonic_time(:millisecond) - t0 > deadline_ms end)
  end

  test "a daemon that is down gives Legion an error string the model can read, never a crash" do
    with_socket("/nonexistent/sandboxd.sock", fn ->
      assert {:error, m} = L.execute("return 1", 1000, [EchoTool], [], [])
      assert is_binary(m) and m =~ "sandboxd is unavailable" and m =~ "did not run"
      assert {:error, m2} = L.check("return 1", [])
      assert m2 =~ "unavailable"
      # prompt_info still answers (a fixed text, not cached)
      assert %{language: "Lua", constraints: c} = L.prompt_info()
      assert c =~ "global"
    end)
  end

  test "a busy daemon gives Legion an error string saying so" do
    d = one_worker_daemon()
    {:ok, conn} = Sandboxd.connect(socket: d.socket)
    {:ok, hog} = Sandboxd.execute_async(conn, "while true do end", timeout_ms: 20_000)
    {:ok, probe} = Sandboxd.connect(socket: d.socket)
    wait_busy(probe)

    with_socket(d.socket, fn ->
      assert {:error, m} = L.execute("return 1", 5000, [EchoTool], [], [])
      assert m =~ "sandboxd is busy" and m =~ "try again"
    end)

    Sandboxd.cancel(hog)
    assert {:error, %Error{kind: :cancelled}} = Sandboxd.await(hog)
  end

  test "a caller that dies has its execution cancelled (the worker is freed at once)" do
    d = one_worker_daemon()
    {:ok, conn} = Sandboxd.connect(socket: d.socket)
    me = self()

    pid =
      spawn(fn ->
        send(me, :started)
        Sandboxd.execute(conn, "while true do end", timeout_ms: 20_000)
      end)

    assert_receive :started
    wait_busy(conn)
    Process.exit(pid, :kill)

    assert {:ok, %Result{value: 1}} =
             wait_until(
               fn ->
                 case Sandboxd.execute(conn, "return 1") do
                   {:ok, _} = ok -> ok
                   _ -> nil
                 end
               end,
               3000
             )
  end

  test "a Legion caller killed mid-execution (as Legion's Runner kills on timeout) frees the worker" do
    d = one_worker_daemon()

    {:ok, probe} = Sandboxd.connect(socket: d.socket)

    with_socket(d.socket, fn ->
      pid = spawn(fn -> L.execute("while true do end", 20_000, [EchoTool], [], []) end)
      wait_busy(probe)
      Process.exit(pid, :kill)

      assert {:ok, {1, _}} =
               wait_until(
                 fn ->
                   case L.execute("return 1", 5000, [], [], []) do
                     {:ok, _} = ok -> ok
                     _ -> nil
                   end
                 end,
                 3000
               )
    end)
  end

  test "a tool result larger than max_message_bytes is a catchable Lua error, not a silent timeout" do
    d = Sandboxd.TestDaemon.start(%{"daemon" => %{"max_message_bytes" => 100_000}})
    on_exit(fn -> assert :ok = Sandboxd.TestDaemon.stop(d) end)
    {:ok, conn} = Sandboxd.connect(socket: d.socket)
    tools = %{"T" => %{"big" => fn n -> String.duplicate("x", n) end}}

    assert {:ok, %Result{value: [false, m, 1000]}} =
             Sandboxd.execute(
               conn,
               "local ok, err = pcall(T.big, 200000) return ok, err, #T.big(1000)",
               tools: tools,
               timeout_ms: 5000
             )

    assert m =~ "exceeds the daemon's message limit of 100000 bytes"

    # and a request too large is refused before it is sent
    assert {:error, %Error{kind: :message_too_large}} =
             Sandboxd.execute(conn, "return 1", bindings: [["s", String.duplicate("y", 200_000)]])
  end

  test "the shared Legion connection is opened again after the daemon restarts" do
    dir =
      Path.join(System.tmp_dir!(), "sandboxd-ex-restart-#{System.unique_integer([:positive])}")

    File.mkdir_p!(dir)
    socket = Path.join(dir, "s.sock")
    d1 = Sandboxd.TestDaemon.start(%{}, socket: socket)

    with_socket(socket, fn ->
      assert {:ok, {1, _}} = L.execute("return 1", 5000, [], [], [])
      :ok = Sandboxd.TestDaemon.stop(d1)
      d2 = Sandboxd.TestDaemon.start(%{}, socket: socket)

      on_exit(fn ->
        assert :ok = Sandboxd.TestDaemon.stop(d2)
        File.rm_rf(dir)
      end)

      assert {:ok, {2, _}} = L.execute("return 2", 5000, [], [], [])
    end)
  end

  test "floats in Legion-style bindings are written as the daemon's own %a text and restore exactly" do
    floats = [
      0.0,
      -0.0,
      1.0,
      3.0,
      0.1,
      -2.5e-300,
      5.0e-324,
      2.2250738585072014e-308,
      1.7976931348623157e308,
      123_456.789
    ]

    for f <- floats do
      assert {:ok, {[back, "float"], b}} =
               L.execute("return f, math.type(f)", 5000, [], [{"f", f}], [])

      assert back === f or (f == 0.0 and back == 0.0)
      assert [["f", ["f", hex]]] = b
      assert hex == Sandboxd.Legion.Bindings.hexfloat(f)
    end
  end

  test "Legion's Runner, when loaded, runs the tool side with Legion's timeout and limits" do
    Application.put_env(:sandboxd, :legion_runner, Sandboxd.Test.Runner)
    Application.put_env(:sandboxd, :runner_report, self())

    try do
      limits = [max_heap: 100_000_000, max_reductions: 5_000_000, priority: :normal]
      # the tool finds the caller's context up the process tree, as Vault does
      Process.put("agent_id", "agent-9")

      assert {:ok, {[3, "agent-9"], _}} =
               L.execute(
                 "return EchoTool.add(1, 2), EchoTool.dict('agent_id')",
                 4000,
                 [EchoTool],
                 [],
                 limits
               )

      # the daemon counts the Lua budget; the Runner does not count it again
      assert_received {:runner, 4000, seen}
      assert seen[:max_reductions] == :infinity
      assert seen[:max_heap] == 100_000_000 and seen[:priority] == :normal

      # and its results pass through
      assert {:error, {:throw, :tool_escaped}} =
               L.execute("EchoTool.escape()", 4000, [EchoTool], [], [])
    after
      Application.delete_env(:sandboxd, :legion_runner)
      Application.delete_env(:sandboxd, :runner_report)
    end
  end

  test "config :sandboxd, tool_calls: :concurrent lets Legion tools under parallel run at once" do
    coord = fn ->
      spawn(fn ->
        Process.register(self(), :sandboxd_test_coord)

        receive do
          {:a, pa} ->
            receive do
              {:b, _} -> send(pa, :go)
            end
        end
      end)
    end

    code =
      "return parallel(function() return EchoTool.ra() end, function() return EchoTool.rb() end)"

    {:ok, conn} = Sandboxd.connect()

    if "parallel" in Sandboxd.features(conn) do
      c = coord.()
      assert {:ok, {["a gave up", "b"], _}} = L.execute(code, 5000, [EchoTool], [], [])
      Process.exit(c, :kill)
      Process.sleep(10)

      Application.put_env(:sandboxd, :tool_calls, :concurrent)

      try do
        coord.()
        assert {:ok, {["a", "b"], _}} = L.execute(code, 5000, [EchoTool], [], [])
        Process.put("agent_id", "agent-3")

        assert {:ok, {["agent-3", "agent-3"], _}} =
                 L.execute(
                   "return parallel(function() return EchoTool.dict('agent_id') end, function() return EchoTool.dict('agent_id') end)",
                   5000,
                   [EchoTool],
                   [],
                   []
                 )
      after
        Application.delete_env(:sandboxd, :tool_calls)
      end
    end
  end

  test "config :sandboxd, check: :local leaves syntax to execute, which reports it alike" do
    Application.put_env(:sandboxd, :check, :local)

    try do
      assert L.check("x = 1\nx", []) == :ok
      assert L.check(:nope, []) == {:error, "code must be a binary, got: :nope"}
      assert {:error, m} = L.execute("x = 1\nx", 5000, [], [], [])
      assert m =~ "Failed to compile Lua!" and m =~ "`return <expression>`"
    after
      Application.delete_env(:sandboxd, :check)
    end
  end
end
