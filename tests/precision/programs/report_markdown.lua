-- Build a markdown report of employees by department with padded columns.
local first = {"Ada", "Grace", "Linus", "Ken", "Barbara", "Dennis", "Margaret", "Alan", "Edsger", "Frances"}
local last = {"Lovelace", "Hopper", "Torvalds", "Thompson", "Liskov", "Ritchie", "Hamilton", "Turing", "Dijkstra", "Allen"}
local depts = {"Engineering", "Research", "Operations", "Sales", "Support"}

local staff = {}
for i = 1, 3000 do
  staff[i] = {
    name = first[i % #first + 1] .. " " .. last[(i * 7) % #last + 1],
    dept = depts[(i * 3) % #depts + 1],
    salary = 40000 + (i * 7919) % 90000,
    years = i % 25,
  }
end
table.sort(staff, function(a, b)
  if a.dept ~= b.dept then return a.dept < b.dept end
  if a.salary ~= b.salary then return a.salary > b.salary end
  return a.name < b.name
end)

local lines = {"# Staff report", "", "| # | Name | Department | Salary | Years |", "|---|---|---|---:|---:|"}
local by_dept = {}
for i, p in ipairs(staff) do
  lines[#lines + 1] = string.format("| %4d | %-20s | %-12s | %10s | %3d |", i, p.name, p.dept,
    string.format("$%d,%03d", p.salary // 1000, p.salary % 1000), p.years)
  local d = by_dept[p.dept] or {n = 0, total = 0}
  d.n, d.total = d.n + 1, d.total + p.salary
  by_dept[p.dept] = d
end
lines[#lines + 1] = ""
lines[#lines + 1] = "## Averages"
for _, name in ipairs(depts) do
  local d = by_dept[name]
  lines[#lines + 1] = string.format("- %s: %d people, average $%.2f", name, d.n, d.total / d.n)
end
local report = table.concat(lines, "\n")
return {length = #report, lines = #lines, last = lines[#lines]}
