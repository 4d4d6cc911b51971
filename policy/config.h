/*
 * config.h - sandboxd.conf, built-in defaults, and per-request limits.
 *
 * Contract:
 *  - config_defaults() fills a config with the built-in defaults, which are
 *    exactly the values documented in the sample sandboxd.conf.
 *  - config_load() parses an INI file (CONTRACT section 8) over the defaults.
 *    Unknown sections or keys and bad values are errors naming file and line;
 *    all errors are reported through the callback, and the function returns
 *    the number of errors (0 = usable config).
 *    Details (the sample sandboxd.conf documents them for users):
 *      - the result is the built-in defaults plus the file; what *c held
 *        before does not carry over (a SIGHUP reload drops removed keys);
 *      - *c must hold a config from config_defaults()/config_load() or be
 *        all zero; with 0 errors its old contents are freed and replaced,
 *        with any error *c is left untouched;
 *      - a key set twice in the file is an error naming the first line;
 *      - a missing or unreadable file is one error with line 0;
 *      - pool_size set above max_workers is an error; the built-in pool_size
 *        is lowered to max_workers instead;
 *      - every [defaults] value must be <= its [ceilings] value; the error
 *        names the default's line (or the ceiling's, for a built-in default);
 *      - user and group names are resolved with getpwnam/getgrnam, so do not
 *        call config_load() from two threads at once;
 *      - err may be NULL (errors are then only counted); msg is only valid
 *        during the call and carries no "FILE:LINE: " prefix.
 *  - limits_resolve() turns the `timeout_ms` and `limits` of an execute
 *    request into concrete limits: absent keys take the defaults; a value of
 *    the wrong type is EINVAL ("invalid_params"); a value above the ceiling is
 *    ERANGE ("limit_out_of_range").  A message naming the key goes in errbuf.
 *  - A limit of LIMIT_INF means "infinity" (off).
 *    Only params.timeout_ms and params.limits are read.  *out is written
 *    only on success.
 *  - config_free() releases what config_load()/config_defaults() allocated
 *    and zeroes *c, so freeing twice is harmless.
 *  - config_defaults() aborts when out of memory (it cannot report it).
 */
#ifndef SANDBOXD_CONFIG_H
#define SANDBOXD_CONFIG_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define LIMIT_INF UINT64_MAX

enum priority { PRIO_LOW = 0, PRIO_NORMAL = 1, PRIO_HIGH = 2 };

struct limits {
    uint64_t timeout_ms;         /* wall clock incl. tool waits; LIMIT_INF = off */
    uint64_t max_heap;           /* bytes the Lua state may hold; LIMIT_INF = off */
    uint64_t max_reductions;     /* VM instructions; LIMIT_INF = off (no hook) */
    uint64_t cpu_ms;             /* worker CPU time; LIMIT_INF = off */
    enum priority priority;
    uint64_t max_output_bytes;   /* cap on captured print output */
    uint64_t max_bindings_bytes; /* cap on returned bindings */
};

enum log_level { LOG_LVL_ERROR = 0, LOG_LVL_WARNING, LOG_LVL_NOTICE, LOG_LVL_INFO, LOG_LVL_DEBUG };

struct config {
    /* [daemon] */
    char    *socket;            /* owned; default "/run/sandboxd/sandboxd.sock" */
    mode_t   socket_mode;       /* default 0660 */
    char    *socket_group;      /* owned or NULL: group of the socket file */
    uid_t   *allow_uids;        /* owned array */
    size_t   n_allow_uids;
    gid_t   *allow_gids;        /* owned array */
    size_t   n_allow_gids;
    unsigned max_workers;       /* default 16 */
    unsigned max_queue;         /* default 256 */
    unsigned max_connections;   /* open client connections at once; default 1024 */
    unsigned pool_size;         /* warm workers kept ready; default 4, <= max_workers */
    size_t   max_message_bytes; /* default 16 MiB */
    size_t   max_input_bytes;   /* all client input buffers together; default
                                 * 1 GiB, at least max_message_bytes + 2 */
    size_t   max_code_bytes;    /* default 65536 */
    enum log_level log_level;   /* default info */
    unsigned shutdown_grace_ms; /* default 5000 */
    /* [worker]: applied when the daemon runs as root (issue: containment) */
    char    *worker_user;       /* owned or NULL; default "nobody" */
    char    *worker_group;      /* owned or NULL; default "nogroup" */
    char    *worker_chroot;     /* owned or NULL (no chroot); default "/var/empty";
                                   created if missing and checked at start (as
                                   root), see daemon/zygote.c decide_layers */
    /* [defaults] and [ceilings] */
    struct limits defaults;
    struct limits ceilings;
};

typedef void (*config_error_fn)(void *ctx, const char *file, int line, const char *msg);

void config_defaults(struct config *c);
int  config_load(struct config *c, const char *path, config_error_fn err, void *ctx);
void config_free(struct config *c);

/* params may be NULL.  Returns 0, or EINVAL / ERANGE with errbuf set. */
int limits_resolve(const struct config *c, const json_t *params, struct limits *out,
                   char *errbuf, size_t errlen);

/* JSON form of one limits struct (integers, "infinity", priority names);
 * new reference, or NULL when out of memory or a value other than LIMIT_INF
 * is above INT64_MAX (config_load and limits_resolve never produce one).
 * Used by `describe`. */
json_t *limits_to_json(const struct limits *l);

/* "low", "normal", "high"; "unknown" for an invalid p */
const char *priority_name(enum priority p);
/* nice value a worker runs at for priority p: low 10, normal 5, high 0
 * (never below the daemon's own 0); an invalid p gets 10 */
int priority_nice(enum priority p);

#endif
