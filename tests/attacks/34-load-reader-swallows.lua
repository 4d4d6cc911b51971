-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000}
-- timeout_ms: 3000
-- why: lua_load runs a reader in protected mode and would turn the limit into nil, msg (F5); the wrapper must rethrow
for i = 1, 10 do
  local f, err = load(function() while true do end end)
end
return "escaped"
