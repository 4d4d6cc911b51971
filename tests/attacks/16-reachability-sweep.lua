-- expect: ok
-- value: "clean"
-- why: walk every table reachable from _G (and their metatables) looking for any dangerous function under any name a copy could keep
local bad = {
  io = 1, popen = 1, execute = 1, getenv = 1, exit = 1, rename = 1, tmpname = 1,
  setlocale = 1, loadlib = 1, searchpath = 1, dump = 1, sethook = 1, gethook = 1,
  getregistry = 1, getupvalue = 1, setupvalue = 1, upvaluejoin = 1, getlocal = 1,
  dofile = 1, loadfile = 1, require = 1, package = 1, debug = 1, loadstring = 1,
  newproxy = 1, module = 1, _LOADED = 1, _PRELOAD = 1, preload = 1, cpath = 1,
}
local seen, found = {}, {}
if rawget(os, "remove") then found[1] = "os.remove" end  -- (table.remove is fine)
local function walk(t, path)
  if seen[t] then return end
  seen[t] = true
  for k, v in next, t do
    local p = path .. "." .. tostring(k)
    if type(k) == "string" and bad[k] then found[#found + 1] = p end
    if type(v) == "table" then walk(v, p) end
  end
  local mt = getmetatable(t)
  if type(mt) == "table" then walk(mt, path .. "<mt>") end
end
walk(_G, "_G")
local smt = getmetatable("")
if type(smt) == "table" then walk(smt, "<string mt>") end
if #found > 0 then table.sort(found) return "escaped: " .. table.concat(found, " ") end
return "clean"
