/* Runs in: supervisor */
/*
 * limits.h - the per-request limits: their names, their JSON forms, and how
 * a request's `timeout_ms` and `limits` are resolved against defaults and
 * ceilings.
 *
 * Contract:
 *  - A limit of LIMIT_INF means "infinity" (off).  Every other value is at
 *    most LIMIT_MAX, so that it fits a JSON integer.
 *  - limit_keys[] is the one table of numeric limits: the config reader's
 *    [defaults]/[ceilings] sections, limits_resolve() and limits_to_json()
 *    all walk it, so a limit added here exists in all three.  The priority
 *    is not numeric; it is handled beside the table (LIMIT_KEY_PRIORITY).
 *  - limits_resolve() turns the `timeout_ms` and `limits` of a request into
 *    concrete limits: absent keys take *defaults; a value of the wrong type is
 *    EINVAL ("invalid_params"); a value above *ceilings is ERANGE
 *    ("limit_out_of_range").  A message naming the key goes in errbuf.  Only
 *    params.timeout_ms and params.limits are read; *out is written only on
 *    success.  A session chunk passes the session's limits as both defaults
 *    and ceilings, so a chunk may narrow them and never widen them.
 *  - Nothing here keeps state; the tables are const.  Pure functions, safe
 *    from any process (the worker never calls them, though).
 */
#ifndef SANDBOXD_LIMITS_H
#define SANDBOXD_LIMITS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define LIMIT_INF UINT64_MAX
/* Largest number a limit may hold: it must fit a JSON integer (jansson's
 * json_int_t is a signed 64-bit integer), both in requests and in describe. */
#define LIMIT_MAX ((uint64_t)INT64_MAX)

enum priority { PRIO_LOW = 0, PRIO_NORMAL = 1, PRIO_HIGH = 2 };

struct limits {
    uint64_t timeout_ms;         /* wall clock incl. tool waits; LIMIT_INF = off */
    uint64_t max_heap;           /* bytes the Lua state may hold; LIMIT_INF = off */
    uint64_t max_reductions;     /* VM instructions; LIMIT_INF = off (no hook) */
    uint64_t cpu_ms;             /* worker CPU time; LIMIT_INF = off */
    enum priority priority;
    uint64_t max_output_bytes;   /* cap on captured print output */
    uint64_t max_bindings_bytes; /* cap on returned bindings */
    uint64_t max_tool_calls;     /* tool calls of one execution (one session chunk);
                                  * LIMIT_INF = off */
};

/* Flags of a numeric limit key. */
enum { LK_INF = 1u << 0,    /* "infinity" (LIMIT_INF) allowed */
       LK_SUFFIX = 1u << 1, /* a size: K/M/G suffixes allowed in the file */
       LK_NONZERO = 1u << 2 /* 0 is refused as ambiguous (Legion's max_heap) */ };

struct limit_key {
    const char *name;
    size_t off; /* offset of a uint64_t in struct limits */
    unsigned flags;
    uint64_t config_max; /* the largest number sandboxd.conf may set (what the
                          * daemon can serve: an answer's output and bindings
                          * must fit a worker's frame and the backlog bound) */
};

/* The numeric limits; limit_keys[0] is timeout_ms (a request carries it in
 * params, not in params.limits). */
#define LIMIT_NKEYS 7
extern const struct limit_key limit_keys[LIMIT_NKEYS];
/* What limit_key_index() answers for "priority". */
#define LIMIT_KEY_PRIORITY LIMIT_NKEYS

/* Index of name in limit_keys, LIMIT_KEY_PRIORITY for "priority", or -1. */
int limit_key_index(const char *name);

static inline uint64_t *limit_field(struct limits *l, const struct limit_key *k)
{
    return (uint64_t *)(void *)((char *)l + k->off);
}

static inline uint64_t limit_get(const struct limits *l, const struct limit_key *k)
{
    return *(const uint64_t *)(const void *)((const char *)l + k->off);
}

/* Text of a limit for messages: "infinity", or v written into buf. */
const char *limit_text(uint64_t v, char *buf, size_t len);

/* params may be NULL.  Returns 0, or EINVAL / ERANGE with errbuf set
 * (errbuf may be NULL). */
int limits_resolve(const struct limits *defaults, const struct limits *ceilings,
                   const json_t *params, struct limits *out, char *errbuf, size_t errlen);

/* JSON form of one limits struct (integers, "infinity", priority names);
 * new reference, or NULL when out of memory or a value other than LIMIT_INF
 * is above LIMIT_MAX (config_load and limits_resolve never produce one).
 * Used by `describe`. */
json_t *limits_to_json(const struct limits *l);

/* "low", "normal", "high"; "unknown" for an invalid p */
const char *priority_name(enum priority p);
/* The priority called name, or -1. */
int priority_from_name(const char *name);
/* The nice value a worker runs at for priority p, given the daemon's own
 * nice value base: high base, normal base + 5, low base + 10, at most 19,
 * so that no worker runs above the daemon however it was started (nice,
 * systemd's Nice=).  A base below 0 counts as 0: a daemon raised above
 * normal does not raise its untrusted workers.  An invalid p is low. */
int priority_nice(enum priority p, int base);

#endif
