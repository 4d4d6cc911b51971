defmodule Sandboxd.Application do
  @moduledoc false
  # Starts the registry of shared connections (one per socket path) that
  # Sandboxd.Legion uses.  Nothing else runs until a connection is opened.
  use Application

  @impl true
  def start(_type, _args) do
    children = [{Registry, keys: :unique, name: Sandboxd.Registry}]
    Supervisor.start_link(children, strategy: :one_for_one, name: Sandboxd.Supervisor)
  end
end
