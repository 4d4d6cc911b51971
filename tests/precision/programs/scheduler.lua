-- A round-robin scheduler of cooperative tasks with sleeping and messages.
local tasks, mailbox, log = {}, {}, {}
local function spawn(name, fn) tasks[#tasks + 1] = {name = name, co = coroutine.create(fn), wake = 0} end
local tick = 0
local function sleep(n) coroutine.yield("sleep", n) end
local function send(to, msg) mailbox[to] = mailbox[to] or {}; table.insert(mailbox[to], msg) end
local function recv(me)
  while not mailbox[me] or #mailbox[me] == 0 do coroutine.yield("wait") end
  return table.remove(mailbox[me], 1)
end
for w = 1, 40 do
  spawn("worker" .. w, function()
    local done = 0
    for job = 1, 60 do
      local acc = 0
      for k = 1, 50 do acc = acc + (job * k) % (w + 3) end
      done = done + acc
      if job % 10 == 0 then send("collector", {w = w, done = done}) end
      sleep(job % 3)
    end
  end)
end
spawn("collector", function()
  for _ = 1, 240 do
    local msg = recv("collector")
    log[#log + 1] = msg.w .. ":" .. msg.done
  end
end)
while #tasks > 0 do
  tick = tick + 1
  local i = 1
  while i <= #tasks do
    local t = tasks[i]
    if t.wake <= tick then
      local ok, what, n = coroutine.resume(t.co)
      assert(ok, what)
      if coroutine.status(t.co) == "dead" then table.remove(tasks, i); i = i - 1
      elseif what == "sleep" then t.wake = tick + n end
    end
    i = i + 1
  end
end
table.sort(log)
return {ticks = tick, messages = #log, first = log[1], last = log[#log]}
