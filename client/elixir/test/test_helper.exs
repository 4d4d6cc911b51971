# The tests run against the real daemon: one started here for the whole run
# (stopped when the VM exits), and more by tests that need another config.
daemon = Sandboxd.TestDaemon.start()
Application.put_env(:sandboxd, :socket, daemon.socket)
Application.put_env(:sandboxd, :test_daemon, daemon)
System.at_exit(fn _ -> Sandboxd.TestDaemon.stop(daemon) end)
ExUnit.start()
