/*
 * limits.c - the per-request limits: the key table, resolving a request's
 * limits against defaults and ceilings, their JSON form, priorities.
 * Contracts in limits.h.
 */
#include "policy/limits.h"
#include "proto/mutant.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define LIM(f) offsetof(struct limits, f)

const struct limit_key limit_keys[LIMIT_NKEYS] = {
    {"timeout_ms", LIM(timeout_ms), LK_INF, LIMIT_MAX},
    {"max_heap", LIM(max_heap), LK_INF | LK_SUFFIX | LK_NONZERO, LIMIT_MAX},
    {"max_reductions", LIM(max_reductions), LK_INF, LIMIT_MAX},
    {"cpu_ms", LIM(cpu_ms), LK_INF, LIMIT_MAX},
    /* 1 GiB: the answer holds the output escaped up to six-fold, and
     * max_backlog_bytes must hold the largest answer (a ceiling of 2^62
     * lifted that bound to SIZE_MAX); the result frame holds the bindings
     * twice and must stay below 4 GiB */
    {"max_output_bytes", LIM(max_output_bytes), LK_SUFFIX, (uint64_t)1 << 30},
    {"max_bindings_bytes", LIM(max_bindings_bytes), LK_SUFFIX, (uint64_t)1 << 30},
    {"max_tool_calls", LIM(max_tool_calls), LK_INF, LIMIT_MAX},
};

static const char *const prio_names[] = {
    [PRIO_LOW] = "low", [PRIO_NORMAL] = "normal", [PRIO_HIGH] = "high",
};

int limit_key_index(const char *name)
{
    for (size_t i = 0; i < LIMIT_NKEYS; i++)
        if (strcmp(limit_keys[i].name, name) == 0)
            return (int)i;
    return strcmp(name, "priority") == 0 ? LIMIT_KEY_PRIORITY : -1;
}

int priority_from_name(const char *name)
{
    for (size_t i = 0; i < sizeof prio_names / sizeof *prio_names; i++)
        if (strcmp(prio_names[i], name) == 0)
            return (int)i;
    return -1;
}

const char *limit_text(uint64_t v, char *buf, size_t len)
{
    if (v == LIMIT_INF)
        return "infinity";
    snprintf(buf, len, "%llu", (unsigned long long)v);
    return buf;
}

static int fail(char *errbuf, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(char *errbuf, size_t errlen, int code, const char *fmt, ...)
{
    va_list ap;

    if (errbuf && errlen) {
        va_start(ap, fmt);
        vsnprintf(errbuf, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* One numeric limit from JSON v into *out; label names it in messages
 * ("timeout_ms", "limits.max_heap"). */
static int resolve_number(const struct limit_key *k, const char *label, const json_t *v,
                          uint64_t ceiling, uint64_t *out, char *errbuf, size_t errlen)
{
    char b1[24], b2[24];
    uint64_t n;

    if (json_is_integer(v) && json_integer_value(v) >= 0)
        n = (uint64_t)json_integer_value(v);
    else if ((k->flags & LK_INF) && json_is_string(v) &&
             json_string_length(v) == 8 && memcmp(json_string_value(v), "infinity", 8) == 0)
        n = LIMIT_INF;
    else
        return fail(errbuf, errlen, EINVAL, "%s must be a non-negative integer%s", label,
                    (k->flags & LK_INF) ? " or \"infinity\"" : "");
    if (n == 0 && (k->flags & LK_NONZERO))
        return fail(errbuf, errlen, EINVAL,
                    "%s must not be 0 (ambiguous; use \"infinity\" for no limit)", label);
    if (n > ceiling)
        return fail(errbuf, errlen, ERANGE, "%s %s%s%s is above the ceiling %s", label,
                    n == LIMIT_INF ? "\"" : "", limit_text(n, b1, sizeof b1),
                    n == LIMIT_INF ? "\"" : "", limit_text(ceiling, b2, sizeof b2));
    *out = n;
    return 0;
}

static int resolve_priority(const json_t *v, enum priority ceiling, enum priority *out,
                            char *errbuf, size_t errlen)
{
    int i = -1;

    /* exact: "low\u0000x" is not "low" */
    if (json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v))
        i = priority_from_name(json_string_value(v));
    if (i < 0)
        return fail(errbuf, errlen, EINVAL,
                    "limits.priority must be \"low\", \"normal\" or \"high\"");
    if ((enum priority)i > ceiling)
        return fail(errbuf, errlen, ERANGE, "limits.priority \"%s\" is above the ceiling \"%s\"",
                    prio_names[i], prio_names[ceiling]);
    *out = (enum priority)i;
    return 0;
}

/* params.limits: every key known, then each value in table order. */
static int resolve_limits_object(const struct limits *ceilings, const json_t *lim,
                                 struct limits *l, char *errbuf, size_t errlen)
{
    char label[64];
    const char *key;
    json_t *v;
    int rc;

    if (!json_is_object(lim))
        return fail(errbuf, errlen, EINVAL, "limits must be an object");
    /* json_object_foreach only reads, but jansson's iterator wants json_t *. */
    json_object_foreach((json_t *)lim, key, v) {
        int idx = limit_key_index(key);
        if (idx == 0) /* limit_keys[0] is timeout_ms */
            return fail(errbuf, errlen, EINVAL,
                        "unknown key limits.timeout_ms (timeout_ms belongs in params)");
        if (idx < 0)
            return fail(errbuf, errlen, EINVAL, "unknown key limits.%s", key);
    }
    for (size_t i = 1; i < LIMIT_NKEYS; i++) { /* limit_keys[0] is timeout_ms */
        const struct limit_key *k = &limit_keys[i];
        v = json_object_get(lim, k->name);
        if (!v)
            continue;
        snprintf(label, sizeof label, "limits.%s", k->name);
        rc = resolve_number(k, label, v, limit_get(ceilings, k), limit_field(l, k),
                            errbuf, errlen);
        if (rc)
            return rc;
    }
    v = json_object_get(lim, "priority");
    if (v)
        return resolve_priority(v, ceilings->priority, &l->priority, errbuf, errlen);
    return 0;
}

int limits_resolve(const struct limits *defaults, const struct limits *ceilings,
                   const json_t *params, struct limits *out, char *errbuf, size_t errlen)
{
    struct limits l = *defaults;
    const json_t *v;
    int rc;

    if (params) {
        if (!json_is_object(params))
            return fail(errbuf, errlen, EINVAL, "params must be an object");
        v = json_object_get(params, "timeout_ms");
        if (v && (rc = resolve_number(&limit_keys[0], "timeout_ms", v, ceilings->timeout_ms,
                                      &l.timeout_ms, errbuf, errlen)))
            return rc;
        v = json_object_get(params, "limits");
        if (v && (rc = resolve_limits_object(ceilings, v, &l, errbuf, errlen)))
            return rc;
    }
    *out = l;
    return 0;
}

json_t *limits_to_json(const struct limits *l)
{
    json_t *o = json_object();

    if (!o)
        return NULL;
    for (size_t i = 0; i < LIMIT_NKEYS; i++) {
        uint64_t v = limit_get(l, &limit_keys[i]);
        json_t *j;
        if (v == LIMIT_INF)
            j = json_string("infinity");
        else if (v <= LIMIT_MAX)
            j = json_integer((json_int_t)v);
        else
            goto fail; /* not a JSON integer; config and requests never hold it */
        if (json_object_set_new(o, limit_keys[i].name, j) < 0)
            goto fail;
    }
    if (json_object_set_new(o, "priority", json_string(priority_name(l->priority))) < 0)
        goto fail;
    return o;
fail:
    json_decref(o);
    return NULL;
}

const char *priority_name(enum priority p)
{
    if ((unsigned)p < sizeof prio_names / sizeof *prio_names)
        return prio_names[p];
    return "unknown";
}

/* Workers never run above the daemon (nice 0), and never at a negative
 * nice: "high" only means "not lowered".  Unknown values get the lowest. */
int priority_nice(enum priority p, int base)
{
    int step = 10;

    switch (p) {
    case PRIO_HIGH: step = 0; break;
    case PRIO_NORMAL: step = 5; break;
    case PRIO_LOW: break;
    }
    if (base < 0 || MUTANT(PRIO_BASE))  /* above normal: the daemon, not its workers */
        base = 0;
    return base + step < 19 ? base + step : 19;
}
