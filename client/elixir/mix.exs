defmodule Sandboxd.MixProject do
  use Mix.Project

  # No dependencies, on purpose: the package must build and test offline
  # (no Hex).  JSON comes from Elixir's JSON (1.18+), Jason when the host
  # application has it, or :jiffy (Debian's erlang-jiffy); see Sandboxd.JSON.
  def project do
    [
      app: :sandboxd,
      version: "1.0.0",
      elixir: "~> 1.14",
      start_permanent: Mix.env() == :prod,
      elixirc_paths: elixirc_paths(Mix.env()),
      deps: [],
      description: "Client for sandboxd (Lua 5.3 sandbox daemon) and a Legion sandbox adapter",
      docs: [main: "readme", extras: ["README.md"]],
      package: [licenses: ["MIT"], links: %{}]
    ]
  end

  def application do
    [mod: {Sandboxd.Application, []}, extra_applications: [:logger]]
  end

  # The stand-in Legion.Tool behaviour and the test tools exist in tests only.
  defp elixirc_paths(:test), do: ["lib", "test/support"]
  defp elixirc_paths(_), do: ["lib"]
end
