defmodule Sandboxd.LegionTest do
  @moduledoc """
  Legion's Lua sandbox test cases (legion.md section 5, from Legion's
  `test/legion/sandbox/lua_test.exs`), run through Sandboxd.Legion against
  the real daemon. Each test is named after the Legion behaviour it checks;
  where sandboxd deliberately differs, the test says so and checks
  sandboxd's behaviour instead (see the README's list of differences).
  """
  use ExUnit.Case, async: true
  import Bitwise

  alias Sandboxd.Legion, as: L
  alias Sandboxd.Test.{EchoTool, OtherTool, PlainModule}

  @t 10_000
  @tools [EchoTool]

  defp ok!(code, tools \\ @tools, bindings \\ [], limits \\ []) do
    assert {:ok, {value, bindings}} = L.execute(code, @t, tools, bindings, limits)
    {value, bindings}
  end

  defp err!(code, tools \\ @tools, bindings \\ [], limits \\ [], timeout \\ @t) do
    assert {:error, reason} = L.execute(code, timeout, tools, bindings, limits)
    reason
  end

  describe "results and bindings" do
    test "a global assignment is returned as a binding and restored into the next run" do
      {nil, b} = ok!("x = 40")
      assert L.binding_names(b) == ["x"]
      assert {42, _} = ok!("return x + 2", @tools, b)
    end

    test "a chunk with no return gives nil" do
      assert {nil, _} = ok!("local y = 1")
    end

    test "several return values give a list" do
      assert {[1, 2], _} = ok!("return 1, 2")
    end

    test "locals do not persist, globals do" do
      {nil, b} = ok!("local a = 1; b = 2")
      assert L.binding_names(b) == ["b"]
      assert {[nil, 2], _} = ok!("return a, b", @tools, b)
    end

    test "bindings survive term_to_binary and still work with tool calls" do
      {nil, b} = ok!("count = EchoTool.add(1, 2)")
      b = b |> :erlang.term_to_binary() |> :erlang.binary_to_term()
      assert L.binding_names(b) == ["count"]
      assert {13, _} = ok!("return EchoTool.add(count, 10)", @tools, b)
    end

    test "binding_names lists user globals only, and [] for no bindings" do
      {nil, b} = ok!("count = 1; items = {1, 2}; local tmp = 3; function helper() end")
      assert L.binding_names(b) == ["count", "items"]
      assert L.binding_names([]) == []
    end

    test "export keeps plain data and drops locals, functions, stored tool functions and cycles" do
      code = """
      count = 3; flag = false
      items = {{x = 1}, {x = 2, tags = {"a", "b"}}}
      cyclic = {}; cyclic.self = cyclic
      local hidden = 1
      function helper() return 1 end
      saved = EchoTool.add
      """

      {nil, b} = ok!(code)
      assert L.binding_names(b) == ["count", "cyclic", "flag", "items"]

      assert {[3, false, 2, [], "nil", "nil"], _} =
               ok!("return count, flag, items[2].x, cyclic, type(helper), type(saved)", @tools, b)
    end

    test "rebinding _G does not change what is exported" do
      {_, b} = ok!("_G = nil; x = 1")
      assert L.binding_names(b) == ["x"]
      {_, b} = ok!("_G = {evil = 1}; y = 2")
      assert L.binding_names(b) == ["y"]
    end

    test "a tool removed from the list is unreachable from restored bindings" do
      {_, b} = ok!("stash = EchoTool.add; ref = EchoTool")
      assert {["nil", "table"], _} = ok!("return type(stash), type(ref)", [], b)
      reason = err!("return EchoTool.add(1, 2)", [], b)
      assert reason =~ "attempt to index a nil value"
    end

    test "a stored tool reference resolves against the tools of the run that reads it" do
      {_, b} = ok!("planner = OtherTool", [EchoTool, OtherTool])

      assert {"atom:Elixir.Sandboxd.Test.OtherTool", _} =
               ok!("return EchoTool.kind_of(planner)", [EchoTool, OtherTool], b)

      # Without OtherTool in this run's list the table stays inert data.
      assert {"map", _} = ok!("return EchoTool.kind_of(planner)", [EchoTool], b)
    end

    test "a global shadowing a tool name does not persist or break later runs" do
      {_, b} = ok!("EchoTool = 1; other = 2")
      assert L.binding_names(b) == ["other"]
      assert {3, _} = ok!("return EchoTool.add(1, 2)", @tools, b)
    end

    test "bindings written by Legion.Sandbox.Lua ({name, value} pairs) are restored" do
      legacy = [
        {"n", 1},
        {"f", 1.5},
        {"s", "hi"},
        {"bytes", <<0xFF, 0>>},
        {"l", [1, 2]},
        {"m", %{"k" => 1, 2 => true}}
      ]

      {v, b} = ok!("return n, f, math.type(f), s, #bytes, l[2], m.k, m[2]", @tools, legacy)
      assert v == [1, 1.5, "float", "hi", 2, 2, 1, true]
      assert L.binding_names(b) == ["bytes", "f", "l", "m", "n", "s"]
    end
  end

  describe "check and errors" do
    test "a parse error says Failed to compile Lua!" do
      assert {:error, m} = L.check("local x =;", @tools)
      assert m =~ "Failed to compile Lua!"
      assert err!("local x =;") =~ "Failed to compile Lua!"
    end

    test "every compile error carries the note about return <expression>" do
      assert {:error, m} = L.check("x = 1\nx", @tools)
      assert m =~ "`return <expression>`"
      # a syntax error the daemon gives no hint for ("unexpected symbol
      # near ';'") gets the note too, as Legion appends it to every one
      assert {:error, m2} = L.check("local x =;", @tools)
      assert m2 =~ "near ';'" and m2 =~ "`return <expression>`"
      assert err!("local x =;") =~ "`return <expression>`"
      assert err!("x = 1\nx") =~ "`return <expression>`"
    end

    test "check accepts valid code and refuses non-binaries and oversized code" do
      assert L.check("return 1", @tools) == :ok
      assert L.check(:nope, @tools) == {:error, "code must be a binary, got: :nope"}
      big = String.duplicate(" ", 65_537)
      assert L.check(big, @tools) == {:error, "code exceeds maximum size of 65536 bytes"}
      assert {:error, "code exceeds maximum size of 65536 bytes"} = L.execute(big, @t, @tools)
    end

    test "error('boom') gives an error string containing boom" do
      assert err!("error('boom')") =~ "boom"
    end

    test "os.getenv is not there (Legion: 'sandboxed'; sandboxd: absent)" do
      assert err!("return os.getenv('HOME')") =~ "getenv"
    end

    test "print is captured by sandboxd instead of raising 'sandboxed' (deliberate difference)" do
      assert {"done", _} = ok!("print('hi'); return 'done'")
    end

    test "debug is absent (Legion: a raising function; sandboxd: nil)" do
      assert err!("return debug.setmetatable") =~ "attempt to index a nil value"
      assert err!("debug(1)") =~ "attempt to call a nil value"
    end

    test "coroutines are available in sandboxd (deliberate difference)" do
      assert {[true, 1], _} =
               ok!("return coroutine.resume(coroutine.create(function() return 1 end))")
    end
  end

  describe "limits" do
    test "string.rep past half of max_heap is 'resulting string too large'" do
      assert err!("return string.rep('x', 6000000)", @tools, [], max_heap: 10_000_000) =~
               "resulting string too large"
    end

    test "while true do end with a 100 ms timeout is {:error, :timeout}" do
      assert err!("while true do end", @tools, [], [], 100) == :timeout
    end

    test "a long loop over max_reductions is the reduction (CPU) limit" do
      reason = err!("for i = 1, 1e8 do end", @tools, [], max_reductions: 1_000_000)
      assert reason =~ "reduction (CPU) limit"
    end

    test "a heap hog is the memory limit" do
      code = "local t = {} for i = 1, 1e8 do t[i] = i end"
      assert err!(code, @tools, [], max_heap: 10_000_000) =~ "memory limit"
    end

    test "max_heap below any real heap still bounds the eval" do
      assert err!("return 1", @tools, [], max_heap: 4) =~ "memory limit"
    end

    test "ordinary evals are untouched by heap or reduction budgets" do
      assert {3, _} =
               ok!("return 1 + 2", @tools, [], max_heap: 256_000_000, max_reductions: 10_000_000)
    end

    test "max_heap: 0 is refused as ambiguous, as Legion's Runner refuses it" do
      assert_raise ArgumentError,
                   "max_heap: 0 is ambiguous - pass :infinity to disable the limit",
                   fn ->
                     L.execute("return 1", @t, @tools, [], max_heap: 0)
                   end
    end

    test ":infinity timeout, heap and reductions run (lowered to the daemon's ceilings)" do
      assert {:ok, {1, _}} =
               L.execute("return 1", :infinity, @tools, [],
                 max_heap: :infinity,
                 max_reductions: :infinity
               )
    end

    test "priority defaults to :low and can be set to :normal; :max is accepted" do
      assert {"low", _} = ok!("return EchoTool.priority()")
      assert {"normal", _} = ok!("return EchoTool.priority()", @tools, [], priority: :normal)
      assert {_, _} = ok!("return 1", @tools, [], priority: :max)
    end
  end

  describe "tools" do
    test "arity dispatch picks the function by argument count" do
      assert {[3, 6], _} = ok!("return EchoTool.add(1, 2), EchoTool.add(1, 2, 3)")
    end

    test "a wrong argument count names the arities" do
      assert err!("return EchoTool.add(1)") =~ "EchoTool.add takes 2 or 3 argument(s), got 1"
    end

    test "tables arrive as string-keyed maps and lists; atoms come back as strings" do
      assert {%{"received" => %{"name" => "ada", "tags" => [1, 2]}, "tag" => "ok"}, _} =
               ok!("return EchoTool.shape({name = 'ada', tags = {1, 2}})")
    end

    test "a list of 40 structs arrives as ipairs-able tables of their fields" do
      code =
        "local ids = {} for _, it in ipairs(EchoTool.items(40)) do ids[#ids + 1] = it.id end return ids"

      assert {ids, _} = ok!(code)
      assert ids == Enum.to_list(1..40)
    end

    test "{:ok, 42} from a tool arrives as {'ok', 42}" do
      assert {["ok", 42], _} = ok!("return EchoTool.ok_tuple()")
      assert {42, _} = ok!("local status, v = table.unpack(EchoTool.ok_tuple()) return v")
    end

    test "a function in a tool result is nil, calling it fails, and it is not kept in bindings" do
      assert {["nil", 1], _} = ok!("local r = EchoTool.with_fun() return type(r.f), r.x")
      assert err!("return EchoTool.with_fun().f()") =~ "attempt to call a nil value"
      {_, b} = ok!("kept = EchoTool.with_fun()")
      assert {["nil", 1], _} = ok!("return type(kept.f), kept.x", @tools, b)
    end

    test "a tool raise is a catchable error naming EchoTool.boom and the message" do
      reason = err!("return EchoTool.boom()")
      assert reason =~ "EchoTool.boom" and reason =~ "tool exploded"
      assert {[false, msg], _} = ok!("return pcall(EchoTool.boom)")
      assert msg =~ "EchoTool.boom: tool exploded"
    end

    test "a tool throw or exit ends the execution as {:throw, v} / {:exit, r}" do
      assert err!("pcall(EchoTool.escape) return 1") == {:throw, :tool_escaped}
      assert err!("pcall(EchoTool.quit) return 1") == {:exit, :tool_exited}
    end

    test "a non-tool module is reference-only but resolves to its atom when passed to a tool" do
      tools = [EchoTool, PlainModule]
      assert err!("return PlainModule.secret()", tools) =~ "attempt to call a nil value"
      assert {"Elixir.Sandboxd.Test.PlainModule", _} = ok!("return PlainModule.__module", tools)

      assert {"atom:Elixir.Sandboxd.Test.PlainModule", _} =
               ok!("return EchoTool.kind_of(PlainModule)", tools)
    end

    test "a returned tool table comes back as the module atom" do
      assert {EchoTool, _} = ok!("return EchoTool")
      assert {[PlainModule, 1], _} = ok!("return PlainModule, 1", [EchoTool, PlainModule])
    end

    test "a spoofed __module resolves only for listed modules" do
      assert {%{"__module" => "Elixir.Sandboxd.Test.OtherTool"}, _} =
               ok!("return {__module = 'Elixir.Sandboxd.Test.OtherTool'}")

      assert {"map", _} = ok!("return EchoTool.kind_of({__module = 'Elixir.File'})")
    end

    test "Erlang modules in the tool list are left out" do
      assert {nil, _} = ok!("return erlang", [EchoTool, :erlang, :lists])
    end

    test "description/0, description/1, summary/0 and extra_allowed_modules/0 are not bridged" do
      for f <- ~w(description summary extra_allowed_modules) do
        assert err!("return EchoTool.#{f}()") =~ "attempt to call a nil value"
      end
    end

    test "a pid in a tool result is a catchable error" do
      assert {[false, msg], _} = ok!("return pcall(EchoTool.pid)")
      assert msg =~ "EchoTool.pid" and msg =~ "pid"
    end

    test "structs are flattened (a Date's fields, calendar as a string); keyword lists are pairs" do
      assert {%{"year" => 2026, "month" => 12, "day" => 1, "calendar" => "Elixir.Calendar.ISO"},
              _} = ok!("return EchoTool.date()")

      assert {[["a", 1], ["b", 2]], _} = ok!("return EchoTool.keyword()")
    end

    test "the tool runs in a process spawned by the caller, never the connection's" do
      Process.put("agent_id", "agent-7")
      assert {"agent-7", _} = ok!("return EchoTool.dict('agent_id')")
      {:ok, conn} = L.connection()
      assert {[me, callers], _} = ok!("return EchoTool.whoami(), EchoTool.callers()")
      assert inspect(self()) in callers
      refute me in [inspect(self()), inspect(conn.pid)]
    end

    test "many agents at once each get their own results and their own tool context" do
      results =
        1..40
        |> Enum.map(fn i ->
          Task.async(fn ->
            Process.put("agent_id", "agent-#{i}")

            L.execute(
              "return EchoTool.dict('agent_id'), EchoTool.add(#{i}, 1)",
              @t,
              @tools,
              [],
              []
            )
          end)
        end)
        |> Enum.map(&Task.await(&1, 30_000))

      assert results == for(i <- 1..40, do: {:ok, {["agent-#{i}", i + 1], []}})
    end

    test "a function name that is not a Lua identifier is callable when the daemon allows it" do
      {:ok, conn} = L.connection()

      if "any_function_names" in Sandboxd.features(conn) do
        assert {true, _} = ok!("return EchoTool['valid?'](1)")
      else
        assert {nil, _} = ok!("return EchoTool['valid?']")
      end
    end
  end

  describe "prompt" do
    test "language is Lua, constraints mention global, tool_usage mentions Lua" do
      info = L.prompt_info()
      assert info.language == "Lua"
      assert info.constraints =~ "global"
      assert info.tool_usage =~ "Lua"
      assert L.prompt_info() == info
    end
  end
end
