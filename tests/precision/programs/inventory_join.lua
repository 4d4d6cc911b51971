-- Join orders to customers and products by id, aggregate per customer tier.
local customers, products, orders = {}, {}, {}
local tiers = {"bronze", "silver", "gold", "platinum"}
for i = 1, 3000 do customers[i] = {id = i, name = "cust" .. i, tier = tiers[i % #tiers + 1]} end
for i = 1, 500 do products[i] = {sku = string.format("SKU-%04d", i), price = (i * 13 % 5000) / 100 + 1} end
local by_sku = {}
for _, p in ipairs(products) do by_sku[p.sku] = p end
local s = 21
for i = 1, 40000 do
  s = (s * 1103515245 + 12345) % 2147483648
  orders[i] = {customer = (s >> 4) % 3000 + 1, sku = string.format("SKU-%04d", (s >> 12) % 500 + 1),
               qty = (s >> 20) % 5 + 1}
end
local per_tier, per_customer = {}, {}
for _, o in ipairs(orders) do
  local c = customers[o.customer]
  local p = by_sku[o.sku]
  local amount = p.price * o.qty
  per_tier[c.tier] = (per_tier[c.tier] or 0) + amount
  per_customer[c.id] = (per_customer[c.id] or 0) + amount
end
local ranking = {}
for id, total in pairs(per_customer) do ranking[#ranking + 1] = {id = id, total = total} end
table.sort(ranking, function(a, b) if a.total ~= b.total then return a.total > b.total end return a.id < b.id end)
local tiers_out = {}
for _, t in ipairs(tiers) do tiers_out[#tiers_out + 1] = string.format("%s=%.2f", t, per_tier[t]) end
return {tiers = table.concat(tiers_out, " "), best = customers[ranking[1].id].name,
        best_total = string.format("%.2f", ranking[1].total), buyers = #ranking}
