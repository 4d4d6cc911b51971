-- expect: ok
-- value: [true, 0, 0, 0, 2, false, 9007199254740992, 16, false, false, false, false, false, "000000001.00"]
-- why: integer and library corner cases (mininteger // -1, % -1, fmod, shifts, division by zero, pack sizes, utf8 range, huge unpack ranges like CVE-2025-46817, format widths) stay inside the stock checks: values or ordinary errors, never traps
return {
  math.mininteger // -1 == math.mininteger,
  math.mininteger % -1,
  math.fmod(math.mininteger, -1),
  1 << 64,
  1 >> -1,
  (pcall(function() return 1 // 0 end)),
  math.tointeger(2^53),
  #string.pack("i16", -1),
  (pcall(string.pack, "i17", 1)),
  (pcall(utf8.char, 0x80000000)),
  (pcall(table.unpack, {}, math.mininteger, math.maxinteger)),
  (pcall(table.unpack, {}, 1, 1e8)),
  (pcall(string.format, "%100d", 1)),
  string.format("%012.2f", 1),
}
