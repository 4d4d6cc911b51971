defmodule Sandboxd.Value do
  @moduledoc """
  Conversion of Elixir terms to the JSON the daemon takes (tool results,
  tool arguments nowhere else) and of decoded JSON back to Elixir terms,
  following the rules of Legion's Lua sandbox (`Legion.Sandbox.Lua`):

  Elixir to JSON (`to_json/1`):

  | Elixir | JSON / Lua |
  | --- | --- |
  | `nil`, `true`, `false` | `null` / `nil`, booleans |
  | other atoms | strings (`:ok` is `"ok"`, a module is `"Elixir.Name"`) |
  | integers (signed 64-bit) | integers; outside that range: an error |
  | floats | numbers with a fraction (the float subtype survives) |
  | binaries | strings; bytes that are not UTF-8 become U+FFFD |
  | lists, tuples | arrays (`{:ok, 42}` is `["ok", 42]`) |
  | structs | their fields, as a map (`__struct__` left out) |
  | maps whose keys are exactly `1..n` | arrays (Lua sees the same sequence) |
  | other maps | objects; keys become strings (atoms and numbers written out, entries with list, map or tuple keys dropped) |
  | functions | `null` (a host closure never reaches Lua) |
  | pids, references, ports, improper lists, bitstrings | `{:error, reason}`: the tool call fails with a catchable Lua error |

  JSON to Elixir (`from_json/2`): objects are maps with string keys, arrays
  lists; an object whose `"__module"` names one of the modules in `refs` (a
  map from `"Elixir.Name"` to the module atom) becomes that atom, so a Lua
  tool table passed to a tool or returned arrives as the module. No atom is
  ever created from wire data.
  """

  @int_min -0x8000000000000000
  @int_max 0x7FFFFFFFFFFFFFFF

  @doc """
  Converts `term` into JSON-ready data. Returns `{:ok, data}` or
  `{:error, message}` naming the first value JSON cannot carry.
  """
  @spec to_json(term) :: {:ok, term} | {:error, String.t()}
  def to_json(term) do
    {:ok, conv(term)}
  catch
    {__MODULE__, message} -> {:error, message}
  end

  defp conv(nil), do: nil
  defp conv(true), do: true
  defp conv(false), do: false
  defp conv(a) when is_atom(a), do: Atom.to_string(a)

  defp conv(i) when is_integer(i) do
    if i < @int_min or i > @int_max,
      do: fail("the integer #{i} is outside Lua's 64-bit range"),
      else: i
  end

  defp conv(f) when is_float(f), do: f
  defp conv(b) when is_binary(b), do: utf8(b)
  defp conv(l) when is_list(l), do: list(l, [])
  defp conv(t) when is_tuple(t), do: list(Tuple.to_list(t), [])
  defp conv(%_{} = s), do: s |> Map.from_struct() |> conv()
  defp conv(m) when is_map(m), do: map(m)
  defp conv(f) when is_function(f), do: nil
  defp conv(p) when is_pid(p), do: fail("cannot encode #{inspect(p)}: a pid has no Lua value")

  defp conv(r) when is_reference(r),
    do: fail("cannot encode #{inspect(r)}: a reference has no Lua value")

  defp conv(p) when is_port(p), do: fail("cannot encode #{inspect(p)}: a port has no Lua value")
  defp conv(b) when is_bitstring(b), do: fail("cannot encode a bitstring of #{bit_size(b)} bits")

  defp list([], acc), do: :lists.reverse(acc)
  defp list([h | t], acc), do: list(t, [conv(h) | acc])
  defp list(_improper, _acc), do: fail("cannot encode an improper list")

  defp map(m) do
    n = map_size(m)

    if n > 0 and sequence?(m, n) do
      for i <- 1..n, do: conv(:erlang.map_get(i, m))
    else
      for {k, v} <- m, key = key(k), key != nil, into: %{}, do: {key, conv(v)}
    end
  end

  defp sequence?(m, n), do: Enum.all?(1..n, &:erlang.is_map_key(&1, m))

  defp key(k) when is_binary(k), do: utf8(k)
  defp key(k) when is_atom(k), do: Atom.to_string(k)
  defp key(k) when is_integer(k), do: Integer.to_string(k)
  defp key(k) when is_float(k), do: Float.to_string(k)
  defp key(_), do: nil

  defp fail(message), do: throw({__MODULE__, message})

  @doc """
  Returns `binary` when it is valid UTF-8, else a copy with each invalid
  byte replaced by U+FFFD (as the daemon does in the other direction).
  """
  @spec utf8(binary) :: binary
  def utf8(binary) do
    if String.valid?(binary), do: binary, else: replace_invalid(binary, [])
  end

  defp replace_invalid(<<>>, acc), do: IO.iodata_to_binary(:lists.reverse(acc))

  defp replace_invalid(<<c::utf8, rest::binary>>, acc),
    do: replace_invalid(rest, [<<c::utf8>> | acc])

  defp replace_invalid(<<_, rest::binary>>, acc), do: replace_invalid(rest, ["\uFFFD" | acc])

  @doc """
  Converts decoded JSON into Elixir terms, turning objects marked with a
  listed module's `"__module"` into that module's atom. With an empty
  `refs` the term is returned unchanged.
  """
  @spec from_json(term, %{optional(String.t()) => module}) :: term
  def from_json(term, refs) when map_size(refs) == 0, do: term
  def from_json(term, refs), do: back(term, refs)

  defp back(%{"__module" => name} = m, refs) when is_binary(name) do
    case refs do
      %{^name => module} -> module
      _ -> Map.new(m, fn {k, v} -> {k, back(v, refs)} end)
    end
  end

  defp back(m, refs) when is_map(m), do: Map.new(m, fn {k, v} -> {k, back(v, refs)} end)
  defp back(l, refs) when is_list(l), do: Enum.map(l, &back(&1, refs))
  defp back(other, _refs), do: other
end
