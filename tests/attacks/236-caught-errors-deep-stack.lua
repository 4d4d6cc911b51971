-- expect: error reductions_limit
-- limits: {"max_reductions": 5000000}
-- timeout_ms: 10000
-- why: 150,000 levels deep, each caught error makes the core walk the whole stack (and it may reallocate it): a pcall(error) loop there buys milliseconds per few instructions unless the depth is billed
local function deep(n)
  if n > 0 then return deep(n - 1) + 0 end
  while true do pcall(error, 1) end
end
deep(150000)
