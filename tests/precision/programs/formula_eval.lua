-- Evaluate user formulas over rows of data by compiling each formula with load().
local formulas = {
  "price * qty",
  "price * qty * (1 - discount)",
  "(price - cost) * qty",
  "math.max(0, stock - qty)",
  "qty > 10 and 'bulk' or 'retail'",
  "math.floor(price * 1.2 * 100) / 100",
}
local compiled = {}
for i, f in ipairs(formulas) do
  local fn, err = load("local row = ... return " .. f:gsub("(%a[%w_]*)", function(name)
    if name == "math" or name == "string" or name == "floor" or name == "max" or name == "and"
       or name == "or" or name == "bulk" or name == "retail" or name == "f" then return name end
    return "row." .. name
  end), "formula" .. i, "t", {math = math, string = string})
  assert(fn, err)
  compiled[i] = fn
end
local totals, labels = {}, {}
for r = 1, 6000 do
  local row = {price = 5 + r % 50, qty = r % 17, discount = (r % 5) / 20, cost = 3 + r % 20, stock = r % 40}
  for i, fn in ipairs(compiled) do
    local v = fn(row)
    if type(v) == "number" then totals[i] = (totals[i] or 0) + v
    else labels[v] = (labels[v] or 0) + 1 end
  end
  -- and a one-off expression per row, compiled fresh, as an agent's REPL would
  local once = load("return " .. r .. " % 7 + " .. (r % 3))
  totals[#formulas + 1] = (totals[#formulas + 1] or 0) + once()
end
local out = {}
for i = 1, #formulas + 1 do out[i] = string.format("%.2f", totals[i] or 0) end
local keys = {}
for k, n in pairs(labels) do keys[#keys + 1] = k .. "=" .. n end
table.sort(keys)
return {totals = table.concat(out, " "), labels = table.concat(keys, " ")}
