-- expect: ok
-- value: [null, null, null, "\ufffd\ufffd", {"true": 1, "1.5": 2}, null, null]
-- why: NaN, infinities, invalid UTF-8, odd keys (boolean, float, table, function), functions and threads: all get the documented substitutes, the reply stays valid JSON
return 0/0, math.huge, -math.huge, "\xff\xfe",
  {[true] = 1, [1.5] = 2, [{}] = 3, [print] = 4, f = print},
  print, coroutine.create(print)
