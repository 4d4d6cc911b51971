-- Parse a generated sales CSV, group by region and product, report totals.
local regions = {"north", "south", "east", "west", "central"}
local products = {"widget", "gadget", "doohickey", "gizmo", "thingamajig", "sprocket"}
local seed = 12345
local function rand(n)
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed % n + 1
end

local lines = {"date,region,product,qty,unit_price"}
for i = 1, 20000 do
  local day = rand(28)
  lines[#lines + 1] = string.format("2024-03-%02d,%s,%s,%d,%.2f",
    day, regions[rand(#regions)], products[rand(#products)], rand(50), rand(10000) / 100)
end
local csv = table.concat(lines, "\n")

local totals, count = {}, 0
for line in csv:gmatch("[^\n]+") do
  local date, region, product, qty, price = line:match("^([^,]+),([^,]+),([^,]+),([^,]+),([^,]+)$")
  if date ~= "date" then
    count = count + 1
    local key = region .. "/" .. product
    local row = totals[key]
    if not row then
      row = {region = region, product = product, qty = 0, revenue = 0}
      totals[key] = row
    end
    row.qty = row.qty + tonumber(qty)
    row.revenue = row.revenue + tonumber(qty) * tonumber(price)
  end
end

local rows = {}
for _, row in pairs(totals) do rows[#rows + 1] = row end
table.sort(rows, function(a, b)
  if a.revenue ~= b.revenue then return a.revenue > b.revenue end
  return a.region .. a.product < b.region .. b.product
end)

local out = {}
for i, row in ipairs(rows) do
  out[i] = string.format("%-8s %-12s %6d %12.2f", row.region, row.product, row.qty, row.revenue)
end
local report = table.concat(out, "\n")
return {rows = #rows, records = count, top = out[1], length = #report}
