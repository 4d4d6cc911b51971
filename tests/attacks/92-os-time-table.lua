-- expect: ok
-- value: ["integer", 5184000.0, "2000", false, true]
-- why: os.time with a date table (mktime: timezone rules) and os.difftime work under the filter; a missing field is an ordinary error
local a = os.time{year = 2000, month = 1, day = 1, hour = 12}
local b = os.time{year = 2000, month = 3, day = 1, hour = 12}
return {math.type(a), os.difftime(b, a), os.date("!%Y", a), (pcall(os.time, {year = 2000})),
        os.time() > a}
