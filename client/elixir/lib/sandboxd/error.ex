defmodule Sandboxd.Error do
  @moduledoc """
  An error from the daemon or from reaching it, as a structured term.

    * `kind` - the daemon's `error.data.kind` as an atom from the fixed list
      below (never created from wire data: an unknown kind is `:unknown`, the
      string kept in `data["kind"]`), or `:unavailable` when the daemon could
      not be reached or the connection was lost while waiting.
    * `code`, `message`, `data` - the JSON-RPC error object (`data` with
      string keys; `%{}` when there was none).
    * `output`, `stats` - what the chunk printed before the end and its
      statistics (`nil` when the execution never reached a worker).
    * `reason` - for `:tool_aborted` caused by a tool that threw or exited:
      `{:throw, value}` or `{:exit, reason}`, the term itself; for
      `:unavailable`, the underlying reason (`:enoent`, `:closed`, ...).

  It is also an exception, so `raise` works on it.
  """

  defexception [:kind, :code, :message, data: %{}, output: nil, stats: nil, reason: nil]

  @type kind ::
          :parse_error
          | :invalid_request
          | :message_too_large
          | :method_not_found
          | :invalid_params
          | :limit_out_of_range
          | :internal_error
          | :syntax_error
          | :runtime_error
          | :timeout
          | :memory_limit
          | :reductions_limit
          | :cpu_limit
          | :crashed
          | :code_too_large
          | :busy
          | :forbidden
          | :tool_aborted
          | :bindings_too_large
          | :session_not_found
          | :tool_call_limit
          | :cancelled
          | :unavailable
          | :unknown

  @type t :: %__MODULE__{
          kind: kind,
          code: integer | nil,
          message: String.t(),
          data: map,
          output: String.t() | nil,
          stats: map | nil,
          reason: term
        }

  @kinds ~w(parse_error invalid_request message_too_large method_not_found invalid_params
            limit_out_of_range internal_error syntax_error runtime_error timeout memory_limit
            reductions_limit cpu_limit crashed code_too_large busy forbidden tool_aborted
            bindings_too_large session_not_found tool_call_limit cancelled)
  @kind_atoms Map.new(@kinds, &{&1, String.to_atom(&1)})

  @doc false
  # Builds the error from a JSON-RPC error object (decoded, string keys).
  @spec from_rpc(term) :: t
  def from_rpc(%{} = err) do
    data = if is_map(err["data"]), do: err["data"], else: %{}

    %__MODULE__{
      kind: Map.get(@kind_atoms, data["kind"], :unknown),
      code: err["code"],
      message: if(is_binary(err["message"]), do: err["message"], else: "unknown error"),
      data: data,
      output: data["output"],
      stats: data["stats"]
    }
  end

  def from_rpc(other), do: protocol("malformed error object: #{inspect(other)}")

  @doc false
  @spec unavailable(String.t(), term) :: t
  def unavailable(message, reason),
    do: %__MODULE__{kind: :unavailable, message: message, reason: reason}

  @doc false
  @spec protocol(String.t()) :: t
  def protocol(message), do: %__MODULE__{kind: :unknown, message: message}
end

defmodule Sandboxd.Result do
  @moduledoc """
  The result of an execute: `value` (what the chunk returned: `nil`, one
  value, or a list for several), `bindings` (opaque: hand it back to a later
  execute unchanged), `binding_names`, `output` (what it printed),
  `output_truncated` and `stats` (a map with string keys: `wall_us`,
  `cpu_us`, `reductions`, `heap_peak_bytes`, `tool_calls`).
  """
  defstruct value: nil,
            bindings: [],
            binding_names: [],
            output: "",
            output_truncated: false,
            stats: %{}

  @type t :: %__MODULE__{}
end

defmodule Sandboxd.ToolAbort do
  @moduledoc """
  Raised by a tool to end the whole execution (the daemon answers it with
  `tool_aborted`); any other exception is a Lua error that `pcall` can catch.
  """
  defexception message: "tool aborted the execution"
end
