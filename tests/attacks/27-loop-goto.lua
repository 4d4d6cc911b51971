-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000}
-- timeout_ms: 5000
-- max_wall_ms: 3000
-- why: an endless goto loop (no loop instruction) must be counted like any other
::top::
goto top
