-- Simulate accounts and transfers, reject overdrafts, and print statements.
local accounts = {}
for i = 1, 500 do accounts[i] = {id = string.format("ACC%04d", i), balance = 1000 + i * 3, history = {}} end
local s = 8
local function rnd(n) s = (s * 1103515245 + 12345) % 2147483648; return (s >> 8) % n + 1 end
local rejected = 0
for t = 1, 30000 do
  local from, to = accounts[rnd(#accounts)], accounts[rnd(#accounts)]
  local amount = rnd(50000) / 100
  if from ~= to then
    if from.balance >= amount then
      from.balance = from.balance - amount
      to.balance = to.balance + amount
      from.history[#from.history + 1] = string.format("T%05d -%.2f to %s", t, amount, to.id)
      to.history[#to.history + 1] = string.format("T%05d +%.2f from %s", t, amount, from.id)
    else
      rejected = rejected + 1
    end
  end
end
local statements, total = {}, 0
for _, a in ipairs(accounts) do
  total = total + a.balance
  statements[#statements + 1] = string.format("%s balance %.2f (%d entries)\n  %s", a.id, a.balance,
    #a.history, table.concat(a.history, "\n  "))
end
local text = table.concat(statements, "\n")
return {total = string.format("%.2f", total), rejected = rejected, statement_bytes = #text}
