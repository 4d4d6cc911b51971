/*
 * fuzz_limits.c - policy/limits.c: a request's `timeout_ms` and `limits`
 * (execute, session/open, and a session chunk narrowing its session's).
 *
 * Input: JSON text, the request's params.  It is resolved against three
 * pairs of defaults and ceilings (the built-in ones, all-infinite ceilings,
 * and tight finite ones).  Checks, for each:
 *  - the answer is 0, EINVAL or ERANGE, with a NUL-terminated message on
 *    failure, and *out untouched on failure;
 *  - on success every limit is at most its ceiling, and a key the params
 *    do not name keeps its default;
 *  - the result resolved again as a session's limits (defaults = ceilings =
 *    the result) with the same params gives the same result: a chunk may
 *    narrow its session's limits and never widen them;
 *  - limits_to_json() of the result, sent back as params, resolves to the
 *    same result (what describe reports is what a request can ask for).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <jansson.h>

#include "policy/limits.h"
#include "tests/fuzz/fuzz_util.h"

static int same(const struct limits *a, const struct limits *b)
{
    for (size_t i = 0; i < LIMIT_NKEYS; i++)
        if (limit_get(a, &limit_keys[i]) != limit_get(b, &limit_keys[i]))
            return 0;
    return a->priority == b->priority;
}

static void check_pair(const struct limits *d, const struct limits *c, const json_t *params)
{
    struct limits out, again, sentinel, back;
    char err[128];
    json_t *lim = json_object_get(params, "limits"), *j, *p2;
    int rc;

    memset(&out, 0xA5, sizeof out);
    sentinel = out;
    err[0] = 'x';
    rc = limits_resolve(d, c, params, &out, err, sizeof err);
    CHECK(rc == 0 || rc == EINVAL || rc == ERANGE, "rc %d", rc);
    if (rc != 0) {
        CHECK(memchr(err, '\0', sizeof err) != NULL, "message not terminated");
        CHECK(memcmp(&out, &sentinel, sizeof out) == 0, "out written on failure");
        return;
    }
    for (size_t i = 0; i < LIMIT_NKEYS; i++) {
        const struct limit_key *k = &limit_keys[i];
        int named = i == 0 ? json_object_get(params, "timeout_ms") != NULL
                           : json_object_get(lim, k->name) != NULL;
        CHECK(limit_get(&out, k) <= limit_get(c, k), "%s above its ceiling", k->name);
        if (!named)
            CHECK(limit_get(&out, k) == limit_get(d, k), "%s lost its default", k->name);
    }
    CHECK(out.priority <= c->priority, "priority above its ceiling");
    if (json_object_get(lim, "priority") == NULL)
        CHECK(out.priority == d->priority, "priority lost its default");

    rc = limits_resolve(&out, &out, params, &again, err, sizeof err);
    CHECK(rc == 0 && same(&again, &out), "narrowing to itself failed (%d: %s)", rc, err);

    j = limits_to_json(&out);
    CHECK(j != NULL, "limits_to_json failed");
    p2 = json_object();
    json_object_set(p2, "timeout_ms", json_object_get(j, "timeout_ms"));
    json_object_del(j, "timeout_ms");
    json_object_set_new(p2, "limits", j);
    rc = limits_resolve(d, c, p2, &back, err, sizeof err);
    CHECK(rc == 0 && same(&back, &out), "describe's form does not resolve back (%d: %s)", rc, err);
    json_decref(p2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct limits builtin_d = {60000, 256000000, LIMIT_INF, LIMIT_INF, PRIO_LOW,
                                            1048576, 10000000, LIMIT_INF};
    static const struct limits builtin_c = {600000, 1073741824, LIMIT_INF, LIMIT_INF, PRIO_HIGH,
                                            16777216, 16777216, LIMIT_INF};
    static const struct limits inf_c = {LIMIT_INF, LIMIT_INF, LIMIT_INF, LIMIT_INF, PRIO_HIGH,
                                        LIMIT_MAX, LIMIT_MAX, LIMIT_INF};
    static const struct limits tight_d = {10, 1, 0, 5, PRIO_LOW, 0, 0, 0};
    static const struct limits tight_c = {100, 1000, 1000, 50, PRIO_NORMAL, 10, 10, 3};
    json_error_t je;
    json_t *params = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);

    if (params == NULL)
        return 0;
    check_pair(&builtin_d, &builtin_c, params);
    check_pair(&builtin_d, &inf_c, params);
    check_pair(&tight_d, &tight_c, params);
    if (!json_is_object(params)) {
        struct limits out;
        CHECK(limits_resolve(&builtin_d, &builtin_c, params, &out, NULL, 0) == EINVAL,
              "non-object params accepted");
    }
    json_decref(params);
    return 0;
}
