-- Count and list the solutions of the N-queens puzzle by backtracking.
local function solve(n)
  local cols, diag1, diag2, placement = {}, {}, {}, {}
  local solutions = {}
  local function place(row)
    if row > n then
      solutions[#solutions + 1] = table.concat(placement, "")
      return
    end
    for c = 1, n do
      if not cols[c] and not diag1[row + c] and not diag2[row - c + n] then
        cols[c], diag1[row + c], diag2[row - c + n] = true, true, true
        placement[row] = string.char(96 + c)
        place(row + 1)
        cols[c], diag1[row + c], diag2[row - c + n] = nil, nil, nil
      end
    end
  end
  place(1)
  return solutions
end
local eight = solve(8)
local nine = solve(10)
table.sort(nine)
local boards = {}
for i, sol in ipairs(nine) do
  local rows = {}
  for r = 1, #sol do
    local c = sol:byte(r) - 96
    rows[r] = string.rep(".", c - 1) .. "Q" .. string.rep(".", #sol - c)
  end
  boards[i] = table.concat(rows, "\n")
end
return {board_bytes = #table.concat(boards, "\n\n"), eight = #eight, nine = #nine, first9 = nine[1], last9 = nine[#nine]}
