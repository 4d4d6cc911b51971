-- expect: ok
-- value: "done"
-- limits: {"max_output_bytes": 1000}
-- output_max_len: 1000
-- output_truncated: true
-- why: one 5 MB print is cut at max_output_bytes, not sent whole
print(string.rep("p", 5000000))
return "done"
