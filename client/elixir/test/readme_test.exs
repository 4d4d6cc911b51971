defmodule Sandboxd.ReadmeTest do
  @moduledoc """
  Every block and command of this package's README, checked against the real
  daemon and this package, as tests/readme does for the top README: each
  fenced block and each command in backticks is claimed by a check here, so
  one added without a check fails this suite; the functions, config keys and
  struct fields it names exist.

  Not async: one check sets the `:sandboxd` application environment as the
  README's config does (then puts it back).
  """
  use ExUnit.Case, async: false

  @repo Path.expand("../../..", __DIR__)
  @readme File.read!(Path.expand("../README.md", __DIR__))
  @makefile File.read!(Path.join(@repo, "Makefile"))

  defp blocks,
    do: Regex.scan(~r/^```(\w*)\n(.*?)^```/ms, @readme, capture: :all_but_first)

  defp prose, do: Regex.replace(~r/^```.*?^```/ms, @readme, "")

  # Runs a block in which `expr  #=> value` shows what expr evaluates to;
  # returns [{line, got, want}], one for each.
  defp run_commented(code) do
    lines =
      code
      |> String.split("\n")
      |> Enum.with_index(1)
      |> Enum.map(fn {line, n} ->
        case Regex.run(~r/^(\S.*?)\s+#=> (.*)$/, line) do
          [_, expr, want] -> "send(self(), {:readme, #{n}, (#{expr}), (#{want})})"
          nil -> line
        end
      end)

    {_, binding} = Code.eval_string(Enum.join(lines, "\n"))
    if conn = binding[:conn], do: Sandboxd.close(conn)
    collect()
  end

  defp collect do
    receive do
      {:readme, n, got, want} -> [{n, got, want} | collect()]
    after
      0 -> []
    end
  end

  ## the blocks

  # mix.exs's dependency names this project; the config lines, read as a
  # config file is, give Legion this module (with Legion.Sandbox's four
  # callbacks) and the socket the client connects to.
  defp check_legion_switch(body) do
    [dep_part, config_part] = String.split(body, "# config/config.exs: the one line\n")
    [dep_line] = for l <- String.split(dep_part, "\n"), String.starts_with?(l, "{"), do: l
    {:sandboxd, opts} = Code.eval_string(dep_line) |> elem(0)
    dir = String.replace(opts[:path], "path/to/sandboxd", @repo)
    # the directory of this very project (the one these tests run in)
    assert Path.expand(dir) == Path.dirname(Mix.Project.project_file())
    assert Mix.Project.config()[:app] == :sandboxd

    file = Path.join(System.tmp_dir!(), "sbx-readme-#{System.unique_integer([:positive])}.exs")
    File.write!(file, "import Config\n" <> config_part)

    try do
      config = Config.Reader.read!(file)
      assert config[:legion][:config] == %{sandbox: Sandboxd.Legion}
      sandbox = config[:legion][:config].sandbox
      Code.ensure_loaded!(sandbox)

      for {f, a} <- [execute: 5, check: 2, binding_names: 1, prompt_info: 0] do
        assert function_exported?(sandbox, f, a), "#{inspect(sandbox)} has no #{f}/#{a}"
      end

      socket = config[:sandboxd][:socket]
      ours = Application.get_env(:sandboxd, :socket)
      Application.put_env(:sandboxd, :socket, socket)
      assert Sandboxd.socket_path() == socket
      # the same key set to the test daemon's socket: Legion's calls reach it
      Application.put_env(:sandboxd, :socket, ours)
      assert {:ok, {2, _}} = Sandboxd.Legion.execute("return 1 + 1", 5_000)
    after
      File.rm(file)
    end
  end

  # The plain client's example, as written (Sandboxd.connect() finds the test
  # daemon as it would the configured socket): each `#=>` holds.
  defp check_plain_client(body) do
    seen = run_commented(body)
    assert length(seen) == 2

    for {n, got, want} <- seen,
        do: assert(got == want, "README line #{n}: #{inspect(got)}, shown #{inspect(want)}")
  end

  # make test-elixir and make bench-elixir: the targets, and what they run.
  defp check_make_targets(body) do
    cmds =
      for l <- String.split(body, "\n"),
          l != "",
          do: l |> String.split("#") |> hd() |> String.trim()

    assert cmds == ["make test-elixir", "make bench-elixir"]
    for c <- cmds, do: make_target(c)
    assert @makefile =~ "MIX_BUILD_ROOT=$(CURDIR)/$(O)/elixir mix test\n"
    assert @makefile =~ "mix run ../../bench/elixir_legion.exs\n"
  end

  # The supervision example, as written: the name reaches the connection,
  # the `#=>` holds, and the supervisor it starts is stopped after.
  defp check_supervised(body) do
    lines =
      for {line, n} <- Enum.with_index(String.split(body, "\n"), 1) do
        case Regex.run(~r/^(\S.*?)\s+#=> (.*)$/, line) do
          [_, expr, want] -> "send(self(), {:readme, #{n}, (#{expr}), (#{want})})"
          nil -> line
        end
      end

    {_, binding} = Code.eval_string(Enum.join(lines, "\n"))
    sup = binding[:sup]
    assert [{MyApp.Sandbox, pid, :worker, [Sandboxd]}] = Supervisor.which_children(sup)
    assert {:ok, %Sandboxd{pid: ^pid}} = Sandboxd.whereis(MyApp.Sandbox)
    Supervisor.stop(sup)
    assert [{n, 42, 42}] = collect()
    assert n == 6
  end

  @blocks [
    {"elixir", "# mix.exs\n", &__MODULE__.legion_switch/1},
    {"elixir", "{:ok, conn} = Sandboxd.connect()", &__MODULE__.plain_client/1},
    {"elixir", "# lib/my_app/application.ex", &__MODULE__.supervised/1},
    {"sh", "make test-elixir ", &__MODULE__.make_targets/1}
  ]
  def legion_switch(b), do: check_legion_switch(b)
  def plain_client(b), do: check_plain_client(b)
  def supervised(b), do: check_supervised(b)
  def make_targets(b), do: check_make_targets(b)

  defp claim(lang, body) do
    case for({l, start, f} <- @blocks, l == lang and String.starts_with?(body, start), do: f) do
      [f] -> f
      _ -> flunk("no check in #{inspect(__MODULE__)} for this ```#{lang} block:\n#{body}")
    end
  end

  test "every block of the README has a check" do
    assert length(blocks()) == length(@blocks)
    for [lang, body] <- blocks(), do: claim(lang, body)
    assert_raise ExUnit.AssertionError, ~r/no check in/, fn -> claim("sh", "mix frob\n") end
  end

  for {lang, start, f} <- @blocks do
    {:name, name} = Function.info(f, :name)

    test "README block: #{name}" do
      [[_, body]] =
        for [l, b] <- blocks(),
            l == unquote(lang) and String.starts_with?(b, unquote(start)),
            do: [l, b]

      unquote(f).(body)
    end
  end

  ## commands in the prose

  defp make_target(cmd) do
    [_, target] = String.split(cmd)
    assert @makefile =~ ~r/^#{Regex.escape(target)}:/m, cmd
  end

  # scripts/install-deps installs both, and they are Debian's packages (as
  # dpkg knows them where they are installed; `apt-cache show` would say the
  # same in seconds rather than milliseconds).
  defp apt_install(cmd) do
    ["apt-get", "install" | pkgs] = String.split(cmd)
    deps = File.read!(Path.join(@repo, "scripts/install-deps"))
    assert deps =~ ~s(TEST="$TEST #{Enum.join(pkgs, " ")}")

    if dpkg = System.find_executable("dpkg-query") do
      {out, _} = System.cmd(dpkg, ["-W", "-f", "${Package} ${Status}\n" | pkgs])
      for p <- pkgs, do: assert(out =~ "#{p} install ok installed", out)
    end
  end

  @commands %{
    "mix test" => &__MODULE__.mix_test/1,
    "make test" => &__MODULE__.make_target_/1,
    "apt-get install elixir erlang-jiffy" => &__MODULE__.apt_install_/1,
    "scripts/install-deps" => &__MODULE__.exists/1
  }
  # what make test-elixir runs, offline
  def mix_test(_),
    do: assert(@makefile =~ "HEX_OFFLINE=1 \\\n\tMIX_BUILD_ROOT=$(CURDIR)/$(O)/elixir mix test\n")

  def make_target_(c), do: make_target(c)
  def apt_install_(c), do: apt_install(c)
  def exists(c), do: assert(File.exists?(Path.join(@repo, c)), c)

  defp commands do
    ~r/`((?:make|mix|apt-get|sudo|scripts\/|elixir|iex)[^`]*)`/
    |> Regex.scan(prose(), capture: :all_but_first)
    |> Enum.map(fn [c] -> String.replace(c, ~r/\s+/, " ") end)
    |> Enum.uniq()
  end

  test "every command in the prose has a check, and passes it" do
    assert length(commands()) >= 3

    for c <- commands() do
      f = @commands[c] || flunk("no check in #{inspect(__MODULE__)} for `#{c}`")
      f.(c)
    end
  end

  ## the names it gives

  test "every function it names exists" do
    text = prose()
    # name/arity: Sandboxd's or Sandboxd.Legion's, except the Legion.Tool
    # callbacks the adapter leaves out of a tool table
    legion_tool = ~w(description/0 description/1 summary/0 extra_allowed_modules/0)
    Code.ensure_loaded!(Sandboxd.Legion)
    named = Regex.scan(~r/`(?:Sandboxd\.)?(\w+)\/(\d)`/, text, capture: :all_but_first)
    assert length(named) >= 10

    for [f, a] <- named, "#{f}/#{a}" not in legion_tool do
      a = String.to_integer(a)
      f = String.to_atom(f)

      assert function_exported?(Sandboxd, f, a) or function_exported?(Sandboxd.Legion, f, a),
             "neither Sandboxd nor Sandboxd.Legion has #{f}/#{a}"
    end

    legion = File.read!(Path.expand("../lib/sandboxd/legion.ex", __DIR__))
    [meta] = Regex.run(~r/@meta_functions \[(.*)\]/, legion, capture: :all_but_first)
    assert meta == Enum.map_join(legion_tool, ", ", &String.replace(&1, "/", ": "))

    # Sandboxd.f(...) calls in the prose
    for [f] <- Regex.scan(~r/Sandboxd\.([a-z_]+)\(/, text, capture: :all_but_first) do
      assert Keyword.has_key?(Sandboxd.__info__(:functions), String.to_atom(f)), f
    end

    for [m] <- Regex.scan(~r/`%?(Sandboxd(?:\.[A-Z]\w*)+)/, @readme, capture: :all_but_first) do
      assert Code.ensure_loaded?(Module.concat([m])), m
    end
  end

  test "the config keys and error fields it names are the package's" do
    src = Path.wildcard(Path.expand("../lib/**/*.ex", __DIR__)) |> Enum.map_join(&File.read!/1)
    keys = Regex.scan(~r/`config :sandboxd, (\w+): [^`]+`/, @readme, capture: :all_but_first)
    assert length(keys) >= 3

    for [key] <- keys, do: assert(src =~ "Application.get_env(:sandboxd, :#{key}", key)

    [fields] = Regex.run(~r/`%Sandboxd\.Error\{([\w, ]+)\}`/, @readme, capture: :all_but_first)
    struct = Map.keys(%Sandboxd.Error{})

    for f <- String.split(fields, ", "),
        do: assert(String.to_atom(f) in struct, "Sandboxd.Error has no #{f}")
  end
end
