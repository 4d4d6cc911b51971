# bench/elixir_legion.exs - what Sandboxd.Legion adds to the daemon's own
# latency, for one execute that makes one tool call.
#
#   make bench-elixir
#   (or: cd client/elixir && MIX_ENV=test mix run ../../bench/elixir_legion.exs [N [ROUNDS]])
#
# One daemon (the test build's TestDaemon: a temporary config and socket),
# one request: `return Add.add(1, 2)` with the one-function tool Add and
# Legion's executor limits.  Four clients take turns, one execution each per
# turn, N turns per round (default 400) in ROUNDS rounds (default 5), so
# load on the machine hits all of them alike:
#
#   c_raw     bench/elixir_raw.c: the daemon's own latency (the baseline),
#             a C client driven one execution at a time through a port
#   beam_raw  :gen_tcp with the request pre-encoded and the tool answer
#             canned (what any BEAM client pays for the socket)
#   sandboxd  Sandboxd.execute/3 on one connection (the plain client)
#   legion    Sandboxd.Legion.execute/5 (Legion's callback: eval process,
#             tool declaration from the module, shared connection)
#
# Prints, as key=value lines, the median and p90 latency of each over all
# turns, and for the per-turn differences legion - c_raw (the figure the
# target "at most +150 us" is about), legion - beam_raw, sandboxd - c_raw
# and legion - sandboxd: the median of each round, and the median of those.
# Then, for the BEAM clients, the CPU time the whole VM spends per execution
# (all its threads, from :erlang.statistics(:runtime) over a block of N
# executions of one client): on a loaded machine wall-clock differences
# swing with the load, while this work is what each layer adds.

defmodule Sandboxd.Bench.Add do
  @moduledoc false
  @behaviour Legion.Tool
  def add(a, b), do: a + b
end

defmodule Sandboxd.Bench do
  @moduledoc false
  import Bitwise

  @code "return Add.add(1, 2)"
  @limits [max_heap: 256_000_000, max_reductions: :infinity, priority: :low]

  def request_line do
    ~s({"jsonrpc":"2.0","id":1,"method":"execute","params":{"code":"#{@code}",) <>
      ~s("tools":[{"name":"Add","module":"Elixir.Sandboxd.Bench.Add","functions":[{"name":"add","arities":[2]}]}],) <>
      ~s("timeout_ms":10000,"limits":{"max_heap":256000000,"max_reductions":"infinity","priority":"low"}}})
  end

  def c_raw_start(bin, socket) do
    Port.open({:spawn_executable, bin}, [
      :binary,
      {:line, 64},
      args: [socket, "-", request_line()]
    ])
  end

  def c_raw(port) do
    send(port, {self(), {:command, "go\n"}})

    receive do
      {^port, {:data, {:eol, us}}} -> String.to_float(us)
    end
  end

  def beam_raw_start(socket) do
    {:ok, s} =
      :gen_tcp.connect({:local, socket}, 0, [
        :binary,
        packet: :line,
        active: false,
        buffer: 1 <<< 20
      ])

    s
  end

  def beam_raw(s), do: timed(fn -> beam_one(s, [request_line(), ?\n]) end)

  defp beam_one(s, line) do
    :ok = :gen_tcp.send(s, line)
    beam_wait(s)
  end

  defp beam_wait(s) do
    {:ok, reply} = :gen_tcp.recv(s, 0)

    case :binary.match(reply, ~s("method":"tool/call")) do
      :nomatch ->
        if :binary.match(reply, ~s("result":)) == :nomatch, do: raise(reply)
        :ok

      _ ->
        [_, rest] = :binary.split(reply, ~s("id":"))
        [id, _] = :binary.split(rest, ~s("))
        :ok = :gen_tcp.send(s, [~s({"jsonrpc":"2.0","id":"), id, ~s(","result":3}\n)])
        beam_wait(s)
    end
  end

  def sandboxd(conn) do
    tools = [Sandboxd.Tool.from_module("Add", Sandboxd.Bench.Add)]
    opts = [tools: tools, timeout_ms: 10_000, limits: Map.new(@limits)]
    timed(fn -> {:ok, %{value: 3}} = Sandboxd.execute(conn, @code, opts) end)
  end

  def legion do
    timed(fn ->
      {:ok, {3, []}} = Sandboxd.Legion.execute(@code, 10_000, [Sandboxd.Bench.Add], [], @limits)
    end)
  end

  defp timed(fun) do
    t0 = System.monotonic_time(:nanosecond)
    fun.()
    (System.monotonic_time(:nanosecond) - t0) / 1000
  end

  def pct(samples, p) do
    sorted = Enum.sort(samples)
    Enum.at(sorted, min(length(sorted) - 1, max(0, ceil(p / 100 * length(sorted)) - 1)))
  end

  def f1(x), do: :erlang.float_to_binary(x / 1, decimals: 1)
end

alias Sandboxd.Bench

{n, rounds} =
  case System.argv() do
    [n, r] -> {String.to_integer(n), String.to_integer(r)}
    [n] -> {String.to_integer(n), 5}
    [] -> {400, 5}
  end

root = Path.expand("../..", File.cwd!())
raw_bin = Path.join(System.tmp_dir!(), "sandboxd-elixir-raw-#{System.os_time()}")

{_, 0} =
  System.cmd(
    "cc",
    ~w(-std=c11 -D_GNU_SOURCE -O2 -I#{root}/bench -o #{raw_bin} #{root}/bench/elixir_raw.c -ljansson),
    stderr_to_stdout: true
  )

daemon = Sandboxd.TestDaemon.start(%{"daemon" => %{"pool_size" => 4, "max_workers" => 8}})
Application.put_env(:sandboxd, :socket, daemon.socket)
{:ok, conn} = Sandboxd.connect()
port = Bench.c_raw_start(raw_bin, daemon.socket)
sock = Bench.beam_raw_start(daemon.socket)

turn = fn -> {Bench.c_raw(port), Bench.beam_raw(sock), Bench.sandboxd(conn), Bench.legion()} end
for _ <- 1..100, do: turn.()
passes = for _ <- 1..rounds, do: for(_ <- 1..n, do: turn.())

cpu_per_exec = fn f ->
  {t0, _} = :erlang.statistics(:runtime)
  for _ <- 1..n, do: f.()
  {t1, _} = :erlang.statistics(:runtime)
  (t1 - t0) * 1000 / n
end

cpu = [
  beam_raw: cpu_per_exec.(fn -> Bench.beam_raw(sock) end),
  sandboxd: cpu_per_exec.(fn -> Bench.sandboxd(conn) end),
  legion: cpu_per_exec.(fn -> Bench.legion() end)
]

Port.close(port)
File.rm(raw_bin)
Sandboxd.TestDaemon.stop(daemon)

col = fn turns, i -> Enum.map(turns, &elem(&1, i)) end
names = [c_raw: 0, beam_raw: 1, sandboxd: 2, legion: 3]
all = Enum.concat(passes)

IO.puts("n=#{n}\nrounds=#{rounds}\njson=#{Sandboxd.JSON.backend()}")

for {k, i} <- names do
  xs = col.(all, i)

  IO.puts(
    "#{k}_p50_us=#{Bench.f1(Bench.pct(xs, 50))}\n#{k}_p90_us=#{Bench.f1(Bench.pct(xs, 90))}"
  )
end

for {a, b} <- [legion: :c_raw, legion: :beam_raw, sandboxd: :c_raw, legion: :sandboxd] do
  per_round =
    for turns <- passes do
      Enum.zip_with(col.(turns, names[a]), col.(turns, names[b]), &(&1 - &2)) |> Bench.pct(50)
    end

  IO.puts(
    "#{a}_minus_#{b}_us=#{Bench.f1(Bench.pct(per_round, 50))}  # rounds: #{Enum.map_join(per_round, ",", &Bench.f1/1)}"
  )
end

for {k, us} <- cpu, do: IO.puts("#{k}_vm_cpu_us_per_exec=#{Bench.f1(us)}")

IO.puts(
  "legion_over_c_raw=#{:erlang.float_to_binary(Bench.pct(col.(all, 3), 50) / Bench.pct(col.(all, 0), 50), decimals: 3)}"
)
