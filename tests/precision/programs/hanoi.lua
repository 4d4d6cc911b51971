-- Towers of Hanoi: record every move, then replay them to verify.
local moves = {}
local function hanoi(n, from, to, via)
  if n == 0 then return end
  hanoi(n - 1, from, via, to)
  moves[#moves + 1] = from * 10 + to
  hanoi(n - 1, via, to, from)
end
local n = 16
hanoi(n, 1, 3, 2)
local pegs = {{}, {}, {}}
for d = n, 1, -1 do pegs[1][#pegs[1] + 1] = d end
for _, m in ipairs(moves) do
  local from, to = m // 10, m % 10
  local disk = table.remove(pegs[from])
  local top = pegs[to][#pegs[to]]
  assert(top == nil or top > disk, "illegal move")
  pegs[to][#pegs[to] + 1] = disk
end
return {moves = #moves, done = #pegs[3] == n}
