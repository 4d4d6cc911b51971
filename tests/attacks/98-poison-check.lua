-- expect: ok
-- value: ["aaa", "1", "function", "nil", "A", 3, "nil"]
-- why: runs after file 97 (serial order) and next to it (parallel): every execution gets a fresh state, so nothing poisoned before is visible
return {string.rep("a", 3), tostring(1), type(pairs), type(getmetatable(_G)), ("a"):upper(),
        select("#", 1, 2, 3), type(rawget(_G, "kept"))}
