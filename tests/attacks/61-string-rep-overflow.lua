-- expect: ok
-- value: [false, false, false, "", "", "abab"]
-- limits: {"max_heap": 33554432}
-- why: size arithmetic overflow in string.rep (count near 2^63, a separator, negative counts) must give the string error or "", never a wrapped small size
local r = {}
r[1] = pcall(string.rep, "x", math.maxinteger, "yy")
r[2] = pcall(string.rep, "ab", 1 << 62)
r[3] = pcall(string.rep, "", math.maxinteger, "s")
r[4] = string.rep("ab", math.mininteger)
r[5] = string.rep("ab", 0, "sep")
r[6] = string.rep("ab", 2)
return r
