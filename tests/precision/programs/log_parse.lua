-- Parse access-log lines, aggregate by status and path, compute latency percentiles.
local paths = {"/", "/login", "/api/items", "/api/items/42", "/static/app.js", "/search?q=lua", "/logout"}
local methods = {"GET", "GET", "GET", "POST", "PUT", "DELETE"}
local statuses = {200, 200, 200, 200, 301, 404, 500, 503}
local logs = {}
local s = 7
local function r(n) s = (s * 6364136223846793005 + 1442695040888963407) s = s & 0x7fffffffffffffff return (s >> 33) % n + 1 end
for i = 1, 20000 do
  logs[i] = string.format('10.0.%d.%d - - [12/Mar/2024:10:%02d:%02d +0000] "%s %s HTTP/1.1" %d %d %dms',
    r(255) - 1, r(255) - 1, r(60) - 1, r(60) - 1, methods[r(#methods)], paths[r(#paths)],
    statuses[r(#statuses)], r(50000), r(2000))
end

local by_status, by_path, latencies = {}, {}, {}
for _, line in ipairs(logs) do
  local ip, method, path, status, bytes, ms =
    line:match('^(%S+) %S+ %S+ %[[^%]]+%] "(%u+) (%S+) [^"]+" (%d+) (%d+) (%d+)ms$')
  status = tonumber(status)
  by_status[status] = (by_status[status] or 0) + 1
  local p = by_path[path] or {hits = 0, bytes = 0}
  p.hits, p.bytes = p.hits + 1, p.bytes + tonumber(bytes)
  by_path[path] = p
  latencies[#latencies + 1] = tonumber(ms)
end
table.sort(latencies)
local function pct(q) return latencies[math.ceil(#latencies * q)] end
local codes = {}
for code, n in pairs(by_status) do codes[#codes + 1] = code .. ":" .. n end
table.sort(codes)
return {statuses = table.concat(codes, " "), p50 = pct(0.5), p95 = pct(0.95), p99 = pct(0.99),
        api_hits = by_path["/api/items"].hits}
