-- expect: ok
-- value_contains: attempt to load a binary chunk
-- why: load a precompiled binary chunk (luac5.3 of 'return "escaped"'); binary chunks are arbitrary memory access (CVE-2015-4335 class) and load must be text only
local bytecode = "\27\76\117\97\83\0\25\147\13\10\26\10\4\8\4\8\8\120\86\0\0\0\0\0\0\0\0\0\0\0\40\119\64\1\0\0\0\0\0\0\0\0\0\0\1\2\3\0\0\0\1\0\0\0\38\0\0\1\38\0\128\0\1\0\0\0\4\8\101\115\99\97\112\101\100\1\0\0\0\1\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"
local f, err = load(bytecode)
if f then return f() end
return err
