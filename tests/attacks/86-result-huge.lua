-- expect: error runtime_error
-- message_contains: cannot return the value
-- limits: {"max_heap": 134217728}
-- why: return 20 MB (more than the 1 MiB message limit of the test config): the worker refuses it with an error instead of sending an oversized frame
local piece = string.rep("r", 1000000)
local t = {}
for i = 1, 20 do t[i] = piece end
return t
