-- expect: error runtime_error
-- message_contains: (error object is a table value)
-- limits: {"max_heap": 33554432}
-- timeout_ms: 5000
-- why: an error object whose __tostring allocates without end; called after the heap cap is lifted, it would eat host memory
error(setmetatable({}, {__tostring = function()
  local t = {}
  while true do t[#t + 1] = string.rep("m", 1000000) .. #t end
end}))
