# A chunk that calls Elixir tools through sandboxd, with the plain client.
#
#   make run                                   # a daemon on build/sandboxd.sock
#   cd client/elixir && SANDBOXD_SOCKET=../../build/sandboxd.sock \
#       mix run ../../examples/elixir-weather.exs
#
# The tools run in this script's process; the Lua runs in a sandboxd worker.

defmodule Example.Weather do
  # Public functions become Weather.get(city) and Weather.cities() in Lua.
  def get(city) do
    temps = %{"Paris" => 21.5, "Oslo" => 9.0, "Lima" => 18.0}

    case temps do
      %{^city => t} -> %{city: city, temp: t, unit: :celsius}
      _ -> raise ArgumentError, "no such city: #{city}"
    end
  end

  def cities, do: ["Paris", "Oslo", "Lima", "Atlantis"]
end

code = """
local report, failed = {}, {}
for _, city in ipairs(Weather.cities()) do
  local ok, w = pcall(Weather.get, city)
  if ok then report[#report + 1] = w.city .. " " .. w.temp .. " " .. w.unit
  else failed[#failed + 1] = w end
end
print(#report .. " cities")
return report, failed
"""

{:ok, conn} = Sandboxd.connect()

case Sandboxd.execute(conn, code, tools: %{"Weather" => Example.Weather}, timeout_ms: 5_000) do
  {:ok, result} ->
    IO.puts("printed: " <> inspect(result.output))
    IO.inspect(result.value, label: "value")
    IO.inspect(result.stats["tool_calls"], label: "tool calls")

  {:error, %Sandboxd.Error{kind: kind, message: message}} ->
    IO.puts(:stderr, "#{kind}: #{message}")
    System.halt(1)
end
