defmodule Sandboxd.Execution do
  @moduledoc false
  # The waiting side of one request: the process that sent it receives what
  # the connection's reader routes to it (tool calls, live output, then the
  # answer), serves the tool calls, and returns the result.
  #
  # Contract:
  #   * wait/2 returns {:ok, %Sandboxd.Result{}} or {:error, %Sandboxd.Error{}}
  #     by the deadline; at the deadline the request is cancelled
  #     (give_up/1) and the error is a client-side :timeout.
  #   * A tool call runs in the waiting process (tool_calls: :serial) or in a
  #     process it spawns (:concurrent); either way exactly one answer line is
  #     written for it: the result, a tool error (an exception, a value JSON
  #     cannot carry, an answer over the daemon's max_message_bytes), or an
  #     abort (throw, exit, Sandboxd.ToolAbort), whose term is kept for the
  #     error's reason.
  #   * Tool processes still running when the request ends are killed.

  alias Sandboxd.{Error, JSON, Pending, Result, Value}

  @doc false
  @spec wait(Pending.t(), integer | :infinity) :: {:ok, Result.t()} | {:error, Error.t()}
  def wait(p, deadline), do: loop(p, deadline, nil, %{})

  # aborted: {:throw, v} / {:exit, r} once a tool escaped that way;
  # running: the processes serving tool calls (tool_calls: :concurrent),
  # pid => {monitor ref, call id}.
  defp loop(%Pending{tag: tag} = p, deadline, aborted, running) do
    receive do
      {^tag, {:tool_call, cid, params}} ->
        if p.concurrent do
          {pid, mref} = spawn_serve(p, cid, params)
          loop(p, deadline, aborted, Map.put(running, pid, {mref, cid}))
        else
          loop(p, deadline, serve(p, cid, params) || aborted, running)
        end

      {{:tool_done, ^tag}, pid, escaped} when is_map_key(running, pid) ->
        {mref, _cid} = running[pid]
        Process.demonitor(mref, [:flush])
        loop(p, deadline, aborted || escaped, Map.delete(running, pid))

      {:DOWN, _mref, :process, pid, reason} when is_map_key(running, pid) ->
        {_mref, cid} = running[pid]
        answer = {:error, "the tool's process ended: #{inspect(reason)}", false}
        :gen_tcp.send(p.conn.socket, answer_line(cid, answer, p.conn.info))
        loop(p, deadline, aborted, Map.delete(running, pid))

      {^tag, {:output, text}} ->
        if p.on_output, do: p.on_output.(text)
        loop(p, deadline, aborted, running)

      {^tag, {:reply, resp}} ->
        Process.demonitor(tag, [:flush])
        stop_tools(running)
        flush({:tool_done, tag})
        reply(resp, p, aborted)

      {^tag, {:closed, reason}} ->
        Process.demonitor(tag, [:flush])
        stop_tools(running)

        {:error,
         Error.unavailable("the connection to sandboxd was lost (#{inspect(reason)})", reason)}

      {:DOWN, ^tag, :process, _, reason} ->
        stop_tools(running)

        {:error,
         Error.unavailable("the connection to sandboxd was lost (#{inspect(reason)})", reason)}
    after
      wait_ms(deadline) ->
        stop_tools(running)
        give_up(p)
    end
  end

  # A tool call served by a process spawned here (so still in this
  # process's tree: its $callers and :parent lead back to the caller); it
  # answers the daemon itself and reports how the tool ended.
  defp spawn_serve(%Pending{tag: tag} = p, cid, params) do
    owner = self()
    callers = [owner | Process.get(:"$callers", [])]

    # The waiter hears how the tool ended before the daemon can see the
    # answer, so a throw is known when the daemon reports the abort.
    spawn_monitor(fn ->
      Process.put(:"$callers", callers)
      {line, escaped} = answer(p, cid, params)
      send(owner, {{:tool_done, tag}, self(), escaped})
      :gen_tcp.send(p.conn.socket, line)
    end)
  end

  # Calls still running when the execution ended (a limit, a cancel): the
  # daemon would ignore their answers, so they are stopped, as the tools
  # of a Legion eval die with it.
  defp stop_tools(running) when map_size(running) == 0, do: :ok

  defp stop_tools(running) do
    for {pid, {mref, _cid}} <- running do
      Process.demonitor(mref, [:flush])
      Process.exit(pid, :kill)
    end

    :ok
  end

  defp wait_ms(:infinity), do: :infinity
  defp wait_ms(deadline), do: max(deadline - System.monotonic_time(:millisecond), 0)

  # The client's own deadline passed: cancel, stop listening, drop whatever
  # the reader sent meanwhile.
  @doc false
  @spec give_up(Pending.t()) :: {:error, Error.t()}
  def give_up(%Pending{conn: conn, tag: tag} = p) do
    try do
      GenServer.call(conn.pid, {:forget, p.id})
    catch
      :exit, _ -> :ok
    end

    Process.demonitor(tag, [:flush])
    flush(tag)

    {:error,
     %Error{
       kind: :timeout,
       message: "no answer from sandboxd in time; the execution was cancelled"
     }}
  end

  @doc false
  @spec flush(reference) :: :ok
  def flush(tag) do
    receive do
      {^tag, _} -> flush(tag)
      {^tag, _, _} -> flush(tag)
    after
      0 -> :ok
    end
  end

  defp reply(%{"result" => r}, p, _aborted) when is_map(r) do
    {:ok,
     %Result{
       value: Value.from_json(r["value"], p.refs),
       bindings: Map.get(r, "bindings", []),
       binding_names: Map.get(r, "binding_names", []),
       output: Map.get(r, "output", ""),
       output_truncated: Map.get(r, "output_truncated", false),
       stats: Map.get(r, "stats", %{})
     }}
  end

  defp reply(%{"error" => err}, _p, aborted) do
    e = Error.from_rpc(err)
    {:error, if(e.kind == :tool_aborted and aborted, do: %{e | reason: aborted}, else: e)}
  end

  defp reply(_other, _p, _aborted), do: {:error, Error.protocol("malformed response")}

  # Serves one tool call in this process.  Returns {:throw, v} / {:exit, r}
  # when the tool escaped that way (the execution is then aborted), else nil.
  defp serve(p, cid, params) do
    {line, escaped} = answer(p, cid, params)
    :gen_tcp.send(p.conn.socket, line)
    escaped
  end

  # Runs the tool: its answer line for the daemon, and how it escaped.
  defp answer(p, cid, params) do
    {answer, escaped} =
      with {:ok, {arities, fun}} <- lookup(p.tools, params),
           args = Value.from_json(List.wrap(params["args"]), p.refs),
           :ok <- arity_ok(params, arities, args) do
        run(fun, args, params)
      else
        {:error, message} -> {{:error, message, false}, nil}
      end

    {answer_line(cid, answer, p.conn.info), escaped}
  end

  defp lookup(tools, %{"tool" => t, "function" => f}) do
    case tools do
      %{^t => %{^f => entry}} -> {:ok, entry}
      _ -> {:error, "#{t}.#{f} is not a function of this execution"}
    end
  end

  defp lookup(_tools, _params), do: {:error, "malformed tool call"}

  defp arity_ok(_params, nil, _args), do: :ok

  defp arity_ok(params, arities, args) do
    n = length(args)

    if n in arities,
      do: :ok,
      else:
        {:error,
         "#{params["tool"]}.#{params["function"]} takes #{Enum.join(arities, " or ")} argument(s), got #{n}"}
  end

  defp run(fun, args, params) do
    result =
      case fun do
        {m, f} -> apply(m, f, args)
        f -> f.(args)
      end

    case Value.to_json(result) do
      {:ok, data} -> {{:ok, data}, nil}
      {:error, message} -> {{:error, message, false}, nil}
    end
  rescue
    e in Sandboxd.ToolAbort -> {{:error, Exception.message(e), true}, nil}
    e -> {{:error, Exception.message(e), false}, nil}
  catch
    :throw, v ->
      {{:error, "#{params["tool"]}.#{params["function"]} threw #{inspect(v)}", true}, {:throw, v}}

    :exit, r ->
      {{:error, "#{params["tool"]}.#{params["function"]} exited: #{inspect(r)}", true},
       {:exit, r}}
  end

  # One tool answer line; a result too large for the daemon's
  # max_message_bytes is replaced by a tool error, so Lua gets a catchable
  # error instead of a call the daemon can never match.
  defp answer_line(cid, answer, info) do
    id = encode_id(cid)

    line =
      case answer do
        {:ok, data} ->
          [~s({"jsonrpc":"2.0","id":), id, ~s(,"result":), JSON.encode!(data), "}\n"]

        {:error, message, abort?} ->
          error_line(id, message, abort?)
      end

    max = Sandboxd.max_message(info)

    if IO.iodata_length(line) - 1 > max do
      error_line(
        id,
        "tool result of #{IO.iodata_length(line)} bytes exceeds the daemon's message limit of #{max} bytes",
        false
      )
    else
      line
    end
  end

  defp error_line(id, message, abort?) do
    message = Value.utf8(message)

    message =
      if byte_size(message) > 8192,
        do: binary_part(message, 0, 8192) |> Value.utf8(),
        else: message

    data = if abort?, do: ~s(,"data":{"abort":true}), else: ""

    [
      ~s({"jsonrpc":"2.0","id":),
      id,
      ~s(,"error":{"code":1,"message":),
      JSON.encode!(message),
      data,
      "}}\n"
    ]
  end

  # The daemon's call ids are plain tokens ("sbx-7-1"): quoted as they are,
  # without an encoder call; anything else goes through the encoder.
  defp encode_id(cid) when is_binary(cid) do
    if plain?(cid), do: [?", cid, ?"], else: JSON.encode!(cid)
  end

  defp encode_id(cid), do: JSON.encode!(cid)

  defp plain?(<<c, rest::binary>>)
       when c in ?a..?z or c in ?A..?Z or c in ?0..?9 or c in [?-, ?_, ?.],
       do: plain?(rest)

  defp plain?(<<>>), do: true
  defp plain?(_), do: false
end
