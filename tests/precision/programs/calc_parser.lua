-- Tokenise and evaluate arithmetic expressions with a recursive-descent parser.
local function tokenize(src)
  local tokens, pos = {}, 1
  while pos <= #src do
    local c = src:sub(pos, pos)
    if c:match("%s") then pos = pos + 1
    elseif c:match("%d") then
      local num = src:match("^%d+%.?%d*", pos)
      tokens[#tokens + 1] = {kind = "num", value = tonumber(num)}
      pos = pos + #num
    else
      tokens[#tokens + 1] = {kind = "op", value = c}
      pos = pos + 1
    end
  end
  return tokens
end

local function evaluate(src)
  local tokens, i = tokenize(src), 1
  local expr
  local function peek() return tokens[i] end
  local function atom()
    local t = tokens[i]
    i = i + 1
    if t.kind == "num" then return t.value end
    if t.value == "(" then
      local v = expr()
      i = i + 1
      return v
    end
    if t.value == "-" then return -atom() end
    error("unexpected " .. tostring(t.value))
  end
  local function term()
    local v = atom()
    while peek() and (peek().value == "*" or peek().value == "/") do
      local op = tokens[i].value
      i = i + 1
      local rhs = atom()
      if op == "*" then v = v * rhs else v = v / rhs end
    end
    return v
  end
  function expr()
    local v = term()
    while peek() and (peek().value == "+" or peek().value == "-") do
      local op = tokens[i].value
      i = i + 1
      local rhs = term()
      if op == "+" then v = v + rhs else v = v - rhs end
    end
    return v
  end
  return expr()
end

local total, errors = 0, 0
for k = 1, 3000 do
  local src = string.format("(%d + %d) * %d - %d / (%d + 1) + -(%d * 2.5)", k, k % 7, k % 13 + 1,
    k * 3, k % 5, k % 11)
  local ok, v = pcall(evaluate, src)
  if ok then total = total + v else errors = errors + 1 end
end
local ok, msg = pcall(evaluate, "(1 + )")
return {total = string.format("%.6f", total), errors = errors, bad = ok, msg = msg:match("unexpected.*")}
