-- expect: error runtime_error
-- message_contains: xxxxxxxxxx
-- message_max_len: 16384
-- limits: {"max_heap": 134217728}
-- why: a 30 MB error message must be truncated before it leaves the worker (and must not blow the 1 MiB message limit)
error(string.rep("x", 30000000), 0)
