defmodule Sandboxd.Connection do
  @moduledoc false
  # The reader of one connection to the daemon: the one process that owns the
  # socket and always reads it, so tool calls and answers are taken off the
  # socket while executions are pending.
  #
  # Contract:
  #   * Callers write their own requests and tool answers straight onto the
  #     socket (`:gen_tcp.send/2` from any process; each write is one whole
  #     line), after registering the request id with `{:register, id, pid,
  #     tag}`.  Registration is a message sent before the request is written,
  #     so it is always handled before the answer can arrive.
  #   * For a registered id the reader sends the caller, as `{tag, msg}`:
  #     `{:tool_call, call_id, params}` and `{:output, text}` for the
  #     execution with that id, then exactly one of `{:reply, response}` (the
  #     decoded JSON-RPC response; the id is forgotten) or `{:closed,
  #     reason}` (the connection is gone).
  #   * Tool code never runs here: a tool call goes to the process that sent
  #     the execute.  A tool call for no registered execution is answered with
  #     an error at once.
  #   * A caller that dies has its running requests cancelled
  #     (`$/cancelRequest`); `{:forget, id}` does the same for a caller that
  #     stopped waiting.
  #   * Lines of any length are reassembled from the socket's line-mode
  #     packets (a packet without a newline is a part of a longer line), up to
  #     `max_line_bytes`; a longer line closes the connection.
  use GenServer
  require Logger

  # use GenServer's, never used: Sandboxd.child_spec/1 is the public one.
  @spec child_spec(term) :: Supervisor.child_spec()
  import Bitwise

  alias Sandboxd.JSON

  @doc false
  @spec start(port, keyword, boolean) :: GenServer.on_start()
  def start(socket, opts, link?) do
    args = {socket, opts}
    gen = if name = opts[:name], do: [name: name], else: []

    if link?,
      do: GenServer.start_link(__MODULE__, args, gen),
      else: GenServer.start(__MODULE__, args, gen)
  end

  @impl true
  def init({socket, opts}) do
    {:ok,
     %{
       socket: socket,
       partial: [],
       partial_size: 0,
       max_line: Keyword.get(opts, :max_line_bytes, 1 <<< 30),
       waiters: %{},
       mons: %{},
       conn: nil
     }}
  end

  # The socket arrives passive and is switched to `active: :once` once this
  # process owns it (see Sandboxd.connect/1): one packet at a time is sent as
  # a message, and the next only after that one is handled, so a fast daemon
  # cannot fill this process's mailbox; the kernel's buffer and the daemon's
  # own flow control hold the rest.
  @impl true
  def handle_call({:activate, conn}, _from, st) do
    :ok = :inet.setopts(st.socket, active: :once)
    {:reply, :ok, %{st | conn: conn}}
  end

  def handle_call(:conn, _from, %{conn: nil} = st),
    do: {:reply, {:error, Sandboxd.Error.unavailable("the connection is not ready", :not_ready)}, st}

  def handle_call(:conn, _from, st), do: {:reply, {:ok, st.conn}, st}

  def handle_call({:forget, id}, _from, st) do
    st =
      case st.waiters do
        %{^id => {_pid, _tag, mon}} ->
          cancel(st.socket, id)
          Process.demonitor(mon, [:flush])
          %{st | waiters: Map.delete(st.waiters, id), mons: Map.delete(st.mons, mon)}

        _ ->
          st
      end

    {:reply, :ok, st}
  end

  def handle_call({:register_shared, key, conn}, _from, st) do
    case Registry.register(Sandboxd.Registry, key, conn) do
      {:ok, _} -> {:reply, :ok, st}
      {:error, _} = e -> {:reply, e, st}
    end
  end

  def handle_call(:close, _from, st) do
    :gen_tcp.close(st.socket)
    st = fail_all(st, :closed)
    {:stop, :normal, :ok, st}
  end

  @impl true
  def handle_info({:register, id, pid, tag}, st) do
    mon = Process.monitor(pid)

    {:noreply,
     %{st | waiters: Map.put(st.waiters, id, {pid, tag, mon}), mons: Map.put(st.mons, mon, id)}}
  end

  def handle_info({:tcp, _sock, data}, st) do
    size = st.partial_size + byte_size(data)

    cond do
      size > st.max_line ->
        Logger.error("sandboxd: a line from the daemon exceeds #{st.max_line} bytes; closing")
        :gen_tcp.close(st.socket)
        {:stop, :normal, fail_all(st, :line_too_long)}

      String.ends_with?(data, "\n") ->
        line = if st.partial == [], do: data, else: IO.iodata_to_binary([st.partial, data])
        line = binary_part(line, 0, byte_size(line) - 1)
        st = dispatch(line, %{st | partial: [], partial_size: 0})
        {:noreply, rearm(st)}

      true ->
        {:noreply, rearm(%{st | partial: [st.partial, data], partial_size: size})}
    end
  end

  def handle_info({:tcp_closed, _sock}, st), do: {:stop, :normal, fail_all(st, :closed)}
  def handle_info({:tcp_error, _sock, reason}, st), do: {:stop, :normal, fail_all(st, reason)}

  def handle_info({:DOWN, mon, :process, _pid, _reason}, st) do
    case st.mons do
      %{^mon => id} ->
        cancel(st.socket, id)
        {:noreply, %{st | waiters: Map.delete(st.waiters, id), mons: Map.delete(st.mons, mon)}}

      _ ->
        {:noreply, st}
    end
  end

  def handle_info(_other, st), do: {:noreply, st}

  defp dispatch(line, st) do
    case JSON.decode(line) do
      {:ok, %{"method" => "tool/call", "id" => cid, "params" => %{"execution_id" => eid} = p}} ->
        case st.waiters do
          %{^eid => {pid, tag, _}} -> send(pid, {tag, {:tool_call, cid, p}})
          _ -> answer_error(st.socket, cid, "no execution #{inspect(eid)} on this connection")
        end

        st

      {:ok, %{"method" => "execution/output", "params" => %{"execution_id" => eid, "text" => t}}} ->
        case st.waiters do
          %{^eid => {pid, tag, _}} -> send(pid, {tag, {:output, t}})
          _ -> :ok
        end

        st

      {:ok, %{"method" => method, "id" => cid}} ->
        answer_error(st.socket, cid, "the client does not serve #{inspect(method)}")
        st

      {:ok, %{"method" => _}} ->
        st

      {:ok, %{"id" => nil, "error" => err}} ->
        connection_error(err, st)

      {:ok, %{"id" => id} = resp} ->
        case st.waiters do
          %{^id => {pid, tag, mon}} ->
            send(pid, {tag, {:reply, resp}})
            Process.demonitor(mon, [:flush])
            %{st | waiters: Map.delete(st.waiters, id), mons: Map.delete(st.mons, mon)}

          _ ->
            st
        end

      _ ->
        Logger.warning("sandboxd: ignoring a line that is not a JSON-RPC message")
        st
    end
  end

  # An error with id null: the daemon refused the connection (forbidden, or
  # busy at max_connections / max_input_bytes) and closes it; other kinds
  # (a message the daemon could not read) cannot be matched to a request.
  defp connection_error(err, st) do
    error = Sandboxd.Error.from_rpc(err)

    if error.kind in [:forbidden, :busy] do
      for {_id, {pid, tag, _}} <- st.waiters, do: send(pid, {tag, {:reply, %{"error" => err}}})
      %{st | waiters: %{}}
    else
      Logger.warning("sandboxd: daemon error without id: #{error.message}")
      st
    end
  end

  # The next packet, please (a socket closed meanwhile says so in a message).
  defp rearm(st) do
    _ = :inet.setopts(st.socket, active: :once)
    st
  end

  defp fail_all(st, reason) do
    for {_id, {pid, tag, _}} <- st.waiters, do: send(pid, {tag, {:closed, reason}})
    %{st | waiters: %{}, mons: %{}}
  end

  defp cancel(socket, id) do
    :gen_tcp.send(socket, [
      ~s({"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":),
      JSON.encode!(id),
      "}}\n"
    ])
  end

  defp answer_error(socket, cid, message) do
    :gen_tcp.send(socket, [
      ~s({"jsonrpc":"2.0","id":),
      JSON.encode!(cid),
      ~s(,"error":{"code":-32601,"message":),
      JSON.encode!(message),
      "}}\n"
    ])
  end
end
