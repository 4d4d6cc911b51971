# The tests run against the real daemon: one started here for the whole run
# (stopped when the VM exits), and more by tests that need another config.
daemon = Sandboxd.TestDaemon.start()
Application.put_env(:sandboxd, :socket, daemon.socket)
Application.put_env(:sandboxd, :test_daemon, daemon)

System.at_exit(fn _ ->
  with {:error, reports} <- Sandboxd.TestDaemon.stop(daemon) do
    IO.puts(:stderr, "sandboxd reported sanitizer errors:\n" <> Enum.join(reports, "\n"))
    System.halt(1)
  end
end)

ExUnit.start()
