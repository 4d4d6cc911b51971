-- All permutations of 8 letters (Heap's algorithm), kept as strings, filtered.
local function permutations(items)
  local out = {}
  local a = {table.unpack(items)}
  local n = #a
  local function generate(k)
    if k == 1 then
      out[#out + 1] = table.concat(a)
      return
    end
    generate(k - 1)
    for i = 1, k - 1 do
      if k % 2 == 0 then a[i], a[k] = a[k], a[i] else a[1], a[k] = a[k], a[1] end
      generate(k - 1)
    end
  end
  generate(n)
  return out
end
local perms = permutations({"a", "b", "c", "d", "e", "f", "g", "h"})
local matching = 0
for _, p in ipairs(perms) do
  if p:find("abc", 1, true) or p:match("^h.*a$") then matching = matching + 1 end
end
table.sort(perms)
return {count = #perms, matching = matching, first = perms[1], last = perms[#perms], mid = perms[20000]}
