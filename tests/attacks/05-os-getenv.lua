-- expect: error runtime_error
-- message_contains: field 'getenv'
-- why: read the daemon's environment (API keys) with os.getenv; it must not exist
return "escaped: " .. tostring(os.getenv("SANDBOXD_ATTACK_SECRET") or os.getenv("PATH"))
