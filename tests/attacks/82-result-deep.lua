-- expect: error runtime_error
-- message_contains: nesting deeper
-- why: return 100000 nested tables; the encoder's depth cap must reject it instead of recursing on the C stack
local t = {}
local cur = t
for i = 1, 100000 do cur[1] = {} cur = cur[1] end
return t
