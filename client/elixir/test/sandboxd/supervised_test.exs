defmodule Sandboxd.SupervisedTest do
  @moduledoc """
  A connection in a supervision tree (`child_spec/1`), the reader's flow
  control (`active: :once`), and a `@spec` on every public function.
  """
  use ExUnit.Case, async: true

  alias Sandboxd.{Error, Result}

  test "a connection under a Supervisor: reached by name, restarted when it dies" do
    name = :"sandboxd_sup_#{System.unique_integer([:positive])}"
    {:ok, sup} = Supervisor.start_link([{Sandboxd, name: name}], strategy: :one_for_one)
    on_exit(fn -> if Process.alive?(sup), do: Supervisor.stop(sup) end)

    assert [{^name, pid, :worker, [Sandboxd]}] = Supervisor.which_children(sup)
    assert Process.whereis(name) == pid
    tools = %{"T" => %{"me" => fn -> inspect(self()) end}}

    assert {:ok, %Result{value: me}} = Sandboxd.execute(name, "return T.me()", tools: tools)
    assert me == inspect(self()), "the tool ran in the caller, not in the supervised reader"
    assert {:ok, %{}} = Sandboxd.ping(name)
    assert {:ok, %{"ok" => true}} = Sandboxd.check(name, "return 1")
    assert "sessions" in Sandboxd.features(name)
    {:ok, s} = Sandboxd.open_session(name, bindings: [["k", 1]])
    assert {:ok, %Result{value: 1}} = Sandboxd.execute(s, "return k")
    assert :ok = Sandboxd.close_session(s)

    # the reader dies: the supervisor connects again under the same name
    ref = Process.monitor(pid)
    Process.exit(pid, :kill)
    assert_receive {:DOWN, ^ref, :process, ^pid, :killed}
    new = wait_for(fn -> Process.whereis(name) end)
    assert new != pid
    assert {:ok, %Result{value: 2}} = Sandboxd.execute(name, "return 1 + 1")

    # stopping the supervisor closes the connection; the name is gone
    :ok = Supervisor.stop(sup)
    assert {:error, %Error{kind: :unavailable}} = Sandboxd.execute(name, "return 1")
    assert {:error, %Error{kind: :unavailable}} = Sandboxd.whereis(name)
  end

  test "child_spec: id from :name or :id, start_link's options, permanent" do
    assert %{id: Sandboxd, start: {Sandboxd, :start_link, [[]]}, restart: :permanent} =
             Sandboxd.child_spec([])

    assert %{id: :a, start: {Sandboxd, :start_link, [[name: :a, socket: "/x"]]}} =
             Sandboxd.child_spec(name: :a, socket: "/x")

    assert %{id: :b, start: {Sandboxd, :start_link, [[name: :a]]}} =
             Sandboxd.child_spec(name: :a, id: :b)
  end

  test "a supervisor whose daemon is absent fails to start the child" do
    Process.flag(:trap_exit, true)

    assert {:error, {:shutdown, {:failed_to_start_child, Sandboxd, %Error{kind: :unavailable}}}} =
             Supervisor.start_link([{Sandboxd, socket: "/nonexistent/sandboxd.sock"}],
               strategy: :one_for_one
             )
  end

  test "the reader takes one packet at a time (active: :once), and reads on" do
    {:ok, conn} = Sandboxd.connect()
    on_exit(fn -> Sandboxd.close(conn) end)
    # idle: armed for the next packet only (never `true`, which would let
    # the daemon fill the reader's mailbox)
    assert {:ok, [active: :once]} = :inet.getopts(conn.socket, [:active])

    lines = 2000

    assert {:ok, %Result{value: ^lines, output: out}} =
             Sandboxd.execute(conn, "for i = 1, #{lines} do print(i) end return #{lines}",
               on_output: fn _ -> :ok end
             )

    assert length(String.split(out, "\n", trim: true)) == lines
    assert {:ok, [active: :once]} = :inet.getopts(conn.socket, [:active])
    {:messages, msgs} = Process.info(conn.pid, :messages)
    assert msgs == []
  end

  test "every public function of the library has a @spec" do
    {:ok, mods} = :application.get_key(:sandboxd, :modules)

    missing =
      for m <- mods,
          not String.starts_with?(inspect(m), "Sandboxd.Test"),
          {:ok, specs} = Code.Typespec.fetch_specs(m),
          have = for({{f, a}, _} <- specs, do: {f, a}),
          callbacks = callbacks(m),
          {f, a} <- m.__info__(:functions),
          not String.starts_with?(Atom.to_string(f), "__"),
          # f/a with default arguments: one spec for its longest arity
          not Enum.any?(have, fn {g, b} -> g == f and b >= a end),
          {f, a} not in callbacks,
          do: "#{inspect(m)}.#{f}/#{a}"

    assert missing == []
    assert length(mods) >= 15
  end

  defp callbacks(m) do
    for b <- m.module_info(:attributes) |> Keyword.get_values(:behaviour) |> List.flatten(),
        Code.ensure_loaded?(b),
        function_exported?(b, :behaviour_info, 1),
        cb <- b.behaviour_info(:callbacks),
        do: cb
  end

  defp wait_for(fun, tries \\ 200) do
    case fun.() do
      nil when tries > 0 ->
        Process.sleep(10)
        wait_for(fun, tries - 1)

      v ->
        v
    end
  end
end
