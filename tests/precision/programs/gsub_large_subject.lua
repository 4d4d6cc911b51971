-- Pattern work on a 3 MiB subject: redact numbers, count words, collapse spaces.
local words = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"}
local parts = {}
for i = 1, 200000 do
  parts[i] = words[i % #words + 1] .. ((i % 5 == 0) and ("  " .. i) or "")
end
local text = table.concat(parts, " ")
local redacted, numbers = text:gsub("%d+", "#")
local collapsed, runs = redacted:gsub("%s+", " ")
local count = 0
for _ in collapsed:gmatch("%a+") do count = count + 1 end
local upper = collapsed:sub(1, 200000):upper()
return {bytes = #text, numbers = numbers, runs = runs, words = count, head = upper:sub(1, 40)}
