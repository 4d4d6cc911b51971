defmodule Sandboxd.JSON do
  @moduledoc """
  The one place that encodes and decodes JSON, over whichever library is
  present: Elixir's own `JSON` (Elixir >= 1.18), else `Jason` when the host
  application has it loaded, else `:jiffy` (Debian's `erlang-jiffy`). The
  choice is made once, on first use, and kept in `:persistent_term`.

  Contract, whatever the backend:

    * `encode!/1` takes only what `Sandboxd.Value.to_json/2` produces (nil,
      booleans, integers, floats, UTF-8 binaries, lists, maps with binary
      keys) plus atoms as map keys, and returns one compact line of JSON as
      iodata, never containing a raw newline. It raises on anything else.
    * `decode/1` returns `{:ok, term}` with objects as maps with binary keys,
      arrays as lists, `null` as `nil`, integers and floats kept apart; or
      `{:error, reason}`.

  The backend can be forced with `config :sandboxd, json: :elixir | :jason |
  :jiffy` (read on first use).
  """

  @key {__MODULE__, :backend}

  @doc "Encodes `term` as compact JSON iodata."
  @spec encode!(term) :: iodata
  def encode!(term) do
    case backend() do
      :jiffy -> jiffy().encode(term, [:use_nil])
      :elixir -> elixir_json().encode_to_iodata!(term)
      :jason -> jason().encode_to_iodata!(term)
    end
  end

  @doc "Decodes one JSON text."
  @spec decode(binary) :: {:ok, term} | {:error, term}
  def decode(binary) do
    case backend() do
      :jiffy ->
        try do
          {:ok, jiffy().decode(binary, [:return_maps, :use_nil])}
        catch
          :throw, reason -> {:error, reason}
          :error, reason -> {:error, reason}
        end

      :elixir ->
        elixir_json().decode(binary)

      :jason ->
        jason().decode(binary)
    end
  end

  @doc "The backend in use: `:elixir`, `:jason` or `:jiffy`."
  @spec backend() :: :elixir | :jason | :jiffy
  def backend do
    case :persistent_term.get(@key, nil) do
      nil ->
        chosen = choose()
        :persistent_term.put(@key, chosen)
        chosen

      chosen ->
        chosen
    end
  end

  # Module names held in variables, so that compiling on an Elixir without
  # JSON (or an application without Jason) gives no undefined-module warning.
  defp elixir_json, do: JSON
  defp jason, do: Jason
  defp jiffy, do: :jiffy

  defp choose do
    case Application.get_env(:sandboxd, :json) do
      nil -> detect()
      forced when forced in [:elixir, :jason, :jiffy] -> forced
    end
  end

  defp detect do
    cond do
      # An old Hex package also called its module JSON; Elixir's has
      # encode_to_iodata!/1 and ships with Elixir 1.18 and later.
      Version.match?(System.version(), ">= 1.18.0") and Code.ensure_loaded?(elixir_json()) and
          function_exported?(elixir_json(), :encode_to_iodata!, 1) ->
        :elixir

      Code.ensure_loaded?(jason()) and function_exported?(jason(), :encode_to_iodata!, 1) ->
        :jason

      Code.ensure_loaded?(jiffy()) ->
        :jiffy

      true ->
        raise "Sandboxd.JSON: no JSON library (needs Elixir >= 1.18, Jason, or jiffy)"
    end
  end
end
