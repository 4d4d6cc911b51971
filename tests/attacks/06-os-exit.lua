-- expect: error runtime_error
-- message_contains: field 'exit'
-- why: end the worker without a reply through os.exit; it must not exist, so the error is an ordinary runtime error
os.exit(0, true)
return "escaped"
