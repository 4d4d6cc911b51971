defmodule Legion.Tool do
  @moduledoc """
  Stand-in for Legion's `Legion.Tool` behaviour, defined for the tests only
  (the package never depends on Legion). Sandboxd.Legion recognises tools by
  this module name among a module's `@behaviour` attributes, as Legion does.
  """
  @callback description() :: String.t()
  @optional_callbacks description: 0
end
