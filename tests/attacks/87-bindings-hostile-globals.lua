-- expect: ok
-- value: 1
-- limits: {"max_reductions": 10000000}
-- timeout_ms: 3000
-- why: leave _G and a global table with looping metamethods behind (file 11 of the notes); bindings are read raw and ignore metatables, so the run ends normally
local loop = function() while true do end end
rawset(_G, "kept", setmetatable({x = 1}, {__pairs = loop, __index = loop, __len = loop}))
setmetatable(_G, {__index = loop, __newindex = loop, __pairs = loop, __len = loop})
return 1
