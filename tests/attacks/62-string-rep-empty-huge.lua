-- expect: ok
-- value: ["", ""]
-- timeout_ms: 5000
-- max_wall_ms: 2000
-- why: string.rep("", huge) is a pure C loop that never reaches the hook (F9); the sandbox answers "" at once
return {string.rep("", math.maxinteger), string.rep("", math.maxinteger, "")}
