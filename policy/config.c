/*
 * config.c - sandboxd.conf parsing and the built-in defaults.  The limit keys
 * of [defaults] and [ceilings] come from policy/limits.h.
 *
 * The INI syntax is parsed by libinih (Debian's libinih 55).  inih gives its
 * handler no line number and has quirks we do not want, so every line goes
 * through our own reader first (read_line), which:
 *   - counts lines, so the handler can name the line of every error;
 *   - strips leading blanks, so an indented "key = value" is never taken for
 *     an inih multi-line continuation of the previous key;
 *   - cuts a "#" comment that follows a blank (inih itself only knows " ;");
 *   - checks the line shape (comment, [section], key = value) and the length
 *     (inih's fixed buffer) itself, reports what is wrong, and hands inih a
 *     blank line instead, so inih never sees a line it would reject.
 * The handler (on_pair) looks the key up in static tables, refuses
 * duplicates, and parses the value.  Checks between keys (pool_size against
 * max_workers, defaults against ceilings) run once the file is read.
 *
 * Nothing here keeps state between calls; the tables are const.
 */
#include "policy/config.h"

#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <ini.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "proto/chan.h"
#include "proto/mutant.h"

/* Longest message handed to the error callback; lines are short (inih). */
#define MSG_MAX 512

/* ------------------------------------------------------------------ */
/* Tables                                                              */

enum section { SEC_DAEMON, SEC_WORKER, SEC_DEFAULTS, SEC_CEILINGS, SEC_COUNT };

static const char *const section_names[SEC_COUNT] = {
    [SEC_DAEMON] = "daemon", [SEC_WORKER] = "worker",
    [SEC_DEFAULTS] = "defaults", [SEC_CEILINGS] = "ceilings",
};

/* How a [daemon] or [worker] value is parsed, and the type of its field. */
enum kind {
    K_SOCKET,    /* char *: non-empty, fits sun_path */
    K_MODE,      /* mode_t: octal, at most 0777 */
    K_SOCKGROUP, /* char * or NULL: empty = none; a number or a known group */
    K_UIDS,      /* allow_uids / n_allow_uids */
    K_GIDS,      /* allow_gids / n_allow_gids */
    K_UINT,      /* unsigned, >= min */
    K_SIZE,      /* size_t, >= min, K/M/G suffixes */
    K_LOGLEVEL,  /* enum log_level */
    K_USER,      /* char *: the name of a known user (not a number) */
    K_GROUP,     /* char *: the name of a known group (not a number) */
    K_CHROOT,    /* char * or NULL: empty = off, else an absolute path */
};

struct key_spec {
    const char *name;
    enum kind kind;
    size_t off;    /* offset of the field in struct config */
    uint64_t min;  /* K_UINT and K_SIZE: the range accepted; every value in */
    uint64_t max;  /* it is one the daemon can serve (see daemon_keys) */
};

#define CFG(f) offsetof(struct config, f)

/*
 * The range of each number is what the daemon can serve, so a file that
 * checks OK never makes it fail later (config.h, CONFIG_*):
 *  - max_workers, max_sessions: processes; pool_size: started at once at
 *    start-up.  max_queue: executions held with their jobs.
 *  - max_connections: descriptors (the kernel's nr_open is 2^20).
 *  - max_message_bytes: a request's job, and a tool's answer, go to a worker
 *    that reads at most CHAN_JOB_MAX (64 MiB) a frame; 128 bytes at least,
 *    so that a request fits.  max_code_bytes: code arrives in a message.
 *  - max_parallel_calls: every execution (and its worker) allocates a slot
 *    per call (a value of 2^32 - 1 made every execute "out of memory").
 *  - session_idle_timeout_ms: what session/open's idle_timeout_ms may ask.
 */
#define DAY_MS 86400000u
_Static_assert(CONFIG_MAX_MESSAGE + ((size_t)1 << 20) <= CHAN_JOB_MAX &&
               CONFIG_MAX_MESSAGE + ((size_t)1 << 20) <= CHAN_TOOL_RESULT_MAX,
               "a job or tool answer of max_message_bytes must fit a worker's frame");
_Static_assert(CONFIG_MAX_LIMIT_BYTES == (uint64_t)1 << 30,
               "limits.c config_max of max_output_bytes and max_bindings_bytes");

static const struct key_spec daemon_keys[] = {
    {"socket", K_SOCKET, CFG(socket), 0, 0},
    {"socket_mode", K_MODE, CFG(socket_mode), 0, 0},
    {"socket_group", K_SOCKGROUP, CFG(socket_group), 0, 0},
    {"allow_uids", K_UIDS, 0, 0, 0},
    {"allow_gids", K_GIDS, 0, 0, 0},
    {"max_workers", K_UINT, CFG(max_workers), 1, CONFIG_MAX_WORKERS},
    {"max_queue", K_UINT, CFG(max_queue), 0, CONFIG_MAX_QUEUE},
    {"max_connections", K_UINT, CFG(max_connections), 1, CONFIG_MAX_CONNECTIONS},
    {"pool_size", K_UINT, CFG(pool_size), 0, CONFIG_MAX_WORKERS},
    {"max_message_bytes", K_SIZE, CFG(max_message_bytes), CONFIG_MIN_MESSAGE,
     CONFIG_MAX_MESSAGE},
    {"max_input_bytes", K_SIZE, CFG(max_input_bytes), 1, SIZE_MAX},
    {"max_code_bytes", K_SIZE, CFG(max_code_bytes), 1, CONFIG_MAX_MESSAGE},
    {"max_backlog_bytes", K_SIZE, CFG(max_backlog_bytes), 1, SIZE_MAX},
    {"log_level", K_LOGLEVEL, CFG(log_level), 0, 0},
    {"shutdown_grace_ms", K_UINT, CFG(shutdown_grace_ms), 0, DAY_MS},
    {"max_parallel_calls", K_UINT, CFG(max_parallel_calls), 1, CONFIG_MAX_PARALLEL_CALLS},
    {"max_sessions", K_UINT, CFG(max_sessions), 0, CONFIG_MAX_WORKERS},
    {"max_sessions_per_connection", K_UINT, CFG(max_sessions_per_connection), 1,
     CONFIG_MAX_WORKERS},
    {"session_idle_timeout_ms", K_UINT, CFG(session_idle_timeout_ms), 1, DAY_MS},
    {"tool_spin_us", K_UINT, CFG(tool_spin_us), 0, CHAN_SPIN_US_MAX},
    {"shards", K_UINT, CFG(shards), 1, CONFIG_MAX_SHARDS},
    {"write_idle_timeout_ms", K_UINT, CFG(write_idle_timeout_ms), 1000, DAY_MS},
};

static const struct key_spec worker_keys[] = {
    {"user", K_USER, CFG(worker_user), 0, 0},
    {"group", K_GROUP, CFG(worker_group), 0, 0},
    {"chroot", K_CHROOT, CFG(worker_chroot), 0, 0},
};

#define N_DAEMON_KEYS (sizeof daemon_keys / sizeof daemon_keys[0])
#define N_WORKER_KEYS (sizeof worker_keys / sizeof worker_keys[0])
/* Index of "priority" among a limits section's keys (after the numeric ones). */
#define PRIO_KEY LIMIT_KEY_PRIORITY
#define MAX_SECTION_KEYS N_DAEMON_KEYS
_Static_assert(LIMIT_NKEYS + 1 <= N_DAEMON_KEYS && N_WORKER_KEYS <= N_DAEMON_KEYS,
               "MAX_SECTION_KEYS must hold every section's keys");

static const char *const log_level_names[] = {
    [LOG_LVL_ERROR] = "error", [LOG_LVL_WARNING] = "warning", [LOG_LVL_NOTICE] = "notice",
    [LOG_LVL_INFO] = "info", [LOG_LVL_DEBUG] = "debug",
};

static void *config_field(struct config *c, const struct key_spec *k)
{
    return (char *)c + k->off;
}

/* Index of a key in keys[0..n), or -1. */
static int key_index(const struct key_spec *keys, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(keys[i].name, name) == 0)
            return (int)i;
    return -1;
}

static int name_index(const char *const *names, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return (int)i;
    return -1;
}

/* ------------------------------------------------------------------ */
/* Built-in defaults                                                   */

/* Fills c with the built-in defaults.  Returns 0, or -1 when out of memory
 * (then c holds what was allocated so far, for config_free()). */
static int defaults_into(struct config *c)
{
    memset(c, 0, sizeof *c);
    c->socket_mode = 0660;
    c->max_workers = 16;
    c->max_queue = 256;
    c->max_connections = 1024;
    c->pool_size = 4;
    c->max_message_bytes = (size_t)16 << 20;
    c->max_input_bytes = (size_t)1 << 30;
    c->max_backlog_bytes = (size_t)1 << 30;
    c->max_code_bytes = 65536;
    c->log_level = LOG_LVL_INFO;
    c->shutdown_grace_ms = 5000;
    c->max_parallel_calls = 16;
    c->max_sessions = 8;
    c->max_sessions_per_connection = 4;
    c->session_idle_timeout_ms = 300000;
    c->tool_spin_us = 200;
    c->shards = 1;
    c->write_idle_timeout_ms = 60000;
    c->defaults = (struct limits){
        .timeout_ms = 60000,
        .max_heap = 256000000,
        .max_reductions = LIMIT_INF,
        .cpu_ms = LIMIT_INF,
        .priority = PRIO_LOW,
        .max_output_bytes = (uint64_t)1 << 20,
        .max_bindings_bytes = 10000000,
        .max_tool_calls = LIMIT_INF,
    };
    c->ceilings = (struct limits){
        .timeout_ms = 600000,
        .max_heap = (uint64_t)1 << 30,
        .max_reductions = LIMIT_INF,
        .cpu_ms = LIMIT_INF,
        .priority = PRIO_HIGH,
        .max_output_bytes = (uint64_t)16 << 20,
        .max_bindings_bytes = (uint64_t)16 << 20,
        .max_tool_calls = LIMIT_INF,
    };
    c->socket = strdup("/run/sandboxd/sandboxd.sock");
    c->worker_user = strdup("nobody");
    c->worker_group = strdup("nogroup");
    c->worker_chroot = strdup("/var/empty");
    if (!c->socket || !c->worker_user || !c->worker_group || !c->worker_chroot)
        return -1;
    return 0;
}

/* The API gives config_defaults() no way to fail; a daemon that cannot
 * allocate four short strings at start-up cannot do anything useful. */
void config_defaults(struct config *c)
{
    if (defaults_into(c) < 0) {
        fputs("sandboxd: out of memory\n", stderr);
        abort();
    }
}

void config_free(struct config *c)
{
    free(c->socket);
    free(c->socket_group);
    free(c->allow_uids);
    free(c->allow_gids);
    free(c->worker_user);
    free(c->worker_group);
    free(c->worker_chroot);
    memset(c, 0, sizeof *c);
}

/* ------------------------------------------------------------------ */
/* Value parsers.  Each returns 0, or -1 with a reason in why.          */

/* A non-negative decimal integer, optionally followed by one of K M G
 * (either case; powers of 1024) when suffix is set, at most max.  No sign,
 * no blanks, no other trailing characters. */
static int parse_number(const char *s, bool suffix, uint64_t max, uint64_t *out,
                        char *why, size_t whylen)
{
    char *end;
    unsigned long long v;
    uint64_t mult = 1;

    if (!isdigit((unsigned char)s[0])) {
        snprintf(why, whylen, "%s", s[0] ? "not a non-negative integer" : "empty value");
        return -1;
    }
    errno = 0;
    v = strtoull(s, &end, 10);
    if (suffix && *end && !end[1]) {
        switch (*end) {
        case 'K': case 'k': mult = (uint64_t)1 << 10; end++; break;
        case 'M': case 'm': mult = (uint64_t)1 << 20; end++; break;
        case 'G': case 'g': mult = (uint64_t)1 << 30; end++; break;
        default: break;
        }
    }
    if (*end) {
        snprintf(why, whylen, suffix ? "expected an integer with an optional K, M or G suffix"
                                     : "not an integer");
        return -1;
    }
    if (errno == ERANGE || v > max / mult) {
        snprintf(why, whylen, "too large, at most %llu", (unsigned long long)max);
        return -1;
    }
    *out = (uint64_t)v * mult;
    return 0;
}

/* A user or group id written as a number; (id_t)-1 is not an id. */
static int parse_id(const char *s, unsigned *out)
{
    uint64_t v;
    char why[8];

    if (parse_number(s, false, UINT32_MAX - 1u, &v, why, sizeof why) < 0)
        return -1;
    *out = (unsigned)v;
    return 0;
}

static bool all_digits(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return false;
    return true;
}

/* Resolves a user (is_group false) or group name or number to its id.
 * getpwnam/getgrnam are not thread-safe: see config.h. */
static int resolve_id(const char *s, bool is_group, unsigned *out, char *why, size_t whylen)
{
    if (all_digits(s)) {
        if (parse_id(s, out) == 0)
            return 0;
        snprintf(why, whylen, "%s id out of range", is_group ? "group" : "user");
        return -1;
    }
    if (is_group) {
        const struct group *g = getgrnam(s);
        if (g) {
            *out = (unsigned)g->gr_gid;
            return 0;
        }
    } else {
        const struct passwd *pw = getpwnam(s);
        if (pw) {
            *out = (unsigned)pw->pw_uid;
            return 0;
        }
    }
    snprintf(why, whylen, "unknown %s '%s'", is_group ? "group" : "user", s);
    return -1;
}

_Static_assert(sizeof(uid_t) == sizeof(unsigned) && sizeof(gid_t) == sizeof(unsigned),
               "allow lists are parsed as unsigned arrays");

/* "1000 alice  2000": blank-separated numbers or names.  An empty value is
 * an empty list (no allow list).  On success *ids (owned by the caller,
 * NULL when empty) and *n are set. */
static int parse_id_list(const char *s, bool is_group, unsigned **ids, size_t *n,
                         char *why, size_t whylen)
{
    char *copy = strdup(s), *save = NULL, *tok;
    unsigned *arr = NULL;
    size_t count = 0;
    int rc = -1;

    if (!copy)
        goto oom;
    arr = malloc((strlen(s) / 2 + 1) * sizeof *arr); /* >= number of tokens */
    if (!arr)
        goto oom;
    for (tok = strtok_r(copy, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save))
        if (resolve_id(tok, is_group, &arr[count++], why, whylen) < 0)
            goto out;
    if (count == 0) {
        free(arr);
        arr = NULL;
    }
    *ids = arr;
    *n = count;
    arr = NULL;
    rc = 0;
    goto out;
oom:
    snprintf(why, whylen, "out of memory");
out:
    free(arr);
    free(copy);
    return rc;
}

/* Replaces the owned string *field by a copy of s, or by NULL when s is
 * NULL. */
static int set_string(char **field, const char *s, char *why, size_t whylen)
{
    char *copy = NULL;

    if (s && !(copy = strdup(s))) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    free(*field);
    *field = copy;
    return 0;
}

/* [worker] user or group: a name that exists now, kept as written.  Only
 * names: the daemon (policy/probe.c) looks them up with getpwnam/getgrnam
 * and, when that fails, leaves workers with its own (root) ids. */
static int parse_principal(char **field, const char *s, bool is_group, char *why, size_t whylen)
{
    bool known = is_group ? getgrnam(s) != NULL : getpwnam(s) != NULL;

    if (!*s) {
        snprintf(why, whylen, "empty value (workers must not keep the daemon's %s)",
                 is_group ? "group" : "user");
        return -1;
    }
    if (!known) {
        snprintf(why, whylen, "unknown %s '%s' (a name is needed, not a number)",
                 is_group ? "group" : "user", s);
        return -1;
    }
    return set_string(field, s, why, whylen);
}

static int parse_mode(mode_t *field, const char *s, char *why, size_t whylen)
{
    char *end;
    unsigned long v;

    if (!*s || strspn(s, "01234567") != strlen(s)) {
        snprintf(why, whylen, "expected an octal mode such as 0660");
        return -1;
    }
    errno = 0;
    v = strtoul(s, &end, 8);
    if (errno == ERANGE || v > 0777) {
        snprintf(why, whylen, "expected an octal mode of at most 0777");
        return -1;
    }
    *field = (mode_t)v;
    return 0;
}

/* n within [min, max]; else the range in why.  The bounds of the audit
 * (key_spec, limit_key) make a value the daemon cannot serve an error. */
static int in_range(uint64_t n, uint64_t min, uint64_t max, char *why, size_t whylen)
{
    if (MUTANT(CONFIG_RANGE))
        max = UINT64_MAX;               /* mutant: only the type's bound */
    if (n >= min && n <= max)
        return 1;
    if (max == SIZE_MAX || max == UINT64_MAX)
        snprintf(why, whylen, "out of range: at least %llu", (unsigned long long)min);
    else
        snprintf(why, whylen, "out of range: from %llu to %llu", (unsigned long long)min,
                 (unsigned long long)max);
    return 0;
}

static int parse_daemon_value(struct config *c, const struct key_spec *k, const char *v,
                              char *why, size_t whylen)
{
    void *f = config_field(c, k);
    unsigned id;
    uint64_t n;
    int i;

    switch (k->kind) {
    case K_SOCKET:
        if (!*v || strlen(v) >= sizeof ((struct sockaddr_un *)0)->sun_path) {
            snprintf(why, whylen, "%s", *v ? "path too long for a Unix socket" : "empty value");
            return -1;
        }
        return set_string(f, v, why, whylen);
    case K_MODE:
        return parse_mode(f, v, why, whylen);
    case K_SOCKGROUP:
        if (!*v)
            return set_string(f, NULL, why, whylen);
        if (resolve_id(v, true, &id, why, whylen) < 0)
            return -1;
        return set_string(f, v, why, whylen);
    case K_UIDS:
    case K_GIDS: {
        unsigned *ids;
        size_t count;
        if (parse_id_list(v, k->kind == K_GIDS, &ids, &count, why, whylen) < 0)
            return -1;
        /* uid_t and gid_t are unsigned 32-bit on Linux: same layout. */
        if (k->kind == K_UIDS) {
            free(c->allow_uids);
            c->allow_uids = (uid_t *)ids;
            c->n_allow_uids = count;
        } else {
            free(c->allow_gids);
            c->allow_gids = (gid_t *)ids;
            c->n_allow_gids = count;
        }
        return 0;
    }
    case K_UINT:
    case K_SIZE:
        if (parse_number(v, k->kind == K_SIZE, k->kind == K_SIZE ? SIZE_MAX : UINT_MAX, &n,
                         why, whylen) < 0 ||
            !in_range(n, k->min, k->max, why, whylen))
            return -1;
        if (k->kind == K_SIZE)
            *(size_t *)f = (size_t)n;
        else
            *(unsigned *)f = (unsigned)n;
        return 0;
    case K_LOGLEVEL:
        i = name_index(log_level_names, sizeof log_level_names / sizeof *log_level_names, v);
        if (i < 0) {
            snprintf(why, whylen, "expected error, warning, notice, info or debug");
            return -1;
        }
        *(enum log_level *)f = (enum log_level)i;
        return 0;
    case K_USER:
    case K_GROUP:
        return parse_principal(f, v, k->kind == K_GROUP, why, whylen);
    case K_CHROOT:
        if (*v && *v != '/') {
            snprintf(why, whylen, "expected an absolute path, or nothing for no chroot");
            return -1;
        }
        return set_string(f, *v ? v : NULL, why, whylen);
    }
    snprintf(why, whylen, "internal error: unknown kind");
    return -1;
}

/* One [defaults] or [ceilings] value; idx is an index in limit_keys, or
 * PRIO_KEY. */
static int parse_limit_value(struct limits *l, size_t idx, const char *v, char *why,
                             size_t whylen)
{
    const struct limit_key *k;
    int i;

    if (idx == PRIO_KEY) {
        i = priority_from_name(v);
        if (i < 0) {
            snprintf(why, whylen, "expected low, normal or high");
            return -1;
        }
        l->priority = (enum priority)i;
        return 0;
    }
    k = &limit_keys[idx];
    if (strcmp(v, "infinity") == 0) {
        if (!(k->flags & LK_INF)) {
            snprintf(why, whylen, "\"infinity\" is not allowed here");
            return -1;
        }
        *limit_field(l, k) = LIMIT_INF;
        return 0;
    }
    if (parse_number(v, k->flags & LK_SUFFIX, LIMIT_MAX, limit_field(l, k), why, whylen) < 0 ||
        !in_range(*limit_field(l, k), 0, k->config_max, why, whylen))
        return -1;
    if ((k->flags & LK_NONZERO) && *limit_field(l, k) == 0) {
        snprintf(why, whylen, "0 is ambiguous; write infinity for no limit");
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* The parse: reader, handler, checks between keys                     */

struct key_state {
    int line; /* where the key was set, 0 = not set */
    bool bad; /* its value was refused */
};

struct parse {
    const char *file;
    config_error_fn err;
    void *ctx;
    int nerr;
    struct config *c; /* the config being built; owned by config_load() */
    FILE *f;
    char *buf;        /* getline buffer, owned */
    size_t cap;
    int lineno;       /* lines handed to inih so far = current line */
    int section;      /* enum section of the last header, -1 = unknown one */
    struct key_state keys[SEC_COUNT][MAX_SECTION_KEYS];
};

static void report(struct parse *p, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void report(struct parse *p, int line, const char *fmt, ...)
{
    char msg[MSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->nerr++;
    if (p->err)
        p->err(p->ctx, p->file, line, msg);
}

static char *skip_blanks(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    return s;
}

/* Cuts a '#' or ';' comment that starts the line or follows a blank, then
 * trailing blanks.  (inih would cut " ;" comments from values itself, but
 * not from section headers, and not "#".) */
static void cut_comment(char *s)
{
    char *end;

    for (char *q = s; *q; q++)
        if ((*q == '#' || *q == ';') && (q == s || q[-1] == ' ' || q[-1] == '\t')) {
            *q = '\0';
            break;
        }
    end = s + strlen(s);
    while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
        *--end = '\0';
}

/* Checks the shape of a cleaned line and notes the section a header opens.
 * Returns 0 when inih may see it, -1 after reporting an error. */
static int check_line(struct parse *p, const char *s)
{
    if (!*s)
        return 0;
    if (*s == '[') {
        const char *close = strchr(s, ']');
        char name[64];
        if (!close || close[1]) {
            report(p, p->lineno, "expected '[section]'");
            return -1;
        }
        snprintf(name, sizeof name, "%.*s", (int)(close - s - 1), s + 1);
        p->section = name_index(section_names, SEC_COUNT, name);
        if (p->section < 0)
            report(p, p->lineno, "unknown section [%s]", name);
        return 0;
    }
    if (!strpbrk(s, "=:")) {
        report(p, p->lineno, "expected 'key = value', '[section]' or a comment");
        return -1;
    }
    return 0;
}

/* inih's reader: fgets-like, one line per call, at most num-1 bytes. */
static char *read_line(char *str, int num, void *stream)
{
    struct parse *p = stream;
    ssize_t len = getline(&p->buf, &p->cap, p->f);
    const char *out = ""; /* what inih gets: a blank line unless s is fine */
    char *s;

    if (len < 0) {
        if (ferror(p->f))
            report(p, p->lineno, "cannot read: %s", strerror(errno));
        return NULL;
    }
    p->lineno++;
    s = p->buf;
    if (p->lineno == 1 && strncmp(s, "\xEF\xBB\xBF", 3) == 0)
        s += 3; /* UTF-8 byte order mark */
    if ((size_t)len != strlen(p->buf)) {
        report(p, p->lineno, "line holds a NUL byte");
    } else {
        s[strcspn(s, "\r\n")] = '\0';
        s = skip_blanks(s);
        cut_comment(s);
        if (strlen(s) + 2 > (size_t)num)
            report(p, p->lineno, "line too long (at most %d characters)", num - 3);
        else if (check_line(p, s) == 0)
            out = s;
    }
    snprintf(str, (size_t)num, "%s\n", out);
    return str;
}

/* inih's handler; always returns 1: errors are reported here, and the
 * return value of ini_parse_stream() is not needed to find them. */
static int on_pair(void *user, const char *section, const char *name, const char *value)
{
    struct parse *p = user;
    char why[MSG_MAX / 2];
    const struct key_spec *keys = NULL;
    int idx, rc;

    if (!*section) {
        report(p, p->lineno, "key '%s' outside any section", name);
        return 1;
    }
    if (p->section < 0)
        return 1; /* the unknown section header was reported */
    if (p->section == SEC_DAEMON) {
        keys = daemon_keys;
        idx = key_index(daemon_keys, N_DAEMON_KEYS, name);
    } else if (p->section == SEC_WORKER) {
        keys = worker_keys;
        idx = key_index(worker_keys, N_WORKER_KEYS, name);
    } else {
        idx = limit_key_index(name);
    }
    if (idx < 0) {
        report(p, p->lineno, "unknown key '%s' in [%s]", name, section);
        return 1;
    }
    struct key_state *st = &p->keys[p->section][idx];
    if (st->line) {
        report(p, p->lineno, "'%s' in [%s] is already set at line %d", name, section,
               st->line);
        return 1;
    }
    st->line = p->lineno;
    if (keys)
        rc = parse_daemon_value(p->c, &keys[idx], value, why, sizeof why);
    else
        rc = parse_limit_value(p->section == SEC_DEFAULTS ? &p->c->defaults : &p->c->ceilings,
                               (size_t)idx, value, why, sizeof why);
    if (rc < 0) {
        st->bad = true;
        report(p, p->lineno, "bad value for %s: '%s' (%s)", name, value, why);
    }
    return 1;
}

/* The line to blame when a default and its ceiling disagree: the default's
 * line, or the ceiling's when the default is built in. */
static int blame_line(const struct key_state *def, const struct key_state *ceil)
{
    return def->line ? def->line : ceil->line;
}

static void check_limits(struct parse *p)
{
    const struct limits *d = &p->c->defaults, *c = &p->c->ceilings;
    char b1[24], b2[24];

    for (size_t i = 0; i <= LIMIT_NKEYS; i++) {
        const struct key_state *sd = &p->keys[SEC_DEFAULTS][i], *sc = &p->keys[SEC_CEILINGS][i];
        if (sd->bad || sc->bad)
            continue;
        if (i == PRIO_KEY) {
            if (d->priority > c->priority)
                report(p, blame_line(sd, sc),
                       "[defaults] priority %s is above [ceilings] priority %s",
                       priority_name(d->priority), priority_name(c->priority));
            continue;
        }
        uint64_t dv = limit_get(d, &limit_keys[i]), cv = limit_get(c, &limit_keys[i]);
        if (dv > cv)
            report(p, blame_line(sd, sc), "[defaults] %s %s is above [ceilings] %s %s",
                   limit_keys[i].name, limit_text(dv, b1, sizeof b1), limit_keys[i].name,
                   limit_text(cv, b2, sizeof b2));
    }
}

/* What the parse saw of [daemon] key `name` (line, bad). */
static const struct key_state *daemon_key(const struct parse *p, const char *name)
{
    return &p->keys[SEC_DAEMON][key_index(daemon_keys, N_DAEMON_KEYS, name)];
}

/* pool_size 0..max_workers: an explicit pool_size above it is an error; the
 * built-in pool_size is lowered to max_workers silently. */
static void check_pool(struct parse *p)
{
    const struct key_state *sp = daemon_key(p, "pool_size");
    const struct key_state *sw = daemon_key(p, "max_workers");
    struct config *c = p->c;

    if (sp->bad || sw->bad || c->pool_size <= c->max_workers)
        return;
    if (sp->line)
        report(p, sp->line, "pool_size %u is above max_workers %u", c->pool_size,
               c->max_workers);
    else
        c->pool_size = c->max_workers;
}

/* max_input_bytes must hold one whole message (max_message_bytes plus
 * "\r\n"): an explicit value below that is an error; the built-in one is
 * raised to it silently. */
static void check_input(struct parse *p)
{
    const struct key_state *si = daemon_key(p, "max_input_bytes");
    const struct key_state *sm = daemon_key(p, "max_message_bytes");
    struct config *c = p->c;
    size_t need = c->max_message_bytes > SIZE_MAX - 2 ? SIZE_MAX : c->max_message_bytes + 2;

    if (si->bad || sm->bad || c->max_input_bytes >= need)
        return;
    if (si->line)
        report(p, si->line, "max_input_bytes %zu is below max_message_bytes %zu + 2",
               c->max_input_bytes, c->max_message_bytes);
    else
        c->max_input_bytes = need;
}

static size_t sat_add(size_t a, uint64_t b)
{
    return b > SIZE_MAX - a ? SIZE_MAX : a + (size_t)b;
}

size_t config_answer_max(const struct config *c)
{
    uint64_t out = c->ceilings.max_output_bytes;
    size_t n = sat_add((size_t)1 << 20, c->max_message_bytes);

    /* the output twice: with stream_output it goes out in execution/output
     * notifications and again in the answer's output (the mutant: once) */
    unsigned times = MUTANT(STREAM_RESERVE) ? 6 : 12;

    n = sat_add(n, out > UINT64_MAX / times ? UINT64_MAX : out * times);
    n = sat_add(n, c->ceilings.max_bindings_bytes);
    return sat_add(n, c->ceilings.max_bindings_bytes);
}

/* max_backlog_bytes must hold the largest answer the limits allow: an
 * explicit value below it is an error; the built-in one is raised to it. */
static void check_backlog(struct parse *p)
{
    const struct key_state *sb = daemon_key(p, "max_backlog_bytes");
    struct config *c = p->c;
    size_t need = config_answer_max(c);

    if (sb->bad || c->max_backlog_bytes >= need)
        return;
    if (sb->line)
        report(p, sb->line, "max_backlog_bytes %zu is below the largest answer the limits "
               "allow, %zu (12 x max_output_bytes + max_message_bytes + 2 x max_bindings_bytes "
               "of the ceilings + 1M)", c->max_backlog_bytes, need);
    else
        c->max_backlog_bytes = need;
}

int config_load(struct config *c, const char *path, config_error_fn err, void *ctx)
{
    struct config tmp;
    struct parse *p = calloc(1, sizeof *p);
    int rc;

    if (!p) {
        if (err)
            err(ctx, path, 0, "out of memory");
        return 1;
    }
    p->file = path;
    p->err = err;
    p->ctx = ctx;
    p->c = &tmp;
    p->section = -1;
    if (defaults_into(&tmp) < 0) {
        report(p, 0, "out of memory");
        goto out;
    }
    p->f = fopen(path, "r");
    if (!p->f) {
        report(p, 0, "cannot open: %s", strerror(errno));
        goto out;
    }
    rc = ini_parse_stream(read_line, p, on_pair, p);
    if (rc != 0 && p->nerr == 0) /* cannot happen with the checks above */
        report(p, rc > 0 ? rc : p->lineno, "cannot parse (inih error %d)", rc);
    check_pool(p);
    check_input(p);
    check_limits(p);
    check_backlog(p);
out:
    if (p->nerr == 0) {
        config_free(c);
        *c = tmp;
    } else {
        config_free(&tmp);
    }
    if (p->f)
        fclose(p->f);
    free(p->buf);
    rc = p->nerr;
    free(p);
    return rc;
}
