-- expect: error runtime_error
-- message_contains: global 'dofile'
-- why: dofile() with no argument reads stdin (the protocol stream in a naive worker); dofile must not exist
return "escaped: " .. tostring(dofile())
