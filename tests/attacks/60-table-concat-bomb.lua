-- expect: ok
-- value: [false, "resulting string too large"]
-- limits: {"max_heap": 33554432}
-- why: table.concat of 200 x 1 MB pieces of one shared string (the parts cost nothing) would build 200 MB; the pre-check refuses it with the catchable string error
local piece = string.rep("t", 1000000)
local t = {}
for i = 1, 200 do t[i] = piece end
local ok, e = pcall(table.concat, t, piece)
return {ok, (tostring(e):gsub("^.-:%d+: ", ""))}
