defmodule Sandboxd.Tool do
  @moduledoc """
  One tool as the daemon sees it: a global Lua table `name` holding the
  field `__module` (`module`, default `name`) and one callable field per
  entry of `functions`.

  Each function is `%{name: "get", arities: [1, 2] | nil, fun: fun}` where
  `fun` is a function taking the Lua arguments as one list, or `{module,
  function}` (applied to the arguments), and returns the result (one value).
  With `arities` the daemon refuses other argument counts itself; `nil`
  accepts any count. A tool with no functions is reference-only.

  `Sandboxd.execute/3` also takes tools in shorter forms, normalised by
  `normalize/1`:

    * `%{"Weather" => %{"get" => &get/1, "list" => fn -> ... end}}`: a map (or
      keyword list) from table name to a map of functions; arities come from
      the functions themselves.
    * `%{"Weather" => MyApp.Weather}`: every public function of the module,
      all arities; `module` is `"Elixir.MyApp.Weather"`.
    * `[MyApp.Weather]`: the same, named after the module's last segment.
    * `%Sandboxd.Tool{}` structs, as they are.
  """

  defstruct name: nil, module: nil, functions: []

  @type function_spec :: %{
          name: String.t(),
          arities: [non_neg_integer] | nil,
          fun: ([term] -> term) | {module, atom}
        }
  @type t :: %__MODULE__{name: String.t(), module: String.t() | nil, functions: [function_spec]}

  @doc "Normalises any accepted tools argument into a list of `%Sandboxd.Tool{}`."
  @spec normalize(term) :: [t]
  def normalize(nil), do: []
  def normalize(tools) when is_map(tools), do: Enum.map(tools, &entry/1)
  def normalize(tools) when is_list(tools), do: Enum.map(tools, &entry/1)

  defp entry(%__MODULE__{} = tool), do: tool
  defp entry(module) when is_atom(module), do: from_module(short_name(module), module)
  defp entry({name, module}) when is_atom(module), do: from_module(to_string(name), module)

  defp entry({name, funs}) when is_map(funs) or is_list(funs) do
    functions =
      for {fname, fun} <- funs do
        {:arity, arity} = :erlang.fun_info(fun, :arity)
        %{name: to_string(fname), arities: [arity], fun: fn args -> apply(fun, args) end}
      end

    %__MODULE__{name: to_string(name), functions: functions}
  end

  @doc "The last segment of a module's name: `MyApp.Tools.Weather` is `\"Weather\"`."
  @spec short_name(module) :: String.t()
  def short_name(module) do
    case Atom.to_string(module) do
      "Elixir." <> _ -> module |> Module.split() |> List.last()
      erlang -> erlang
    end
  end

  @doc """
  A tool exposing the public functions of `module` (every arity, grouped by
  name), less those in `except` (a list of `{name, arity}`).
  """
  @spec from_module(String.t(), module, [{atom, arity}]) :: t
  def from_module(name, module, except \\ []) do
    Code.ensure_loaded(module)

    exports =
      if function_exported?(module, :__info__, 1),
        do: module.__info__(:functions),
        else: module.module_info(:exports) -- [module_info: 0, module_info: 1]

    functions =
      (exports -- except)
      |> Enum.group_by(&elem(&1, 0), &elem(&1, 1))
      |> Enum.sort()
      |> Enum.map(fn {fname, arities} ->
        %{
          name: Atom.to_string(fname),
          arities: Enum.sort(arities),
          fun: &apply(module, fname, &1)
        }
      end)

    %__MODULE__{name: name, module: Atom.to_string(module), functions: functions}
  end

  @doc false
  # The daemon's declaration of `tool`, and the function table used to
  # serve its calls.  `any_names?` says whether the daemon takes function
  # names that are not Lua identifiers (describe feature
  # "any_function_names"); without it such functions are left out.
  @spec declare(t, boolean) :: {map, %{String.t() => {[non_neg_integer] | nil, function}}}
  def declare(%__MODULE__{} = tool, any_names?) do
    functions = Enum.filter(tool.functions, &(any_names? or identifier?(&1.name)))

    decl_functions =
      for f <- functions do
        if is_list(f.arities) and length(f.arities) <= 16 and Enum.all?(f.arities, &(&1 <= 250)),
          do: %{"name" => f.name, "arities" => f.arities},
          else: f.name
      end

    decl =
      %{"name" => tool.name, "functions" => decl_functions}
      |> then(&if(tool.module, do: Map.put(&1, "module", tool.module), else: &1))

    {decl, Map.new(functions, &{&1.name, {&1.arities, &1.fun}})}
  end

  @doc false
  @spec identifier?(String.t()) :: boolean
  def identifier?(name), do: name =~ ~r/\A[A-Za-z_][A-Za-z0-9_]{0,127}\z/
end

defmodule Sandboxd.Toolset do
  @moduledoc """
  Tools prepared for one connection's daemon by `Sandboxd.prepare_tools/2`:
  the declarations already encoded (`json`), the table that serves their
  calls (`dispatch`), and the module references they allow (`refs`). Pass it
  as `tools:` to run many executions with the same tools without preparing
  them each time.
  """
  defstruct json: nil, dispatch: %{}, refs: %{}

  @type t :: %__MODULE__{
          json: iodata | nil,
          dispatch: map,
          refs: %{optional(String.t()) => module}
        }
end
