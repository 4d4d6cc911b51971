-- expect: ok
-- value: "contained"
-- why: os.remove/rename/tmpname/setlocale/exit/getenv/execute must all be absent (file damage, locale-dependent strcoll)
for _, k in ipairs({"remove", "rename", "tmpname", "setlocale", "exit", "getenv", "execute"}) do
  if os[k] ~= nil then return "escaped: os." .. k end
end
return "contained"
