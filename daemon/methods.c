/*
 * methods.c - the JSON-RPC methods a client may call, and their parameter
 * checks.  Everything here runs in the supervisor and never touches Lua:
 * code is only measured, never parsed (check and execute both go to a
 * worker).  See methods.h.
 */
#include "daemon/methods.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/conn.h"
#include "daemon/exec.h"
#include "daemon/log.h"
#include "daemon/metrics.h"
#include "daemon/prompt.h"
#include "daemon/sched.h"
#include "daemon/sup.h"
#include "daemon/wproc.h"
#include "proto/bindings.h"
#include "proto/jsonrpc.h"
#include "proto/tools.h"

/* Slack for RLIMIT_AS above max_heap: the process image, jansson buffers for
 * the job and the result, allocator fragmentation.  Lua's own cap always
 * fires first; the kernel limit is the backstop for bugs in C. */
#define AS_SLACK (512ull * 1024 * 1024)

/* Limits as the worker sees them: integers, null for infinity.  rlimit_as
 * and rlimit_cpu (seconds) are the kernel backstops the worker sets on
 * itself: SIGXCPU a second after the supervisor's own CPU check. */
static json_t *job_limits(const struct sup *s, const struct limits *l)
{
    json_t *as = json_null(), *cpu = json_null();

    if (!SANDBOXD_SANITIZE && l->max_heap != LIMIT_INF && l->max_heap < UINT64_MAX / 2)
        as = json_integer((json_int_t)(l->max_heap + AS_SLACK));
    if (l->cpu_ms != LIMIT_INF)
        cpu = json_integer((json_int_t)(l->cpu_ms / 1000 + 2));
    return json_pack("{s:o,s:o,s:I,s:I,s:I,s:I,s:I,s:o,s:o}",
                     "max_heap", l->max_heap == LIMIT_INF ? json_null() :
                                 json_integer((json_int_t)l->max_heap),
                     "max_reductions", l->max_reductions == LIMIT_INF ? json_null() :
                                       json_integer((json_int_t)l->max_reductions),
                     "max_output_bytes", (json_int_t)l->max_output_bytes,
                     "max_bindings_bytes", (json_int_t)l->max_bindings_bytes,
                     "max_result_bytes", (json_int_t)s->cfg.max_message_bytes,
                     "max_parallel_calls", (json_int_t)s->cfg.max_parallel_calls,
                     "tool_spin_us", (json_int_t)sched_spin_hint(s),
                     "rlimit_as", as, "rlimit_cpu", cpu);
}

/* ------------------------------------------------------------------ */
/* sessions (docs/protocol.md §3.8)                                       */

#define MAX_IDLE_TIMEOUT_MS 86400000    /* a day */

/* params.session of a request: the open session of this connection it
 * names.  NULL after answering session_not_found / invalid_params. */
static struct exec *find_session(struct conn *c, const struct rpc_msg *m)
{
    const json_t *sid = json_object_get(m->params, "session");
    struct exec *e;

    if (!json_is_string(sid) || json_string_length(sid) > RPC_ID_MAX) {
        conn_send_error(c, m->id, "invalid_params", NULL,
                        "params.session must be a string of at most %d bytes", RPC_ID_MAX);
        return NULL;
    }
    if (!(e = exec_session_find(c, sid))) {
        conn_send_error(c, m->id, "session_not_found", NULL,
                        "no open session of this connection is called '%.64s'",
                        json_string_value(sid));
        return NULL;
    }
    return e;
}

/* Hand a job to an idle session; busy while it runs another. */
static void session_job(struct conn *c, const struct rpc_msg *m, struct exec *e, json_t *job,
                        const struct limits *lim, int stream, int return_bindings, int snapshot)
{
    struct exec_evdata d = { .json = job, .id = m->id, .lim = lim, .stream = stream,
                             .return_bindings = return_bindings, .snapshot = snapshot };

    if (e->state != ST_IDLE) {
        json_decref(job);
        conn_send_error(c, m->id, "busy", NULL, "the session is %s",
                        e->sjob == SJ_OPEN ? "still opening" : "running another chunk");
        return;
    }
    if (!job) {
        conn_send_error(c, m->id, "internal_error", NULL, "out of memory");
        return;
    }
    exec_event(e, XE_CHUNK, &d);
    json_decref(job);
}

/* execute with params.session: one chunk in that session's Lua state. */
static void m_chunk(struct conn *c, const struct rpc_msg *m, const json_t *code)
{
    struct sup *s = c->sup;
    const json_t *p = m->params, *v;
    const json_t *stream = json_object_get(p, "stream_output");
    const json_t *rb = json_object_get(p, "return_bindings");
    struct limits lim;
    struct exec *e;
    char err[256];
    int rc;

    if (((v = json_object_get(p, "tools")) && !json_is_null(v)) ||
        ((v = json_object_get(p, "bindings")) && !json_is_null(v))) {
        conn_send_error(c, m->id, "invalid_params", NULL,
                        "a session chunk takes no tools or bindings: the session has them");
        return;
    }
    if ((stream && !json_is_boolean(stream) && !json_is_null(stream)) ||
        (rb && !json_is_boolean(rb) && !json_is_null(rb))) {
        conn_send_error(c, m->id, "invalid_params", NULL,
                        "params.stream_output and params.return_bindings must be booleans");
        return;
    }
    if (!(e = find_session(c, m)))
        return;
    /* the session's limits are this chunk's defaults and ceilings: narrow only */
    if ((rc = limits_resolve(&e->slim, &e->slim, p, &lim, err, sizeof err)) != 0) {
        conn_send_error(c, m->id, rc == ERANGE ? "limit_out_of_range" : "invalid_params", NULL,
                        "%s (a chunk may only narrow its session's limits)", err);
        return;
    }
    session_job(c, m, e, json_pack("{s:s,s:O,s:o,s:b}", "op", "chunk", "code", code,
                                   "limits", job_limits(s, &lim),
                                   "return_bindings", json_is_true(rb)),
                &lim, json_is_true(stream), json_is_true(rb), 0);
}

/* How many sessions may be open: max_sessions, and never every one of
 * max_workers.  Each session holds a slot while idle, so sessions holding
 * them all would leave every execute and session/open queued, with no clock,
 * until one closes (idle_timeout_ms may be a day). */
static unsigned session_cap(const struct sup *s)
{
    unsigned keep = s->cfg.max_workers > 0 ? s->cfg.max_workers - 1 : 0;

#if defined(MUTATE_SESSION_SLOT)
    keep = s->cfg.max_workers;          /* mutant: sessions may hold every slot */
#endif
    return s->cfg.max_sessions < keep ? s->cfg.max_sessions : keep;
}

/* Sessions this connection holds (open, opening or closing: as counted in
 * n_sessions until their worker is gone). */
static unsigned conn_sessions(const struct conn *c)
{
    const struct list_head *pos;
    unsigned n = 0;

    for (pos = c->execs.next; pos != &c->execs; pos = pos->next)
        if (list_entry(pos, struct exec, conn_node)->op == OP_SESSION)
            n++;
    return n;
}

/* One connection's share of max_sessions: without it, one client could
 * open every session with a day's idle timeout, and every other client's
 * session/open would be busy for that day. */
static unsigned session_share(const struct sup *s)
{
#if defined(MUTATE_SESSION_SHARE)
    (void)s;
    return UINT_MAX;                    /* mutant: one connection may take them all */
#endif
    return s->cfg.max_sessions_per_connection;
}

static void m_session_open(struct conn *c, const struct rpc_msg *m)
{
    struct sup *s = c->sup;
    const json_t *p = m->params;
    const json_t *bindings = json_object_get(p, "bindings");
    const json_t *idle = json_object_get(p, "idle_timeout_ms");
    json_t *tools, *index = NULL, *job;
    struct limits lim;
    char err[256];
    int rc;
    struct exec *e;

    if (p && !json_is_object(p)) {
        conn_send_error(c, m->id, "invalid_params", NULL, "params must be an object");
        return;
    }
    if (idle && !json_is_null(idle) &&
        (!json_is_integer(idle) || json_integer_value(idle) < 1 ||
         json_integer_value(idle) > MAX_IDLE_TIMEOUT_MS)) {
        conn_send_error(c, m->id, "invalid_params", NULL,
                        "params.idle_timeout_ms must be an integer from 1 to %d",
                        MAX_IDLE_TIMEOUT_MS);
        return;
    }
    if (bindings && !json_is_null(bindings) && !json_is_array(bindings)) {
        conn_send_error(c, m->id, "invalid_params", NULL,
                        "params.bindings must be the array returned by an earlier execute");
        return;
    }
    if (json_is_array(bindings) && json_array_size(bindings) > 0 && !m->raw_bindings.p) {
        const char *berr = NULL;
        json_t *names = bindings_names(bindings, &berr);
        if (!names) {
            conn_send_error(c, m->id, "invalid_params", NULL, "%s", berr ? berr : "malformed bindings");
            return;
        }
        json_decref(names);
    }
    if ((rc = limits_resolve(&s->cfg.defaults, &s->cfg.ceilings, p, &lim, err, sizeof err)) != 0) {
        conn_send_error(c, m->id, rc == ERANGE ? "limit_out_of_range" : "invalid_params", NULL,
                        "%s", err);
        return;
    }
    if (exec_find(c, m->id)) {
        conn_send_error(c, m->id, "invalid_request", NULL,
                        "a request with this id is still running on this connection");
        return;
    }
    if (s->n_sessions >= session_cap(s)) {
        conn_send_error(c, m->id, "busy", json_pack("{s:I}", "max_sessions",
                        (json_int_t)session_cap(s)),
                        "%u sessions are open (max_sessions %u, and one of max_workers %u is "
                        "kept for executions)", s->n_sessions, s->cfg.max_sessions,
                        s->cfg.max_workers);
        return;
    }
    if (conn_sessions(c) >= session_share(s)) {
        conn_send_error(c, m->id, "busy", json_pack("{s:I}", "max_sessions_per_connection",
                        (json_int_t)s->cfg.max_sessions_per_connection),
                        "this connection has %u sessions open (max_sessions_per_connection %u)",
                        conn_sessions(c), s->cfg.max_sessions_per_connection);
        return;
    }
    if (!(tools = tools_norm(json_object_get(p, "tools"), &index, err, sizeof err))) {
        conn_send_error(c, m->id, "invalid_params", NULL, "%s", err);
        return;
    }
    job = json_pack("{s:s,s:O,s:o,s:o}", "op", "session", "tools", tools,
                    "bindings", json_is_array(bindings) ? json_incref((json_t *)bindings)
                                                        : json_array(),
                    "limits", job_limits(s, &lim));
    json_decref(tools);
    if (!job || !(e = exec_new(c, OP_SESSION, m->id, job, index, &lim))) {
        conn_send_error(c, m->id, "internal_error", NULL, "out of memory");
        return;
    }
    if (m->raw_bindings.p && exec_set_job_bindings(e, m->raw_bindings) < 0) {
        conn_send_error(c, m->id, "internal_error", NULL, "out of memory");
        exec_drop(e);
        return;
    }
    e->idle_timeout = (double)(json_is_integer(idle) ? (unsigned)json_integer_value(idle)
                                                     : s->cfg.session_idle_timeout_ms) / 1e3;
    s->sessions_opened++;
    sched_submit(e);
}

static void m_session_snapshot(struct conn *c, const struct rpc_msg *m)
{
    struct exec *e;

    if (m->params && !json_is_object(m->params)) {
        conn_send_error(c, m->id, "invalid_params", NULL, "params must be an object");
        return;
    }
    if (exec_find(c, m->id)) {
        conn_send_error(c, m->id, "invalid_request", NULL,
                        "a request with this id is still running on this connection");
        return;
    }
    if (!(e = find_session(c, m)))
        return;
    session_job(c, m, e, json_pack("{s:s,s:o}", "op", "snapshot", "limits",
                                   job_limits(c->sup, &e->slim)),
                &e->slim, 0, 1, 1);
}

static void m_session_close(struct conn *c, const struct rpc_msg *m)
{
    struct exec *e;
    struct exec_evdata d = { .id = m->id };

    if (m->params && !json_is_object(m->params)) {
        conn_send_error(c, m->id, "invalid_params", NULL, "params must be an object");
        return;
    }
    if (!(e = find_session(c, m)))
        return;
    exec_event(e, XE_CLOSE, &d);
}

/* execute and check share everything up to the job. */
static void m_run(struct conn *c, const struct rpc_msg *m, enum exec_op op)
{
    struct sup *s = c->sup;
    const json_t *p = m->params;
    const json_t *code = json_object_get(p, "code");
    const json_t *bindings = json_object_get(p, "bindings");
    const json_t *stream = json_object_get(p, "stream_output");
    json_t *tools, *index = NULL, *job;
    struct limits lim;
    char err[256];
    int rc;
    struct exec *e;

    if (p && !json_is_object(p)) {
        conn_send_error(c, m->id, "invalid_params", NULL, "params must be an object");
        return;
    }
    if (!json_is_string(code)) {
        conn_send_error(c, m->id, "invalid_params", NULL, "params.code must be a string");
        return;
    }
    if (json_string_length(code) > s->cfg.max_code_bytes) {
        conn_send_error(c, m->id, "code_too_large", NULL,
                        "code exceeds maximum size of %zu bytes", s->cfg.max_code_bytes);
        return;
    }
    if (exec_find(c, m->id)) {
        conn_send_error(c, m->id, "invalid_request", NULL,
                        "a request with this id is still running on this connection");
        return;
    }
    if (op == OP_EXECUTE && json_object_get(p, "session") &&
        !json_is_null(json_object_get(p, "session"))) {
        m_chunk(c, m, code);
        return;
    }
    if (!(tools = tools_norm(json_object_get(p, "tools"), &index, err, sizeof err))) {
        conn_send_error(c, m->id, "invalid_params", NULL, "%s", err);
        return;
    }
    if (stream && !json_is_boolean(stream) && !json_is_null(stream)) {
        json_decref(tools);
        json_decref(index);
        conn_send_error(c, m->id, "invalid_params", NULL, "params.stream_output must be a boolean");
        return;
    }
    if (bindings && !json_is_null(bindings) && !json_is_array(bindings)) {
        json_decref(tools);
        json_decref(index);
        conn_send_error(c, m->id, "invalid_params", NULL,
                        "params.bindings must be the array returned by an earlier execute");
        return;
    }
    /* Checked here, not only in the worker: valid bindings re-encode to at
     * most their own size (no reals, canonical forms), so the job frame
     * stays within what a worker reads. */
    if (json_is_array(bindings) && json_array_size(bindings) > 0 && !m->raw_bindings.p) {
        const char *berr = NULL;
        json_t *names = bindings_names(bindings, &berr);
        if (!names) {
            json_decref(tools);
            json_decref(index);
            conn_send_error(c, m->id, "invalid_params", NULL, "%s", berr ? berr : "malformed bindings");
            return;
        }
        json_decref(names);
    }
    if ((rc = limits_resolve(&s->cfg.defaults, &s->cfg.ceilings, p, &lim, err, sizeof err)) != 0) {
        json_decref(tools);
        json_decref(index);
        conn_send_error(c, m->id, rc == ERANGE ? "limit_out_of_range" : "invalid_params", NULL,
                        "%s", err);
        return;
    }
    if (op == OP_CHECK)
        job = json_pack("{s:s,s:O,s:o}", "op", "check", "code", code,
                        "limits", job_limits(s, &lim));
    else
        job = json_pack("{s:s,s:O,s:O,s:o,s:o}", "op", "execute", "code", code,
                        "tools", tools,
                        "bindings", json_is_array(bindings) ? json_incref((json_t *)bindings)
                                                            : json_array(),
                        "limits", job_limits(s, &lim));
    json_decref(tools);         /* the job holds its own reference */
    if (!job || !(e = exec_new(c, op, m->id, job, index, &lim))) {
        conn_send_error(c, m->id, "internal_error", NULL, "out of memory");
        return;
    }
    /* large bindings pass through as the client sent them (the worker
     * validates them; they are not re-encoded, so they cannot grow) */
    if (op == OP_EXECUTE && m->raw_bindings.p && exec_set_job_bindings(e, m->raw_bindings) < 0) {
        conn_send_error(c, m->id, "internal_error", NULL, "out of memory");
        exec_drop(e);
        return;
    }
    e->stream = op == OP_EXECUTE && json_is_true(stream);
    sched_submit(e);
}

static void m_binding_names(struct conn *c, const struct rpc_msg *m)
{
    const json_t *b = json_object_get(m->params, "bindings");
    const char *err = NULL;
    json_t *names, *reply;

    if (m->raw_bindings.p) {
        /* large: read in one pass without a tree, as execute takes them
         * (the worker builds them, under its own heap cap) */
        struct jp_splice sp;
        char *text;
        size_t len;

#if !defined(MUTATE_NAMES_TEXT)
        if (bindings_names_text(m->raw_bindings.p, m->raw_bindings.n, &text, &len, &err) < 0) {
#else
        json_error_t jerr;
        int dense = 0;
        json_t *tree = rpc_loadb_bounded(m->raw_bindings.p, m->raw_bindings.n, JSON_ALLOW_NUL,
                                         &jerr, &dense);   /* mutant: a tree under the budget */
        json_t *tn = tree ? bindings_names(tree, &err) : NULL;
        text = tn ? json_dumps(tn, JSON_COMPACT) : NULL;
        len = text ? strlen(text) : 0;
        json_decref(tn);
        json_decref(tree);
        if (!tree)
            err = "more values than the daemon parses for their size";
        if (!text && !err)
            err = "out of memory";
        if (!text) {
#endif
            conn_send_error(c, m->id, strcmp(err, "out of memory") == 0 ? "internal_error"
                            : "invalid_params", NULL, "bindings: %s", err);
            return;
        }
        sp.raw = (struct jp_span){ text, len };
        reply = rpc_result_new(m->id, jp_token(0));
        if (reply)
            conn_send_spliced(c, reply, &sp, 1);
        json_decref(reply);
        free(text);
        return;
    }
    if (!b || json_is_null(b)) {
        conn_send_error(c, m->id, "invalid_params", NULL, "params.bindings is required");
        return;
    }
    names = bindings_names(b, &err);
    if (!names) {
        conn_send_error(c, m->id, "invalid_params", NULL, "bindings: %s", err ? err : "malformed");
        return;
    }
    reply = rpc_result_new(m->id, names);
    conn_send(c, reply);
    json_decref(reply);
}

/* Private memory (Private_Clean + Private_Dirty of smaps_rollup) of the
 * idle pooled workers, in bytes: what the warm pool costs.  null
 * when none could be read (not root and the workers are non-dumpable). */
static json_t *idle_private_bytes(const struct sup *s)
{
    const struct list_head *pos;
    unsigned long long total = 0;
    int read_any = 0;

    for (pos = s->idle.next; pos != &s->idle; pos = pos->next) {
        const struct wproc *w = list_entry(pos, struct wproc, pool_node);
        char path[64], line[128];
        unsigned long long kib;
        FILE *f;

        snprintf(path, sizeof path, "/proc/%d/smaps_rollup", (int)w->pid);
        if (!(f = fopen(path, "re")))
            continue;
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "Private_Clean: %llu kB", &kib) == 1 ||
                sscanf(line, "Private_Dirty: %llu kB", &kib) == 1) {
                total += kib * 1024;
                read_any = 1;
            }
        }
        fclose(f);
    }
    return read_any || s->n_idle == 0 ? json_integer((json_int_t)total) : json_null();
}

/* The 1.1 capabilities this daemon has (docs/protocol.md §3, describe);
 * clients feature-detect with them. */
static const char *const features[] = {
    "max_tool_calls", "any_function_names", "string_metatable", "stream_output", "parallel", "sessions", NULL,
};

static json_t *features_new(void)
{
    json_t *a = json_array();

    for (size_t i = 0; a && features[i]; i++)
        json_array_append_new(a, json_string(features[i]));
    return a;
}

/* Health (docs/protocol.md, describe): whether workers can be started now,
 * since when they cannot (UTC, ISO 8601, and for how long), and the
 * failures in a row behind it. */
static int health_put(const struct sup *s, json_t *state)
{
    double since = sched_supply_down_since(s);
    json_t *iso = json_null(), *down_ms = json_null();

    if (!sched_supply_up(s)) {
        time_t secs = (time_t)since;
        struct tm tm;
        char buf[40];

        if (gmtime_r(&secs, &tm) && strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm)) {
            snprintf(buf + strlen(buf), sizeof buf - strlen(buf), ".%03dZ",
                     (int)((since - (double)secs) * 1e3));
            iso = json_string(buf);
        }
        down_ms = json_integer((json_int_t)((ev_now(s->loop) - since) * 1e3));
    }
    return json_object_set_new(state, "can_start_workers", json_boolean(sched_supply_up(s))) |
           json_object_set_new(state, "cannot_start_workers_since", iso) |
           json_object_set_new(state, "cannot_start_workers_ms", down_ms) |
           json_object_set_new(state, "worker_start_failures",
                               json_integer((json_int_t)s->supply_fails));
}

static json_t *describe_new(const struct sup *s)
{
    json_t *d = json_pack("{s:s,s:s,s:i,s:[sssssss],s:o,s:o,s:{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I},s:{s:I,s:I,s:I,s:I,s:I,s:o,s:I}}",
                     "name", "sandboxd", "version", SANDBOXD_VERSION,
                     "protocol_version", SANDBOXD_PROTOCOL,
                     "methods", "execute", "check", "binding_names", "prompt_info", "ping", "describe",
                     "metrics",
                     "defaults", limits_to_json(&s->cfg.defaults),
                     "maximums", limits_to_json(&s->cfg.ceilings),
                     "daemon",
                     "max_workers", (json_int_t)s->cfg.max_workers,
                     "max_queue", (json_int_t)s->cfg.max_queue,
                     "max_connections", (json_int_t)s->cfg.max_connections,
                     "pool_size", (json_int_t)s->cfg.pool_size,
                     "max_message_bytes", (json_int_t)s->cfg.max_message_bytes,
                     "max_input_bytes", (json_int_t)s->cfg.max_input_bytes,
                     "max_code_bytes", (json_int_t)s->cfg.max_code_bytes,
                     "max_parallel_calls", (json_int_t)s->cfg.max_parallel_calls,
                     "tool_spin_us", (json_int_t)s->cfg.tool_spin_us,
                     "state",
                     "workers", (json_int_t)s->procs, "idle_workers", (json_int_t)s->n_idle,
                     "queued", (json_int_t)s->queued, "connections", (json_int_t)s->n_conns,
                     "workers_started", (json_int_t)s->workers_started,
                     "idle_worker_private_bytes", idle_private_bytes(s),
                     "input_buffer_bytes", (json_int_t)s->input_bytes);

    if (!d)
        return NULL;
    /* 1.1: sessions (docs/protocol.md §3.8) */
    if (json_array_append_new(json_object_get(d, "methods"), json_string("session/open")) < 0 ||
        json_array_append_new(json_object_get(d, "methods"), json_string("session/snapshot")) < 0 ||
        json_array_append_new(json_object_get(d, "methods"), json_string("session/close")) < 0 ||
        json_object_set_new(json_object_get(d, "daemon"), "max_sessions",
                            json_integer((json_int_t)s->cfg.max_sessions)) < 0 ||
        json_object_set_new(json_object_get(d, "daemon"), "session_idle_timeout_ms",
                            json_integer((json_int_t)s->cfg.session_idle_timeout_ms)) < 0 ||
        json_object_set_new(json_object_get(d, "state"), "sessions",
                            json_integer((json_int_t)s->n_sessions)) < 0 ||
        json_object_set_new(d, "features", features_new()) < 0 ||
        health_put(s, json_object_get(d, "state")) < 0) {
        json_decref(d);
        return NULL;
    }
    return d;
}

/* The metric registry's text with the gauges read now (daemon/metrics.h;
 * every metric is described in docs/deployment.md). */
static json_t *metrics_new(const struct sup *s)
{
    struct metrics_now now = {
        .workers_started = s->workers_started,
        .workers = s->procs - s->pending,
        .idle_workers = s->n_idle,
        .queued = s->queued,
        .connections = s->n_conns,
        .sessions = s->n_sessions,
        .input_buffer_bytes = s->input_bytes,
        .can_start_workers = sched_supply_up(s),
        .cannot_start_since = sched_supply_down_since(s),
        .start_failures = s->supply_fails,
    };
    const struct list_head *pos;
    char *text;
    json_t *r;

    for (pos = s->conns.next; pos != &s->conns; pos = pos->next)
        now.output_buffer_bytes += list_entry(pos, struct conn, node)->out.cap;
    if (!(text = metrics_render(&now)))
        return NULL;
    r = json_pack("{s:s,s:s}", "content_type", METRICS_CONTENT_TYPE, "text", text);
    free(text);
    return r;
}

/* A request id the daemon may repeat (jsonrpc.h, RPC_ID_MAX). */
static int id_bounded(const json_t *id)
{
#if defined(MUTATE_ID_BOUND)
    (void)id;
    return 1;                           /* mutant: ids of any length */
#endif
    return !json_is_string(id) || json_string_length(id) <= RPC_ID_MAX;
}

void methods_request(struct conn *c, const struct rpc_msg *m)
{
    const char *name = m->method;
    json_t *result = NULL, *reply;

    if (!id_bounded(m->id)) {
        conn_send_error(c, m->id, "invalid_params", json_pack("{s:i}", "max_id_bytes", RPC_ID_MAX),
                        "the request id is %zu bytes long; a string id may have at most %d",
                        json_string_length(m->id), RPC_ID_MAX);
        return;
    }

    if (strcmp(name, "execute") == 0) {
        m_run(c, m, OP_EXECUTE);
        return;
    }
    if (strcmp(name, "check") == 0) {
        m_run(c, m, OP_CHECK);
        return;
    }
    if (strcmp(name, "binding_names") == 0) {
        m_binding_names(c, m);
        return;
    }
    if (strcmp(name, "session/open") == 0) {
        m_session_open(c, m);
        return;
    }
    if (strcmp(name, "session/snapshot") == 0) {
        m_session_snapshot(c, m);
        return;
    }
    if (strcmp(name, "session/close") == 0) {
        m_session_close(c, m);
        return;
    }
    if (strcmp(name, "prompt_info") == 0)
        result = prompt_info_new(json_is_true(json_object_get(m->params, "session")));
    else if (strcmp(name, "ping") == 0)
        result = json_object();
    else if (strcmp(name, "describe") == 0)
        result = describe_new(c->sup);
    else if (strcmp(name, "metrics") == 0)
        result = metrics_new(c->sup);
    else {
        conn_send_error(c, m->id, "method_not_found", NULL, "method '%.64s' not found", name);
        return;
    }
    if (!result) {
        conn_send_error(c, m->id, "internal_error", NULL, "out of memory");
        return;
    }
    reply = rpc_result_new(m->id, result);
    conn_send(c, reply);
    json_decref(reply);
}

void methods_notification(struct conn *c, const struct rpc_msg *m)
{
    struct exec *e;
    const json_t *id;

    if (strcmp(m->method, "$/cancelRequest") != 0) {
        log_debug("conn=%llu: ignoring notification %.64s", (unsigned long long)c->id, m->method);
        return;
    }
    id = json_object_get(m->params, "id");
    if (!id || !(e = exec_find(c, id))) {
        log_debug("conn=%llu: cancel for an unknown id", (unsigned long long)c->id);
        return;
    }
    exec_event(e, XE_CANCEL, NULL);
}
