/* Runs in: supervisor */
/*
 * config.h - sandboxd.conf and its built-in defaults.  The per-request
 * limits it holds defaults and ceilings for are in policy/limits.h.
 *
 * Contract:
 *  - config_defaults() fills a config with the built-in defaults, which are
 *    exactly the values documented in the sample sandboxd.conf.
 *  - config_load() parses an INI file (docs/sandboxd.conf.5) over the defaults.
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
 *      - every number has a range (the CONFIG_* bounds, limit_key.config_max):
 *        a value outside it is an error naming the key, the range and the
 *        line, so what loads is what the daemon can serve;
 *      - user and group names are resolved with getpwnam/getgrnam, so do not
 *        call config_load() from two threads at once;
 *      - err may be NULL (errors are then only counted); msg is only valid
 *        during the call and carries no "FILE:LINE: " prefix.
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

#include "common/log.h"          /* enum log_level: the [daemon] log_level key */
#include "policy/limits.h"

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
    size_t   max_backlog_bytes; /* answers not yet read, all connections together;
                                 * default 1 GiB, at least config_answer_max() */
    enum log_level log_level;   /* default info */
    unsigned shutdown_grace_ms; /* default 5000 */
    unsigned max_parallel_calls; /* tool calls of one execution outstanding at
                                  * once under parallel(); default 16, >= 1 */
    unsigned max_sessions;      /* open sessions at once; default 8 */
    unsigned max_sessions_per_connection; /* of them, opened by one connection;
                                 * default 4 */
    unsigned session_idle_timeout_ms; /* default of session/open's
                                  * idle_timeout_ms; default 300000, >= 1 */
    unsigned write_idle_timeout_ms; /* a peer that takes no byte for this long
                                 * while answers wait is disconnected;
                                 * default 60000 */
    unsigned tool_spin_us;      /* a worker waiting for a tool answer looks at
                                 * its channel this long at most before it
                                 * sleeps (its own CPU); default 200,
                                 * <= CHAN_SPIN_US_MAX, 0 = sleep at once */
    unsigned shards;            /* zygotes, each pinned to one CPU with its
                                 * workers when > 1; default 1, at most one
                                 * per CPU the daemon may run on; read at
                                 * start (a reload keeps the running ones) */
    /* [worker]: applied when the daemon runs as root */
    char    *worker_user;       /* owned or NULL; default "nobody" */
    char    *worker_group;      /* owned or NULL; default "nogroup" */
    char    *worker_chroot;     /* owned or NULL (no chroot); default "/var/empty";
                                   created if missing and checked at start (as
                                   root), see policy/probe.c probe_layers */
    /* [defaults] and [ceilings] */
    struct limits defaults;
    struct limits ceilings;
};

/* The ranges of numbers that need more than their type's bound: every value
 * config_load() accepts is one the daemon can serve, on start and on reload
 * (config.c says why each is what it is). */
#define CONFIG_MAX_WORKERS        4096u   /* max_workers, pool_size, max_sessions,
                                           * max_sessions_per_connection */
#define CONFIG_MAX_QUEUE          65536u
#define CONFIG_MAX_SHARDS         64u     /* shards: SHARDS_MAX (daemon/sup.h) */
#define CONFIG_MAX_CONNECTIONS    1048576u
#define CONFIG_MIN_MESSAGE        128u    /* max_message_bytes */
#define CONFIG_MAX_MESSAGE        ((size_t)63 << 20)  /* max_message_bytes, max_code_bytes */
#define CONFIG_MAX_PARALLEL_CALLS 1024u
#define CONFIG_MAX_LIMIT_BYTES    ((uint64_t)1 << 30) /* max_output_bytes, max_bindings_bytes */

typedef void (*config_error_fn)(void *ctx, const char *file, int line, const char *msg);

void config_defaults(struct config *c);
/* The largest answer one execution can produce under c's ceilings: output
 * escaped six-fold (a control byte prints as \u00XX), twice (the live
 * execution/output notifications and the answer's output), the value, the
 * bindings and binding_names, plus 1 MiB for the rest. */
size_t config_answer_max(const struct config *c);
int  config_load(struct config *c, const char *path, config_error_fn err, void *ctx);
void config_free(struct config *c);

#endif
