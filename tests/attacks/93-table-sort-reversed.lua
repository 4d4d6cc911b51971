-- expect: ok
-- value: [true, 1, 5000, true]
-- why: sorting 5000 reversed numbers makes table.sort seed its pivot with clock() and time() (real syscalls, F15); legitimate code must not die with SIGSYS
local t = {}
for i = 1, 5000 do t[i] = 5001 - i end
table.sort(t)
local sorted = true
for i = 2, #t do if t[i - 1] > t[i] then sorted = false end end
local u = {}
for i = 1, 5000 do u[i] = {k = 5001 - i} end
table.sort(u, function(x, y) return x.k < y.k end)
return {sorted, t[1], t[5000], u[1].k == 1}
