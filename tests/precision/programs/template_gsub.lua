-- Render a mail template for many customers with gsub and a lookup table.
local template = [[
Dear {{title}} {{name}},

Your order #{{order}} of {{count}} item(s) totalling {{total}} has shipped to {{city}}.
Expected delivery: {{eta}}. Reference {{ref}}.

Regards,
{{company}} support
]]
local cities = {"Lisbon", "Oslo", "Nairobi", "Lima", "Osaka", "Quebec"}
local out, bytes, rendered = {}, 0, {}
for i = 1, 6000 do
  local vars = {
    title = (i % 2 == 0) and "Ms." or "Mr.",
    name = "Customer" .. i,
    order = tostring(100000 + i),
    count = tostring(i % 9 + 1),
    total = string.format("%.2f EUR", (i * 37 % 10000) / 100),
    city = cities[i % #cities + 1],
    eta = string.format("2024-04-%02d", i % 28 + 1),
    ref = string.format("%08X", i * 2654435761 % 4294967296),
    company = "Acme",
  }
  local text, n = template:gsub("{{(%w+)}}", vars)
  bytes = bytes + #text
  rendered[#rendered + 1] = text
  if i % 1000 == 0 then out[#out + 1] = text:match("order #(%d+)") .. ":" .. n end
end
return {bytes = bytes, batch = #table.concat(rendered, "\f"), samples = table.concat(out, ",")}
