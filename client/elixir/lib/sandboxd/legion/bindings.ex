defmodule Sandboxd.Legion.Bindings do
  @moduledoc false
  # Bindings as Sandboxd.Legion stores them: the daemon's own value
  # (`[[name, typed_value], ...]`, decoded JSON), kept opaque.  Bindings
  # written by Legion.Sandbox.Lua (`[{name, plain_value}, ...]`) are turned
  # into the daemon's typed form, so a conversation that switches sandboxes
  # keeps its variables (docs/protocol.md section 9 has the format).

  @doc false
  @spec to_wire(term) :: term
  def to_wire([]), do: nil
  def to_wire(nil), do: nil

  def to_wire(bindings) when is_list(bindings) do
    if Enum.all?(bindings, &match?({name, _} when is_binary(name), &1)) do
      bindings
      |> Enum.reject(fn {_name, v} -> v == nil end)
      |> Enum.map(fn {name, v} -> [name, typed(v)] end)
      |> Enum.sort_by(&hd/1)
    else
      bindings
    end
  end

  def to_wire(other), do: other

  @doc false
  @spec names(list) :: [String.t()]
  def names(bindings) when is_list(bindings) do
    for b <- bindings do
      case b do
        [name, _] -> name
        {name, _} -> name
      end
    end
  end

  defp typed(true), do: true
  defp typed(false), do: false
  defp typed(i) when is_integer(i), do: i
  defp typed(f) when is_float(f), do: ["f", hexfloat(f)]

  defp typed(b) when is_binary(b) do
    if String.valid?(b), do: b, else: ["b", Base.encode64(b)]
  end

  defp typed(a) when is_atom(a), do: Atom.to_string(a)

  defp typed(l) when is_list(l),
    do: [
      "t",
      l
      |> Enum.with_index(1)
      |> Enum.reject(&(elem(&1, 0) == nil))
      |> Enum.map(fn {v, i} -> [i, typed(v)] end)
    ]

  defp typed(m) when is_map(m) do
    pairs =
      for {k, v} <- m, v != nil, key_ok?(k) do
        {k, [typed(k), typed(v)]}
      end

    ["t", pairs |> Enum.sort_by(fn {k, _} -> rank(k) end) |> Enum.map(&elem(&1, 1))]
  end

  defp typed(t) when is_tuple(t), do: typed(Tuple.to_list(t))

  defp key_ok?(k), do: is_boolean(k) or is_number(k) or is_binary(k)

  # The daemon's order: booleans, integers, floats, then strings bytewise.
  defp rank(k) when is_boolean(k), do: {0, k}
  defp rank(k) when is_integer(k), do: {1, k}
  defp rank(k) when is_float(k), do: {2, k}
  defp rank(k) when is_binary(k), do: {3, k}

  @doc false
  # What C's printf("%a") writes for a double: [-]0x1.<hex>p<exp>, trailing
  # zeros of the fraction left out; subnormals 0x0.<hex>p-1022.
  @spec hexfloat(float) :: String.t()
  def hexfloat(f) do
    <<sign::1, exp::11, mant::52>> = <<f::float>>
    s = if sign == 1, do: "-", else: ""

    cond do
      exp == 0 and mant == 0 -> s <> "0x0p+0"
      exp == 0 -> s <> "0x0." <> frac(mant) <> "p-1022"
      true -> s <> "0x1" <> dot_frac(mant) <> "p" <> signed(exp - 1023)
    end
  end

  defp dot_frac(0), do: ""
  defp dot_frac(mant), do: "." <> frac(mant)

  defp frac(mant) do
    mant
    |> Integer.to_string(16)
    |> String.pad_leading(13, "0")
    |> String.downcase()
    |> String.trim_trailing("0")
  end

  defp signed(e) when e >= 0, do: "+" <> Integer.to_string(e)
  defp signed(e), do: Integer.to_string(e)
end
