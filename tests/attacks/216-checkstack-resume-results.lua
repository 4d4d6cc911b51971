-- expect: error memory_limit
-- limits: {"max_heap": 16777216}
-- why: a coroutine returns 400,000 values; moving them to the resumer needs its stack to grow, and coroutine.resume/wrap report a refused growth as the ordinary "too many results to resume" without raising: that refusal must end the run
local fill = string.rep("y", 5 << 20)
local co = coroutine.wrap(function() return table.unpack({}, 1, 400000) end)
local ok, e = pcall(co)
return "escaped", ok, e
