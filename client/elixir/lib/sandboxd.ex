defmodule Sandboxd do
  @moduledoc """
  A client for sandboxd, the daemon that runs untrusted Lua 5.3 for agents.

      {:ok, conn} = Sandboxd.connect()
      {:ok, result} =
        Sandboxd.execute(conn, "return Weather.get('Paris').temp",
          tools: %{"Weather" => %{"get" => fn city -> %{temp: 21, city: city} end}}
        )
      result.value #=> 21

  The socket is `:socket` in the options, else `config :sandboxd, socket:`,
  else `$SANDBOXD_SOCKET`, else `/run/sandboxd/sandboxd.sock`.

  ## Processes

  A connection is a reader process (linked to the process that called
  `connect/1`, unless `link: false`) that owns the socket and always reads
  it; several executions may be in flight on one connection, from any
  processes. **Tool functions run in the process that waits for the
  execution** (the caller of `execute/3`, or of `await/2`), never in the
  reader, so they see that process's dictionary, `self()`, and anything found
  through its ancestry (such as Legion's per-agent Vault). Tool calls of one
  execution run one at a time, in the order they arrive (also under the
  daemon's `parallel`, whose calls then run in turn), unless `tool_calls:
  :concurrent` is given: then each call runs in a process spawned by the
  waiting one (its `$callers` and `:parent` lead back to it), so the calls
  of `parallel` overlap. If the waiting process dies, its executions are
  cancelled.

  ## Errors

  Every function returns `{:ok, value}` or `{:error, %Sandboxd.Error{}}`,
  with `kind` the daemon's error kind (`:runtime_error`, `:timeout`,
  `:busy`, ...) or `:unavailable` when the daemon cannot be reached.

  ## Tools

  See `Sandboxd.Tool` for the accepted forms. A tool's return value is
  converted by `Sandboxd.Value.to_json/1` (atoms to strings, tuples to lists,
  structs to maps, functions to nil); a value JSON cannot carry, or a result
  larger than the daemon's `max_message_bytes`, becomes a tool error, which
  Lua can catch. An exception raised by a tool is a Lua error `Name.fn:
  message` that `pcall` can catch; `raise Sandboxd.ToolAbort`, `throw` and
  `exit` end the whole execution with `:tool_aborted` (the thrown value or
  exit reason in the error's `reason` as `{:throw, v}` / `{:exit, r}`).
  """

  alias Sandboxd.{Connection, Error, JSON, Result, Tool}
  import Bitwise, only: [<<<: 2]

  @enforce_keys [:pid, :socket, :info]
  defstruct [:pid, :socket, :info, :path]

  @typedoc "A connection: the reader process, the socket, and the daemon's `describe`."
  @type t :: %__MODULE__{pid: pid, socket: port, info: map, path: String.t()}

  @typedoc """
  A connection, or the name of one started in a supervision tree (see
  `child_spec/1`): every function that takes a connection takes either.
  """
  @type conn :: t | GenServer.name()

  @default_socket "/run/sandboxd/sandboxd.sock"

  defmodule Pending do
    @moduledoc "An execution in flight, from `Sandboxd.execute_async/3`."
    defstruct [:conn, :id, :tag, :tools, :refs, :on_output, :deadline, concurrent: false]
    @type t :: %__MODULE__{}
  end

  defmodule Session do
    @moduledoc "An open session (daemons whose `describe` lists the \"sessions\" feature)."
    defstruct [:conn, :id, :tools, :refs, :timeout_ms]
    @type t :: %__MODULE__{}
  end

  ## Connecting

  @doc """
  The socket path in force: `config :sandboxd, socket:`, else
  `$SANDBOXD_SOCKET`, else `#{@default_socket}`. Read at every call.
  """
  @spec socket_path() :: String.t()
  def socket_path do
    Application.get_env(:sandboxd, :socket) || System.get_env("SANDBOXD_SOCKET") ||
      @default_socket
  end

  @doc """
  Connects to the daemon and reads its `describe`.

  Options: `:socket` (path), `:connect_timeout` (ms, default 5000), `:link`
  (default `true`: the reader is linked to the caller), `:max_line_bytes`
  (the longest line accepted from the daemon; default 1 GiB), `:name` (a
  `GenServer.name()` to register the reader under, so that the name stands
  for the connection).
  """
  @spec connect(keyword) :: {:ok, t} | {:error, Error.t()}
  def connect(opts \\ []) do
    path = Keyword.get_lazy(opts, :socket, &socket_path/0)
    timeout = Keyword.get(opts, :connect_timeout, 5000)
    sock_opts = [:binary, packet: :line, active: false, buffer: 1 <<< 20]

    with {:ok, socket} <- tcp_connect(path, sock_opts, timeout),
         {:ok, info} <- hello(socket, path, timeout) do
      case Connection.start(socket, opts, Keyword.get(opts, :link, true)) do
        {:ok, pid} ->
          conn = %__MODULE__{pid: pid, socket: socket, info: info, path: path}
          :ok = :gen_tcp.controlling_process(socket, pid)
          :ok = GenServer.call(pid, {:activate, conn})
          {:ok, conn}

        {:error, reason} ->
          :gen_tcp.close(socket)

          {:error,
           Error.unavailable("cannot start the connection process: #{inspect(reason)}", reason)}
      end
    end
  end

  @doc """
  A child specification, so that a connection lives in a supervision tree:

      children = [{Sandboxd, name: MyApp.Sandbox, socket: "/run/sandboxd/sandboxd.sock"}]
      Supervisor.start_link(children, strategy: :one_for_one)
      Sandboxd.execute(MyApp.Sandbox, "return 1 + 1")

  The options are `connect/1`'s; `:name` is how the rest of the application
  reaches the connection (every function taking a connection takes the
  name), and the child's id unless `:id` is given. The child is
  `:permanent`: when the daemon closes the connection (a restart, a
  shutdown) the reader stops and the supervisor connects again, subject to
  its restart intensity. Executions in flight when it stops get
  `{:error, %Sandboxd.Error{kind: :unavailable}}`.
  """
  @spec child_spec(keyword) :: Supervisor.child_spec()
  def child_spec(opts) do
    %{
      id: Keyword.get_lazy(opts, :id, fn -> Keyword.get(opts, :name, __MODULE__) end),
      start: {__MODULE__, :start_link, [Keyword.delete(opts, :id)]},
      type: :worker,
      restart: :permanent
    }
  end

  @doc """
  Connects as `connect/1` does, the reader linked to the caller, and returns
  its pid (the start function of `child_spec/1`).
  """
  @spec start_link(keyword) :: {:ok, pid} | {:error, Error.t()}
  def start_link(opts \\ []) do
    with {:ok, conn} <- connect(Keyword.put(opts, :link, true)), do: {:ok, conn.pid}
  end

  @doc """
  The connection a name stands for (`connect/1`'s or `child_spec/1`'s
  `:name`); a connection is returned as it is.
  """
  @spec whereis(conn) :: {:ok, t} | {:error, Error.t()}
  def whereis(%__MODULE__{} = conn), do: {:ok, conn}

  def whereis(name) do
    GenServer.call(name, :conn)
  catch
    :exit, reason ->
      {:error, Error.unavailable("no sandboxd connection named #{inspect(name)}", reason)}
  end

  defp tcp_connect(path, sock_opts, timeout) do
    case :gen_tcp.connect({:local, path}, 0, sock_opts, timeout) do
      {:ok, socket} ->
        {:ok, socket}

      {:error, reason} ->
        {:error,
         Error.unavailable(
           "cannot connect to sandboxd at #{path}: #{:inet.format_error(reason)}",
           reason
         )}
    end
  end

  # describe, read in passive mode before the reader takes the socket.  A
  # daemon that refuses the peer (forbidden, busy) answers with id null.
  defp hello(socket, path, timeout) do
    line = [~s({"jsonrpc":"2.0","id":0,"method":"describe"}), ?\n]

    result =
      with :ok <- :gen_tcp.send(socket, line),
           {:ok, reply} <- recv_line(socket, [], timeout) do
        case JSON.decode(reply) do
          {:ok, %{"id" => 0, "result" => info}} -> {:ok, info}
          {:ok, %{"error" => err}} -> {:error, Error.from_rpc(err)}
          _ -> {:error, Error.protocol("unexpected answer to describe")}
        end
      end

    case result do
      {:ok, _} = ok ->
        ok

      {:error, %Error{} = e} ->
        :gen_tcp.close(socket)
        {:error, e}

      {:error, reason} ->
        :gen_tcp.close(socket)

        {:error,
         Error.unavailable(
           "sandboxd at #{path} closed the connection (#{inspect(reason)})",
           reason
         )}
    end
  end

  defp recv_line(socket, acc, timeout) do
    case :gen_tcp.recv(socket, 0, timeout) do
      {:ok, data} ->
        if String.ends_with?(data, "\n"),
          do: {:ok, IO.iodata_to_binary([acc, data])},
          else: recv_line(socket, [acc, data], timeout)

      {:error, _} = e ->
        e
    end
  end

  @doc "Closes the connection; executions in flight on it are cancelled by the daemon."
  @spec close(conn) :: :ok
  def close(%__MODULE__{pid: pid}), do: close(pid)

  def close(name) do
    GenServer.call(name, :close)
  catch
    :exit, _ -> :ok
  end

  @doc "The daemon's `features` (describe), e.g. `[\"sessions\", \"parallel\"]`."
  @spec features(conn) :: [String.t()]
  def features(%__MODULE__{info: info}), do: List.wrap(info["features"])

  def features(name) do
    case whereis(name) do
      {:ok, conn} -> features(conn)
      {:error, _} -> []
    end
  end

  ## Simple requests

  @doc "`ping`: `{:ok, %{}}` when the daemon answers."
  @spec ping(conn) :: {:ok, map} | {:error, Error.t()}
  def ping(conn), do: call(conn, "ping", %{})

  @doc "`describe`, asked again (the one read at connect is in `conn.info`)."
  @spec describe(conn) :: {:ok, map} | {:error, Error.t()}
  def describe(conn), do: call(conn, "describe", %{})

  @doc "`prompt_info`: `%{\"language\" => ..., \"constraints\" => ..., \"tool_usage\" => ...}`."
  @spec prompt_info(conn, keyword) :: {:ok, map} | {:error, Error.t()}
  def prompt_info(conn, opts \\ []) do
    call(conn, "prompt_info", if(opts[:session], do: %{"session" => true}, else: %{}))
  end

  @doc "`binding_names` by the daemon (it validates the bindings); see also `binding_names/1`."
  @spec binding_names(conn, [term]) :: {:ok, [String.t()]} | {:error, Error.t()}
  def binding_names(conn, bindings), do: call(conn, "binding_names", %{"bindings" => bindings})

  @doc "The names held in `bindings`, read locally (no round trip)."
  @spec binding_names([term]) :: [String.t()]
  def binding_names(bindings) when is_list(bindings), do: for([name, _] <- bindings, do: name)

  @doc "`check`: compiles `code` in a worker. `{:ok, %{\"ok\" => true}}` or a `:syntax_error`."
  @spec check(conn, String.t(), keyword) :: {:ok, map} | {:error, Error.t()}
  def check(conn, code, opts \\ []) do
    with {:ok, conn} <- whereis(conn),
         ts = prepare_tools(conn, Keyword.get(opts, :tools)),
         :ok <- code_size(conn, code) do
      call(conn, "check", put_pair([{"code", code}], "tools", if(ts.json, do: {:raw, ts.json})))
    end
  end

  ## Executing

  @doc """
  Runs `code` and waits for its result, serving its tool calls in the
  calling process. `{:ok, %Sandboxd.Result{}}` or `{:error, %Sandboxd.Error{}}`.

  Options:

    * `:tools` - see `Sandboxd.Tool`.
    * `:bindings` - the `bindings` of an earlier result (default: fresh).
    * `:timeout_ms` - integer or `:infinity`; the daemon's wall clock.
    * `:limits` - map or keyword: `max_heap`, `max_reductions`, `cpu_ms`,
      `priority`, `max_output_bytes`, `max_bindings_bytes`, `max_tool_calls`
      (atoms `:infinity`, `:low`, ... are written as the daemon's strings).
    * `:on_output` - a function called with each piece of printed output
      while the chunk runs (`stream_output`).
    * `:return_bindings` - in a session (`execute(session, code)`, from
      `open_session/2`): return the session's globals as `bindings` too.
    * `:modules` - `%{"Elixir.Name" => Name}`: objects in tool arguments and
      in the value whose `"__module"` is one of these become the module atom
      (tools given as modules are added automatically).
    * `:tool_calls` - `:serial` (default: each call in the waiting process,
      one at a time) or `:concurrent` (each call in a process spawned by the
      waiting one, so calls made under `parallel` run at once).
    * `:client_timeout` - how long to wait for the answer before cancelling,
      in ms (default: `timeout_ms` + 5000, or `:infinity` with `timeout_ms:
      :infinity`; without `timeout_ms`, the daemon's default, or the
      session's). Queue time counts here, not in the daemon's `timeout_ms`.
  """
  @spec execute(conn | Session.t(), String.t(), keyword) ::
          {:ok, Result.t()} | {:error, Error.t()}
  def execute(conn_or_session, code, opts \\ []) do
    with {:ok, pending} <- execute_async(conn_or_session, code, opts) do
      await(pending)
    end
  end

  @doc """
  Sends an execute and returns at once with a `Sandboxd.Pending`; the result
  comes from `await/2`, which must be called by the same process (tool calls
  are delivered to it). `cancel/1` ends it early.
  """
  @spec execute_async(conn | Session.t(), String.t(), keyword) ::
          {:ok, Pending.t()} | {:error, Error.t()}
  def execute_async(target, code, opts \\ [])

  def execute_async(%Session{conn: conn} = s, code, opts) do
    params =
      %{"code" => code, "session" => s.id}
      |> put_opt("timeout_ms", wire_limit(opts[:timeout_ms]))
      |> put_opt("limits", wire_limits(opts[:limits]))
      |> put_opt("stream_output", if(opts[:on_output], do: true))
      |> put_opt("return_bindings", if(opts[:return_bindings], do: true))

    refs = Map.merge(s.refs, Map.new(Keyword.get(opts, :modules, %{})))

    start(
      conn,
      code,
      params,
      s.tools,
      refs,
      Keyword.put_new(opts, :default_timeout, s.timeout_ms)
    )
  end

  def execute_async(%__MODULE__{} = conn, code, opts) do
    ts = prepare_tools(conn, Keyword.get(opts, :tools))

    params =
      [{"code", code}]
      |> put_pair("tools", if(ts.json, do: {:raw, ts.json}))
      |> put_pair("bindings", opts[:bindings])
      |> put_pair("timeout_ms", wire_limit(opts[:timeout_ms]))
      |> put_pair("limits", wire_limits(opts[:limits]))
      |> put_pair("stream_output", if(opts[:on_output], do: true))

    refs =
      case Keyword.get(opts, :modules) do
        nil -> ts.refs
        mods -> Map.merge(ts.refs, Map.new(mods))
      end

    start(conn, code, params, ts.dispatch, refs, opts)
  end

  def execute_async(name, code, opts) do
    with {:ok, conn} <- whereis(name), do: execute_async(conn, code, opts)
  end

  defp start(conn, code, params, dispatch, refs, opts) do
    with :ok <- code_size(conn, code),
         {:ok, id, tag} <- send_request(conn, "execute", params) do
      {:ok,
       %Pending{
         conn: conn,
         id: id,
         tag: tag,
         tools: dispatch,
         refs: refs,
         on_output: opts[:on_output],
         concurrent: Keyword.get(opts, :tool_calls, :serial) == :concurrent,
         deadline: deadline(conn, opts)
       }}
    end
  end

  # The client's own wait: client_timeout, else the execution's timeout
  # (given, the session's, or the daemon's default) and 5 s more.
  defp deadline(conn, opts) do
    wait =
      case Keyword.fetch(opts, :client_timeout) do
        {:ok, t} ->
          t

        :error ->
          timeout =
            opts[:timeout_ms] || opts[:default_timeout] ||
              get_in(conn.info, ["defaults", "timeout_ms"]) || 60_000

          if is_integer(timeout), do: timeout + 5000, else: :infinity
      end

    if wait == :infinity, do: :infinity, else: System.monotonic_time(:millisecond) + wait
  end

  @doc """
  Sends `$/cancelRequest` for a pending execution; its `await/2` then returns
  `{:error, %Sandboxd.Error{kind: :cancelled}}`. May be called from any
  process.
  """
  @spec cancel(Pending.t()) :: :ok
  def cancel(%Pending{conn: conn, id: id}) do
    :gen_tcp.send(conn.socket, cancel_line(id))
    :ok
  end

  @doc """
  Waits for a pending execution, serving its tool calls in this process
  (the one that called `execute_async/3`). `timeout` (ms) bounds this wait
  only: on expiry the execution is cancelled and `{:error, %Error{kind:
  :timeout}}` returned.
  """
  @spec await(Pending.t(), timeout) :: {:ok, Result.t()} | {:error, Error.t()}
  def await(%Pending{} = p, timeout \\ :infinity) do
    deadline =
      case timeout do
        :infinity -> p.deadline
        ms -> min_deadline(p.deadline, System.monotonic_time(:millisecond) + ms)
      end

    Sandboxd.Execution.wait(p, deadline)
  end

  defp min_deadline(:infinity, b), do: b
  defp min_deadline(a, b), do: min(a, b)

  ## Sessions

  @doc """
  Opens a session (a worker and its Lua state kept between chunks). Needs a
  daemon whose `describe` lists `"sessions"`. Options: `:tools`,
  `:bindings`, `:timeout_ms`, `:limits`, `:idle_timeout_ms`, `:modules`.
  """
  @spec open_session(conn, keyword) :: {:ok, Session.t()} | {:error, Error.t()}
  def open_session(conn, opts \\ [])

  def open_session(%__MODULE__{} = conn, opts) do
    if "sessions" in features(conn) do
      %Sandboxd.Toolset{json: json, dispatch: dispatch, refs: refs} =
        prepare_tools(conn, Keyword.get(opts, :tools))

      params =
        %{}
        |> put_opt("tools", if(json, do: {:raw, json}))
        |> put_opt("bindings", opts[:bindings])
        |> put_opt("timeout_ms", wire_limit(opts[:timeout_ms]))
        |> put_opt("limits", wire_limits(opts[:limits]))
        |> put_opt("idle_timeout_ms", opts[:idle_timeout_ms])

      with {:ok, %{"session" => id}} <- call(conn, "session/open", params) do
        refs = Map.merge(refs, Map.new(Keyword.get(opts, :modules, %{})))

        {:ok,
         %Session{conn: conn, id: id, tools: dispatch, refs: refs, timeout_ms: opts[:timeout_ms]}}
      end
    else
      {:error,
       %Error{
         kind: :method_not_found,
         message: "this sandboxd has no sessions (describe features)"
       }}
    end
  end

  def open_session(name, opts) do
    with {:ok, conn} <- whereis(name), do: open_session(conn, opts)
  end

  @doc "`session/snapshot`: `{:ok, %{\"bindings\" => b, \"binding_names\" => names}}`."
  @spec snapshot(Session.t()) :: {:ok, map} | {:error, Error.t()}
  def snapshot(%Session{conn: conn, id: id}),
    do: call(conn, "session/snapshot", %{"session" => id})

  @doc "`session/close`."
  @spec close_session(Session.t()) :: :ok | {:error, Error.t()}
  def close_session(%Session{conn: conn, id: id}) do
    with {:ok, _} <- call(conn, "session/close", %{"session" => id}), do: :ok
  end

  ## Internals

  @doc false
  # One request without tools; waits for its answer.
  @spec call(conn, String.t(), map, timeout) :: {:ok, term} | {:error, Error.t()}
  def call(conn, method, params, timeout \\ 60_000) do
    with {:ok, conn} <- whereis(conn),
         {:ok, id, tag} <- send_request(conn, method, params) do
      receive do
        {^tag, {:reply, %{"result" => r}}} ->
          Process.demonitor(tag, [:flush])
          {:ok, r}

        {^tag, {:reply, %{"error" => err}}} ->
          Process.demonitor(tag, [:flush])
          {:error, Error.from_rpc(err)}

        {^tag, {:closed, reason}} ->
          Process.demonitor(tag, [:flush])

          {:error,
           Error.unavailable("the connection to sandboxd was lost (#{inspect(reason)})", reason)}

        {:DOWN, ^tag, :process, _, reason} ->
          {:error,
           Error.unavailable("the connection to sandboxd was lost (#{inspect(reason)})", reason)}
      after
        timeout -> Sandboxd.Execution.give_up(%Pending{conn: conn, id: id, tag: tag})
      end
    end
  end

  defp send_request(%__MODULE__{pid: pid, socket: socket, info: info}, method, params) do
    id = System.unique_integer([:positive])
    body = encode_params(params)

    line = [
      ~s({"jsonrpc":"2.0","id":),
      Integer.to_string(id),
      ~s(,"method":"),
      method,
      ~s(","params":),
      body,
      "}\n"
    ]

    size = IO.iodata_length(line) - 1
    max = max_message(info)

    if size > max do
      {:error,
       %Error{
         kind: :message_too_large,
         code: -32600,
         message: "the request is #{size} bytes, above the daemon's max_message_bytes (#{max})"
       }}
    else
      tag = Process.monitor(pid)
      send(pid, {:register, id, self(), tag})

      case :gen_tcp.send(socket, line) do
        :ok ->
          {:ok, id, tag}

        {:error, reason} ->
          Process.demonitor(tag, [:flush])
          Sandboxd.Execution.flush(tag)
          # nothing reached the daemon: {:send, _} tells a caller it may retry
          {:error,
           Error.unavailable("cannot send to sandboxd (#{inspect(reason)})", {:send, reason})}
      end
    end
  end

  @doc false
  @spec max_message(map) :: pos_integer
  def max_message(info), do: get_in(info, ["daemon", "max_message_bytes"]) || 16_777_216

  defp code_size(%__MODULE__{info: info}, code) when is_binary(code) do
    max = get_in(info, ["daemon", "max_code_bytes"]) || 65_536

    if byte_size(code) > max,
      do:
        {:error,
         %Error{
           kind: :code_too_large,
           code: -32008,
           message: "code exceeds maximum size of #{max} bytes",
           output: ""
         }},
      else: :ok
  end

  defp cancel_line(id),
    do: [
      ~s({"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":),
      JSON.encode!(id),
      "}}\n"
    ]

  @doc """
  Prepares `tools` (any form `Sandboxd.Tool` accepts) for `conn`'s daemon:
  a `Sandboxd.Toolset` to pass as `tools:` to many executions. Function
  names that are not Lua identifiers are left out unless the daemon's
  features include `"any_function_names"`.
  """
  @spec prepare_tools(conn, term) :: Sandboxd.Toolset.t()
  def prepare_tools(_conn, %Sandboxd.Toolset{} = ts), do: ts
  def prepare_tools(_conn, nil), do: %Sandboxd.Toolset{}
  def prepare_tools(_conn, []), do: %Sandboxd.Toolset{}

  def prepare_tools(conn, tools) do
    any? = "any_function_names" in features(conn)
    tools = Tool.normalize(tools)

    {decls, dispatch} =
      Enum.map_reduce(tools, %{}, fn t, acc ->
        {decl, fns} = Tool.declare(t, any?)
        {decl, Map.put(acc, t.name, fns)}
      end)

    refs =
      for %Tool{module: m} <- tools,
          is_binary(m),
          mod = existing_module(m),
          into: %{},
          do: {m, mod}

    %Sandboxd.Toolset{json: JSON.encode!(decls), dispatch: dispatch, refs: refs}
  end

  defp existing_module(name) do
    String.to_existing_atom(name)
  rescue
    ArgumentError -> nil
  end

  defp put_opt(map, _key, nil), do: map
  defp put_opt(map, key, value), do: Map.put(map, key, value)

  defp put_pair(pairs, _key, nil), do: pairs
  defp put_pair(pairs, key, value), do: [{key, value} | pairs]

  # params: a map, or {key, value} pairs whose value may be {:raw, iodata}
  # (JSON encoded beforehand, such as a Toolset's declarations).  Keys are
  # this module's own ASCII names.
  defp encode_params(params) when is_map(params) do
    if Enum.any?(params, &match?({_, {:raw, _}}, &1)),
      do: encode_params(Map.to_list(params)),
      else: JSON.encode!(params)
  end

  defp encode_params(pairs) when is_list(pairs) do
    members =
      for {k, v} <- pairs do
        [
          ?",
          k,
          ?",
          ?:,
          case v do
            {:raw, io} -> io
            v when is_integer(v) -> Integer.to_string(v)
            true -> "true"
            v -> JSON.encode!(v)
          end
        ]
      end

    [?{, Enum.intersperse(members, ?,), ?}]
  end

  @doc false
  @spec wire_limit(term) :: term
  def wire_limit(nil), do: nil
  def wire_limit(:infinity), do: "infinity"
  def wire_limit(n) when is_integer(n), do: n
  def wire_limit(a) when is_atom(a), do: Atom.to_string(a)
  def wire_limit(other), do: other

  defp wire_limits(nil), do: nil
  defp wire_limits(limits), do: Map.new(limits, fn {k, v} -> {to_string(k), wire_limit(v)} end)
end
