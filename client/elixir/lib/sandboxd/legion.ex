defmodule Sandboxd.Legion do
  @moduledoc """
  A `Legion.Sandbox` that runs the agent's Lua in sandboxd. Switch a Legion
  application to it with one line:

      config :legion, :config, %{sandbox: Sandboxd.Legion}

  The socket is `config :sandboxd, socket: PATH`, else `$SANDBOXD_SOCKET`,
  else `/run/sandboxd/sandboxd.sock`, read whenever a connection is opened.
  Executions share a few connections per socket path (one per scheduler),
  opened on first use and again after they are lost.

  The four callbacks keep `Legion.Sandbox.Lua`'s signatures and return
  shapes:

    * `execute/5` - `{:ok, {value, bindings}}` or `{:error, reason}`, with
      Legion's reasons: a message string for Lua errors and exceeded limits,
      `:timeout`, `{:throw, v}` / `{:exit, r}` when a tool threw or exited,
      `{:process_crashed, reason}` when the worker died otherwise. A daemon
      that is down or busy gives a message string the model can read (the
      code did not run); it never raises.
    * `check/2` - the code must be a binary of at most the daemon's
      `max_code_bytes`; its syntax is checked by the daemon. Compile errors
      carry Legion's note about `return <expression>`.
    * `binding_names/1` - read locally from the bindings.
    * `prompt_info/0` - the daemon's texts plus the Elixir conversion rules,
      fetched once per socket and cached.

  Tools follow Legion: each Elixir module in the list becomes a table named
  after its last segment with `__module` = `"Elixir.Full.Name"`; a module
  whose `@behaviour` list has `Legion.Tool` exposes its public functions (all
  arities) except `description/0`, `description/1`, `summary/0` and
  `extra_allowed_modules/0`; any other module is reference-only; Erlang
  modules are left out. Tool functions run in a process spawned by the
  caller of `execute/5` (through `Legion.Sandbox.Runner` when Legion is
  loaded), never in the connection's process; one at a time by default, as
  under `Legion.Sandbox.Lua`, or each in a process spawned from that one with
  `config :sandboxd, tool_calls: :concurrent`, so that the calls a chunk
  makes under `parallel(f1, f2, ...)` run at once.

  The differences from `Legion.Sandbox.Lua` are listed in the package README.
  """

  alias Sandboxd.{Error, Tool}
  alias Sandboxd.Legion.Bindings

  if Code.ensure_loaded?(Legion.Sandbox), do: @behaviour(Legion.Sandbox)

  @meta_functions [description: 0, description: 1, summary: 0, extra_allowed_modules: 0]
  @note "\nNote: a bare expression is not a valid Lua statement - " <>
          "to produce a value, write `return <expression>`."
  @default_max_code 65_536
  # Added to timeout_ms for the client's own wait: the daemon's clock starts
  # when a worker takes the job, so this covers the queue and the answer.
  @grace_ms 250

  ## check/2

  @doc """
  Checks `code` as `Legion.Sandbox.Lua.check/2` does: a binary, within the
  size limit, that compiles (in a daemon worker). Returns `:ok` or
  `{:error, message}`. With `config :sandboxd, check: :local` the syntax is
  left to `execute/5` (which reports it the same way), as Legion 0.6 does,
  saving a round trip when the executor checks before every execute.
  """
  @spec check(term, [module]) :: :ok | {:error, term}
  def check(code, _tools) when not is_binary(code),
    do: {:error, "code must be a binary, got: #{inspect(code)}"}

  def check(code, _tools) do
    with :ok <- size_ok(code, max_code(nil)) do
      if Application.get_env(:sandboxd, :check, :daemon) == :local,
        do: :ok,
        else: check_remote(code)
    end
  end

  defp check_remote(code) do
    with {:ok, conn} <- connection(),
         {:ok, _} <- Sandboxd.check(conn, code) do
      :ok
    else
      {:error, %Error{} = e} -> {:error, reason(e)}
    end
  end

  ## binding_names/1

  @doc "The names of the globals held in `bindings`, in their stored order (no round trip)."
  @spec binding_names(list) :: [String.t()]
  def binding_names(bindings), do: Bindings.names(bindings)

  ## prompt_info/0

  @doc """
  `%{language: "Lua", constraints: ..., tool_usage: ...}`: the daemon's
  constraints and Legion's conversion rules for Elixir tools. Cached per
  socket path after the first answer; a fixed text when the daemon cannot be
  reached (not cached).
  """
  @spec prompt_info() :: %{language: String.t(), constraints: String.t(), tool_usage: String.t()}
  def prompt_info do
    key = {__MODULE__, :prompt_info, Sandboxd.socket_path()}

    case :persistent_term.get(key, nil) do
      nil ->
        case fetch_prompt_info() do
          {:ok, info} ->
            :persistent_term.put(key, info)
            info

          :error ->
            build_prompt_info(Sandboxd.Legion.Prompt.fallback_constraints())
        end

      info ->
        info
    end
  end

  defp fetch_prompt_info do
    with {:ok, conn} <- connection(),
         {:ok, %{"constraints" => c}} when is_binary(c) <- Sandboxd.prompt_info(conn) do
      {:ok, build_prompt_info(c)}
    else
      _ -> :error
    end
  end

  defp build_prompt_info(constraints) do
    %{
      language: "Lua",
      constraints: constraints <> "\n" <> Sandboxd.Legion.Prompt.elixir_bullets(),
      tool_usage: Sandboxd.Legion.Prompt.tool_usage()
    }
  end

  ## execute/5

  @doc """
  Runs `code` in sandboxd with `tools` (modules), `bindings` (from an
  earlier execute, or `[]`) and `limits` (`max_heap`, `max_reductions`,
  `priority`, as Legion's executor passes them). See the moduledoc.
  """
  @spec execute(String.t(), non_neg_integer | :infinity, [module], term, keyword) ::
          {:ok, {term, term}} | {:error, term}
  def execute(code, timeout_ms, tools \\ [], bindings \\ [], limits \\ [])
      when is_binary(code) and is_list(tools) do
    if Keyword.get(limits, :max_heap) == 0 do
      raise ArgumentError, "max_heap: 0 is ambiguous - pass :infinity to disable the limit"
    end

    case size_ok(code, max_code(nil)) do
      :ok -> run(fn -> eval(code, timeout_ms, tools, bindings, limits) end, timeout_ms, limits)
      error -> error
    end
  end

  # The tool side runs in a process of its own, spawned by the caller:
  # Legion's Runner when it is there (its priority, heap budget and
  # parent-death watcher then cover the tool code, as under
  # Legion.Sandbox.Lua), else an equivalent here.  The Lua budget
  # (max_reductions) is the daemon's; the runner does not count it again.
  defp run(fun, timeout_ms, limits) do
    limits = Keyword.put(limits, :max_reductions, :infinity)

    case runner() do
      nil -> Sandboxd.Legion.Eval.run(fun, limits)
      runner -> runner.run(fun, timeout_ms, limits)
    end
  end

  # `config :sandboxd, legion_runner: nil` turns the Runner off; the lookup
  # of a module that is not there is cached (it searches the code path).
  defp runner do
    case Application.get_env(:sandboxd, :legion_runner, Legion.Sandbox.Runner) do
      nil ->
        nil

      mod ->
        key = {__MODULE__, :runner, mod}

        case :persistent_term.get(key, :unknown) do
          :unknown ->
            found = Code.ensure_loaded?(mod) and function_exported?(mod, :run, 3)
            :persistent_term.put(key, found)
            if found, do: mod

          found ->
            if found, do: mod
        end
    end
  end

  defp eval(code, timeout_ms, modules, bindings, limits, retry? \\ true) do
    with {:ok, conn} <- connection() do
      opts = [
        tools: toolset(modules, "any_function_names" in Sandboxd.features(conn)),
        bindings: Bindings.to_wire(bindings),
        timeout_ms: timeout(timeout_ms, conn),
        limits: Sandboxd.Legion.Limits.map(limits, conn.info),
        client_timeout: if(is_integer(timeout_ms), do: timeout_ms + @grace_ms, else: :infinity),
        tool_calls: Application.get_env(:sandboxd, :tool_calls, :serial)
      ]

      case Sandboxd.execute(conn, code, opts) do
        {:ok, r} ->
          {:ok, {r.value, r.bindings}}

        # The request never reached the daemon (the shared connection died
        # just before: a daemon restart): once more on a new connection.
        {:error, %Error{kind: :unavailable, reason: {:send, _}}} when retry? ->
          Sandboxd.close(conn)
          eval(code, timeout_ms, modules, bindings, limits, false)

        {:error, e} ->
          {:error, reason(e)}
      end
    else
      {:error, e} -> {:error, reason(e)}
    end
  end

  # :infinity, or a number above the daemon's ceiling, is sent as the
  # ceiling when that is a number (the built-in ceiling is 600000 ms).
  defp timeout(ms, conn) do
    case {ms, get_in(conn.info, ["maximums", "timeout_ms"])} do
      {:infinity, max} when is_integer(max) -> max
      {ms, max} when is_integer(ms) and is_integer(max) -> min(ms, max)
      {ms, _} -> ms
    end
  end

  @doc false
  # Legion's modules as daemon tools (a Sandboxd.Toolset), and the module
  # references they allow.  Each module's declaration is built once and kept
  # in :persistent_term with the module's md5, so a reloaded module is
  # declared again.
  @spec toolset([module], boolean) :: Sandboxd.Toolset.t()
  def toolset(modules, any_names?) do
    modules = Enum.filter(modules, &elixir_module?/1)

    entries =
      modules
      |> Enum.map(&declared(&1, any_names?))
      |> Enum.reject(&is_nil/1)
      # Two modules with one short name: the later wins, as in Legion.
      |> Enum.reverse()
      |> Enum.uniq_by(&elem(&1, 0))
      |> Enum.reverse()

    %Sandboxd.Toolset{
      json:
        if(entries != [], do: [?[, Enum.intersperse(Enum.map(entries, &elem(&1, 1)), ?,), ?]]),
      dispatch: Map.new(entries, fn {name, _json, fns} -> {name, fns} end),
      refs: Map.new(modules, &{Atom.to_string(&1), &1})
    }
  end

  defp declared(module, any_names?) do
    key = {__MODULE__, :tool, module, any_names?}

    case :persistent_term.get(key, nil) do
      {md5, entry} ->
        if :erlang.module_loaded(module) and module.module_info(:md5) == md5,
          do: entry,
          else: declare(key, module, any_names?)

      nil ->
        declare(key, module, any_names?)
    end
  end

  defp declare(key, module, any_names?) do
    if Code.ensure_loaded?(module) do
      tool = tool(module)
      {decl, fns} = Tool.declare(tool, any_names?)
      entry = {tool.name, IO.iodata_to_binary(Sandboxd.JSON.encode!(decl)), fns}
      :persistent_term.put(key, {module.module_info(:md5), entry})
      entry
    end
  end

  defp tool(module) do
    name = Tool.short_name(module)

    if legion_tool?(module),
      do: Tool.from_module(name, module, @meta_functions),
      else: %Tool{name: name, module: Atom.to_string(module), functions: []}
  end

  defp elixir_module?(m), do: is_atom(m) and match?("Elixir." <> _, Atom.to_string(m))

  defp legion_tool?(module) do
    Legion.Tool in (module.module_info(:attributes)
                    |> Keyword.get_values(:behaviour)
                    |> List.flatten())
  end

  ## Errors, as Legion reports them

  @doc false
  @spec reason(Error.t()) :: term
  def reason(%Error{kind: :timeout}), do: :timeout
  def reason(%Error{kind: :syntax_error, message: m}), do: compile_error(m)
  def reason(%Error{kind: :crashed} = e), do: {:process_crashed, e.data["reason"] || e.message}

  def reason(%Error{kind: :tool_aborted, reason: {tag, _} = escaped}) when tag in [:throw, :exit],
    do: escaped

  def reason(%Error{kind: :busy, message: m}),
    do: "sandboxd is busy (#{m}); the code did not run - try again"

  def reason(%Error{kind: k, message: m}) when k in [:unavailable, :forbidden],
    do: "sandboxd is unavailable (#{m}); the code did not run"

  def reason(%Error{kind: k, message: m})
      when k in [
             :invalid_params,
             :limit_out_of_range,
             :invalid_request,
             :internal_error,
             :unknown,
             :method_not_found
           ],
      do: "sandboxd refused the execution: #{m}"

  def reason(%Error{message: m}), do: m

  defp compile_error(message) do
    message =
      if String.contains?(message, "`return <expression>`"), do: message, else: message <> @note

    "Failed to compile Lua!\n" <> message
  end

  defp size_ok(code, max) when byte_size(code) > max,
    do: {:error, "code exceeds maximum size of #{max} bytes"}

  defp size_ok(_code, _max), do: :ok

  # The daemon's max_code_bytes once a connection has told it; Legion's
  # 65536 before.
  defp max_code(nil) do
    case lookup({:shared, Sandboxd.socket_path(), :erlang.system_info(:scheduler_id)}) do
      {:ok, conn} -> get_in(conn.info, ["daemon", "max_code_bytes"]) || @default_max_code
      :none -> @default_max_code
    end
  end

  ## The shared connections

  @doc false
  # The connection for the socket in force, opened when there is none: one
  # per socket path and scheduler (the scheduler running the caller picks
  # it), so the answers of many agents are read and decoded by several
  # readers at once.
  @spec connection() :: {:ok, Sandboxd.t()} | {:error, Error.t()}
  def connection do
    key = {:shared, Sandboxd.socket_path(), :erlang.system_info(:scheduler_id)}

    case lookup(key) do
      {:ok, conn} ->
        {:ok, conn}

      :none ->
        :global.trans({{__MODULE__, key}, self()}, fn -> lookup_or_open(key) end, [node()])
    end
  end

  defp lookup_or_open({:shared, path, _} = key) do
    case lookup(key) do
      {:ok, conn} ->
        {:ok, conn}

      :none ->
        with {:ok, conn} <- Sandboxd.connect(socket: path, link: false) do
          case GenServer.call(conn.pid, {:register_shared, key, conn}) do
            :ok -> {:ok, conn}
            # the dead reader's entry is still there: use this one unlisted
            {:error, _} -> {:ok, conn}
          end
        end
    end
  end

  defp lookup(key) do
    # A connection whose reader is gone (the daemon restarted) may stay
    # listed for a moment: it counts as none.
    case Registry.lookup(Sandboxd.Registry, key) do
      [{pid, conn}] -> if Process.alive?(pid), do: {:ok, conn}, else: :none
      [] -> :none
    end
  rescue
    ArgumentError ->
      {:ok, _} = Application.ensure_all_started(:sandboxd)
      :none
  end
end
