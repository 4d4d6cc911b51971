-- expect: error reductions_limit
-- limits: {"max_reductions": 1000000}
-- timeout_ms: 3000
-- output_lacks: exceeded
-- output_lacks: escaped
-- why: xpcall with a C handler (print) that never reaches the hook: a fatal limit must skip the user's handler entirely, so nothing is printed
xpcall(function() while true do end end, print)
print("escaped")
