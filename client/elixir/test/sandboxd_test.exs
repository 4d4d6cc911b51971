defmodule SandboxdTest do
  @moduledoc "The plain client against the real daemon."
  use ExUnit.Case, async: true

  import Bitwise
  alias Sandboxd.{Error, Result}
  alias Sandboxd.Test.EchoTool

  setup do
    {:ok, conn} = Sandboxd.connect()
    on_exit(fn -> Sandboxd.close(conn) end)
    %{conn: conn}
  end

  test "execute returns the value, output, stats and bindings that restore", %{conn: conn} do
    assert {:ok,
            %Result{value: 42, output: "hi\n", binding_names: ["x"], bindings: b, stats: stats}} =
             Sandboxd.execute(conn, "x = 40; print('hi'); return x + 2")

    assert is_integer(stats["wall_us"])

    assert {:ok, %Result{value: [41.0, "float"]}} =
             Sandboxd.execute(conn, "local y = x + 1.0 return y, math.type(y)", bindings: b)

    assert Sandboxd.binding_names(b) == ["x"]
    assert {:ok, ["x"]} = Sandboxd.binding_names(conn, b)
  end

  test "integers and floats stay apart in both directions", %{conn: conn} do
    tools = %{"T" => %{"f" => fn a, b -> [a, b, 3.0, 4] end}}

    assert {:ok, %Result{value: [1, 2.0, 3.0, 4, "integer", "float"]}} =
             Sandboxd.execute(
               conn,
               "local r = T.f(1, 2.0) return r[1], r[2], r[3], r[4], math.type(r[4]), math.type(r[3])",
               tools: tools
             )
  end

  test "tools given as functions, as a module, and as a list of modules", %{conn: conn} do
    fns = %{"Calc" => %{"double" => fn x -> 2 * x end, "zero" => fn -> 0 end}}

    assert {:ok, %Result{value: [8, 0]}} =
             Sandboxd.execute(conn, "return Calc.double(4), Calc.zero()", tools: fns)

    assert {:ok, %Result{value: [3, "Elixir.Sandboxd.Test.EchoTool"]}} =
             Sandboxd.execute(conn, "return E.add(1, 2), E.__module", tools: %{"E" => EchoTool})

    assert {:ok, %Result{value: 6}} =
             Sandboxd.execute(conn, "return EchoTool.add(1, 2, 3)", tools: [EchoTool])
  end

  test "a tool's exception is a catchable Lua error; its arity is checked", %{conn: conn} do
    tools = %{
      "T" => %{"boom" => fn -> raise ArgumentError, "bad city" end, "one" => fn x -> x end}
    }

    assert {:ok, %Result{value: [false, "T.boom: bad city", false, m]}} =
             Sandboxd.execute(
               conn,
               "local a, b = pcall(T.boom) local c, d = pcall(T.one) return a, b, c, d",
               tools: tools
             )

    assert m =~ "T.one takes 1 argument(s), got 0"
  end

  test "throw, exit and Sandboxd.ToolAbort end the execution as tool_aborted", %{conn: conn} do
    tools = %{
      "T" => %{
        "t" => fn -> throw({:stop, 1}) end,
        "e" => fn -> exit(:bye) end,
        "a" => fn -> raise Sandboxd.ToolAbort, "user said stop" end
      }
    }

    assert {:error, %Error{kind: :tool_aborted, reason: {:throw, {:stop, 1}}}} =
             Sandboxd.execute(conn, "pcall(T.t) return 1", tools: tools)

    assert {:error, %Error{kind: :tool_aborted, reason: {:exit, :bye}}} =
             Sandboxd.execute(conn, "pcall(T.e)", tools: tools)

    assert {:error, %Error{kind: :tool_aborted, message: m, output: "before\n"}} =
             Sandboxd.execute(conn, "print('before') pcall(T.a)", tools: tools)

    assert m =~ "user said stop"
  end

  test "errors are structured: kind, message, output, stats, data", %{conn: conn} do
    assert {:error,
            %Error{
              kind: :runtime_error,
              code: -32002,
              message: m,
              output: "p\n",
              stats: %{},
              data: %{"line" => 3}
            }} = Sandboxd.execute(conn, "print('p')\nlocal t = nil\nreturn t.x")

    assert m =~ "attempt to index a nil value"
    assert {:error, %Error{kind: :syntax_error}} = Sandboxd.check(conn, "return 1 +")
    assert {:ok, %{"ok" => true}} = Sandboxd.check(conn, "return 1")

    assert {:error, %Error{kind: :timeout}} =
             Sandboxd.execute(conn, "while true do end", timeout_ms: 50)

    assert {:error, %Error{kind: :limit_out_of_range}} =
             Sandboxd.execute(conn, "return 1", timeout_ms: 100_000_000)

    assert {:error, %Error{kind: :code_too_large}} =
             Sandboxd.execute(conn, String.duplicate(" ", 70_000))
  end

  test "lines far longer than the socket buffer are reassembled, both ways", %{conn: conn} do
    n = 3_000_000

    tools = %{
      "T" => %{"big" => fn k -> String.duplicate("y", k) end, "len" => fn s -> byte_size(s) end}
    }

    assert {:ok, %Result{value: [^n, ^n, big]}} =
             Sandboxd.execute(
               conn,
               "local s = T.big(#{n}) return #s, T.len(string.rep('z', #{n})), string.rep('x', #{n})",
               tools: tools
             )

    assert big == String.duplicate("x", n)
  end

  test "several executions in flight on one connection, each tool call served by its own caller",
       %{conn: conn} do
    tasks =
      for i <- 1..4 do
        Task.async(fn ->
          me = self()

          tools = %{
            "Who" => %{
              "am_i" => fn ->
                Process.sleep(20 * (5 - i))
                inspect(self()) == inspect(me)
              end,
              "n" => fn -> i end
            }
          }

          Sandboxd.execute(conn, "return Who.am_i(), Who.n()", tools: tools)
        end)
      end

    results = Enum.map(tasks, &Task.await/1)

    assert results |> Enum.map(fn {:ok, r} -> r.value end) == [
             [true, 1],
             [true, 2],
             [true, 3],
             [true, 4]
           ]
  end

  test "a tool runs in the process that called execute, not in the connection's", %{conn: conn} do
    me = inspect(self())
    reader = inspect(conn.pid)
    tools = %{"P" => %{"self" => fn -> inspect(self()) end}}
    assert {:ok, %Result{value: ^me}} = Sandboxd.execute(conn, "return P.self()", tools: tools)
    refute me == reader
  end

  test "cancel ends a running execution with :cancelled", %{conn: conn} do
    {:ok, p} = Sandboxd.execute_async(conn, "print('started') while true do end")
    Process.sleep(50)
    :ok = Sandboxd.cancel(p)
    assert {:error, %Error{kind: :cancelled}} = Sandboxd.await(p)
  end

  test "the client's own deadline cancels and reports :timeout", %{conn: conn} do
    assert {:error, %Error{kind: :timeout, message: message}} =
             Sandboxd.execute(conn, "while true do end", timeout_ms: 20_000, client_timeout: 100)

    # the client's deadline ended it (its message), not the daemon's 20 s
    assert message =~ "no answer from sandboxd in time"
    # the connection is still good
    assert {:ok, %Result{value: 1}} = Sandboxd.execute(conn, "return 1")
  end

  test "module references in arguments and values become atoms only for listed modules", %{
    conn: conn
  } do
    tools = %{"T" => %{"kind" => &EchoTool.kind_of/1}}

    assert {:ok, %Result{value: ["atom:Elixir.Sandboxd.Test.EchoTool", "map", EchoTool]}} =
             Sandboxd.execute(
               conn,
               "local m = {__module = 'Elixir.Sandboxd.Test.EchoTool'} return T.kind(m), T.kind({__module = 'Elixir.Nope'}), m",
               tools: tools,
               modules: %{"Elixir.Sandboxd.Test.EchoTool" => EchoTool}
             )
  end

  test "a value JSON cannot carry is a catchable tool error", %{conn: conn} do
    tools = %{
      "T" => %{
        "ref" => fn -> make_ref() end,
        "huge" => fn -> 1 <<< 70 end,
        "bad" => fn -> <<0xFF, ?a>> end
      }
    }

    assert {:ok, %Result{value: [false, m1, false, m2, "\uFFFDa"]}} =
             Sandboxd.execute(
               conn,
               "local a, b = pcall(T.ref) local c, d = pcall(T.huge) return a, b, c, d, T.bad()",
               tools: tools
             )

    assert m1 =~ "reference"
    assert m2 =~ "64-bit"
  end

  test "describe, ping, prompt_info", %{conn: conn} do
    assert {:ok, %{}} = Sandboxd.ping(conn)
    assert {:ok, %{"name" => "sandboxd"}} = Sandboxd.describe(conn)

    assert {:ok, %{"language" => "Lua 5.3", "constraints" => _, "tool_usage" => _}} =
             Sandboxd.prompt_info(conn)

    assert conn.info["daemon"]["max_message_bytes"] == 16_777_216
  end

  test "live output reaches on_output when the daemon streams it", %{conn: conn} do
    me = self()

    {:ok, r} =
      Sandboxd.execute(conn, "print('a') print('b') return 1", on_output: &send(me, {:out, &1}))

    assert r.output == "a\nb\n"

    if "stream_output" in Sandboxd.features(conn) do
      assert_received {:out, _}
    end
  end

  test "sessions keep functions between chunks when the daemon has them", %{conn: conn} do
    if "sessions" in Sandboxd.features(conn) do
      {:ok, s} = Sandboxd.open_session(conn, tools: %{"T" => %{"inc" => fn x -> x + 1 end}})

      assert {:ok, %Result{value: nil}} =
               Sandboxd.execute(s, "function f(x) return T.inc(x) * 2 end n = 1")

      assert {:ok, %Result{value: 4}} = Sandboxd.execute(s, "return f(n)")
      assert {:ok, %{"binding_names" => ["n"], "bindings" => b}} = Sandboxd.snapshot(s)
      # a snapshot restores in a stateless execute
      assert {:ok, %Result{value: 1}} = Sandboxd.execute(conn, "return n", bindings: b)
      assert :ok = Sandboxd.close_session(s)
      assert {:error, %Error{kind: :session_not_found}} = Sandboxd.execute(s, "return 1")
    else
      assert {:error, %Error{kind: :method_not_found}} = Sandboxd.open_session(conn)
    end
  end

  test "a session survives a Lua error and ends with a limit (session_closed)", %{conn: conn} do
    if "sessions" in Sandboxd.features(conn) do
      {:ok, s} = Sandboxd.open_session(conn)
      assert {:ok, _} = Sandboxd.execute(s, "function g() return 7 end")
      assert {:error, %Error{kind: :runtime_error}} = Sandboxd.execute(s, "error('x')")

      assert {:ok, %Result{value: 7, bindings: [_ | _]}} =
               Sandboxd.execute(s, "k = 1 return g()", return_bindings: true)

      assert {:error, %Error{kind: :timeout, data: %{"session_closed" => true}}} =
               Sandboxd.execute(s, "while true do end", timeout_ms: 100)

      assert {:error, %Error{kind: :session_not_found}} = Sandboxd.execute(s, "return g()")
    end
  end

  @tag capture_log: true
  test "a line longer than max_line_bytes closes the connection: the caller gets :unavailable" do
    {:ok, conn} = Sandboxd.connect(max_line_bytes: 10_000)

    assert {:error, %Error{kind: :unavailable}} =
             Sandboxd.execute(conn, "return string.rep('x', 20000)")
  end

  test "no daemon at the socket is :unavailable" do
    assert {:error, %Error{kind: :unavailable, reason: :enoent}} =
             Sandboxd.connect(socket: "/nonexistent/sandboxd.sock")
  end

  test "the JSON backend on this machine keeps nil, floats and nesting" do
    assert Sandboxd.JSON.backend() in [:elixir, :jason, :jiffy]
    line = IO.iodata_to_binary(Sandboxd.JSON.encode!(%{"a" => [nil, 1, 1.0, "é", %{}]}))
    refute line =~ "\n"
    assert {:ok, %{"a" => [nil, 1, f, "é", %{}]}} = Sandboxd.JSON.decode(line)
    assert is_float(f)
  end

  describe "parallel (when the daemon has it)" do
    # a() waits until b() has been called: only calls served at once finish
    # it; served one after another, a() gives up first.
    defp rendezvous_tools do
      coord =
        spawn(fn ->
          receive do
            {:a, pa} ->
              receive do
                {:b, _} -> send(pa, :go)
              end
          end
        end)

      %{
        "T" => %{
          "a" => fn ->
            send(coord, {:a, self()})

            receive do
              :go -> "a"
            after
              300 -> "a gave up"
            end
          end,
          "b" => fn -> send(coord, {:b, self()}) && "b" end,
          "who" => fn -> inspect(self()) end
        }
      }
    end

    @code "return parallel(function() return T.a() end, function() return T.b() end)"

    test "tool_calls: :concurrent runs the calls of parallel at once, in processes of the caller",
         %{conn: conn} do
      if "parallel" in Sandboxd.features(conn) do
        assert {:ok, %Result{value: ["a", "b"]}} =
                 Sandboxd.execute(conn, @code, tools: rendezvous_tools(), tool_calls: :concurrent)

        me = inspect(self())

        assert {:ok, %Result{value: [w1, w2]}} =
                 Sandboxd.execute(conn, "return parallel(T.who, T.who)",
                   tools: rendezvous_tools(),
                   tool_calls: :concurrent
                 )

        assert w1 != me and w2 != me and w1 != w2
      end
    end

    test "by default the calls of parallel run one at a time in the caller", %{conn: conn} do
      if "parallel" in Sandboxd.features(conn) do
        assert {:ok, %Result{value: ["a gave up", "b"]}} =
                 Sandboxd.execute(conn, @code, tools: rendezvous_tools())

        me = inspect(self())

        assert {:ok, %Result{value: [^me, ^me]}} =
                 Sandboxd.execute(conn, "return parallel(T.who, T.who)", tools: rendezvous_tools())
      end
    end

    test "a concurrent tool that throws still ends the execution as tool_aborted", %{conn: conn} do
      if "parallel" in Sandboxd.features(conn) do
        tools = %{
          "T" => %{"t" => fn -> throw(:stop) end, "slow" => fn -> Process.sleep(5000) end}
        }

        assert {:error, %Error{kind: :tool_aborted, reason: {:throw, :stop}}} =
                 Sandboxd.execute(conn, "return parallel(T.slow, T.t)",
                   tools: tools,
                   tool_calls: :concurrent
                 )
      end
    end
  end
end
