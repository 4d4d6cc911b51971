"""The instruction budget's charges for work beyond VM instructions
(daemon/worker/charge.h; docs/protocol.md, "Limits"): what a chunk is
billed, and that a budget that pays for the work lets it run."""

import sbx


def test_string_bytes_charged(client):
    """A new string costs one reduction per 64 bytes of its length, whoever
    makes it (string.rep, `..`); under 1000 instructions the count hook adds
    nothing, so the reductions are the charges exactly."""
    r = client.exec_ok("local s = string.rep('x', 64000) .. 'y' return #s",
                       limits={"max_reductions": 100000})
    assert r["value"] == 64001
    assert r["stats"]["reductions"] == 1000 + 1000, r
    # strings shorter than 64 bytes cost nothing
    r = client.exec_ok("local n = 0 for i = 1, 100 do n = n + #('s' .. i) end return n",
                       limits={"max_reductions": 100000})
    assert r["stats"]["reductions"] == 0, r


def test_string_doubling_neighbour(client):
    """The neighbour of 246-string-concat-bytes: doubling a string to 1 MiB
    under a budget that pays for its bytes (2 MiB made in all, 32768
    reductions) completes."""
    r = client.exec_ok("local s = 'x' for i = 1, 20 do s = s .. s end return #s",
                       limits={"max_reductions": 40000})
    assert r["value"] == 1 << 20
    assert 32000 <= r["stats"]["reductions"] <= 33000, r
    r = client.execute("local s = 'x' for i = 1, 20 do s = s .. s end return #s",
                       limits={"max_reductions": 20000})
    assert r.kind == "reductions_limit", r


def test_tool_results_not_charged(client):
    """A tool's answer is the client's value, not the chunk's work: a long
    string from a tool costs nothing."""
    big = "z" * 200000
    r = client.execute("return #T.get()", tools=[{"name": "T", "functions": ["get"]}],
                       limits={"max_reductions": 1000},
                       handlers={"T.get": lambda args: big})
    assert r.ok and r.result["value"] == 200000, r
    assert r.result["stats"]["reductions"] == 0, r


# Stock lua5.3's instruction counts (a count hook of period 1 on every
# thread, Lua 5.3.6) of the coroutine programs below.
GENERATOR = ("local gen = coroutine.wrap(function() for i = 1, 166668 do coroutine.yield(i) end end) "
             "local s = 0 for i = 1, 166668 do s = s + gen() end return s")
GENERATOR_STOCK = 1500027
PIPELINE = """
local function producer()
  return coroutine.create(function()
    for i = 1, 20000 do coroutine.yield("line " .. i) end
  end)
end
local function filter(src)
  return coroutine.create(function()
    while true do
      local ok, v = coroutine.resume(src)
      if not v then break end
      if #v % 2 == 0 then coroutine.yield(v:upper()) end
    end
  end)
end
local f = filter(producer())
local n, total = 0, 0
while true do
  local ok, v = coroutine.resume(f)
  if not v then break end
  n = n + 1 total = total + #v
end
return n * 100000 + total
"""
PIPELINE_STOCK = 463688


def test_coroutines_billed_their_instructions(client):
    """A coroutine's countdown runs on across its resumes and it pays each
    period as it begins: a generator loop and a pipeline are billed stock
    Lua's instruction count, to within the main thread's last step (999
    unbilled) and each coroutine's last period (at most 1000 more)."""
    for code, stock, coroutines in ((GENERATOR, GENERATOR_STOCK, 1), (PIPELINE, PIPELINE_STOCK, 2)):
        r = client.exec_ok(code, limits={"max_reductions": 2 * stock})
        red = r["stats"]["reductions"]
        assert stock - 1000 <= red <= stock + 1004 * coroutines, (code, red, stock)


def test_short_coroutines_billed(client):
    """A coroutine that ends before any hook call is still billed what it
    ran: at least its instructions, less than twice them plus 4.  100
    coroutines of about 900 instructions (the neighbour of
    100-coroutine-resume-billing) fit in 200,000; 1000 do not."""
    r = client.exec_ok("for i = 1, 100 do coroutine.wrap(function() for j = 1, 900 do end end)() end "
                       "return 1", limits={"max_reductions": 200000})
    assert 90000 <= r["stats"]["reductions"] <= 2 * 100 * 905 + 1000, r
    r = client.exec_ok("for i = 1, 100 do coroutine.wrap(function() end)() end return 1",
                       limits={"max_reductions": 200000})
    assert r["stats"]["reductions"] <= 1000 + 100 * 4, r
