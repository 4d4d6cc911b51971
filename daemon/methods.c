/*
 * methods.c - the dispatch of the JSON-RPC methods a client may call, and
 * the methods answered at once (binding_names, describe, metrics, ...).
 * The params of execute, check and session/open are params.c's, the
 * session methods session.c's.  See methods.h.
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
#include "common/log.h"
#include "daemon/metrics.h"
#include "daemon/params.h"
#include "daemon/prompt.h"
#include "daemon/sched.h"
#include "daemon/session.h"
#include "daemon/sup.h"
#include "daemon/wproc.h"
#include "proto/bindings.h"
#include "proto/jsonrpc.h"
#include "proto/mutant.h"

static void m_execute(struct conn *c, const struct rpc_msg *m);
static void m_check(struct conn *c, const struct rpc_msg *m);
static void m_binding_names(struct conn *c, const struct rpc_msg *m);
static void m_prompt_info(struct conn *c, const struct rpc_msg *m);
static void m_ping(struct conn *c, const struct rpc_msg *m);
static void m_describe(struct conn *c, const struct rpc_msg *m);
static void m_metrics(struct conn *c, const struct rpc_msg *m);

/* What the table checks before a row's handler runs, in this order. */
enum {
    MF_OBJECT  = 1 << 0,    /* params, when present, is an object: else invalid_params */
    MF_FRESH   = 1 << 1,    /* no execution of this connection runs under the request's
                             * id: else invalid_request */
};

/* Every method a client may call, in describe's order.  A row's session
 * handler, when it has one, takes the request instead when params.session
 * is there and not null (an execute in a session). */
static const struct method {
    const char *name;
    unsigned    flags;
    void      (*handler)(struct conn *, const struct rpc_msg *);
    void      (*session)(struct conn *, const struct rpc_msg *);
} methods[] = {
    { "execute",          MF_OBJECT | MF_FRESH, m_execute,           session_chunk },
    { "check",            MF_OBJECT | MF_FRESH, m_check,             NULL },
    { "binding_names",    0,                    m_binding_names,     NULL },
    { "prompt_info",      0,                    m_prompt_info,       NULL },
    { "ping",             0,                    m_ping,              NULL },
    { "describe",         0,                    m_describe,          NULL },
    { "metrics",          0,                    m_metrics,           NULL },
    { "session/open",     MF_OBJECT | MF_FRESH, m_session_open,      NULL },
    { "session/snapshot", MF_OBJECT | MF_FRESH, m_session_snapshot,  NULL },
    { "session/close",    MF_OBJECT,            m_session_close,     NULL },
};

static json_t *method_names_new(void)
{
    json_t *a = json_array();

    for (size_t i = 0; a && i < sizeof methods / sizeof methods[0]; i++)
        if (json_array_append_new(a, json_string(methods[i].name)) < 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* execute and check: one job in a fresh worker. */
static void m_run(struct conn *c, const struct rpc_msg *m, enum exec_op op)
{
    struct req_params p;
    struct exec *e;

    if (params_parse(c, m, op, &p) != 0 || !(e = params_exec(c, m, op, &p)))
        return;
    e->stream = p.stream;
    sched_submit(e);
}

static void m_execute(struct conn *c, const struct rpc_msg *m)
{
    m_run(c, m, OP_EXECUTE);
}

static void m_check(struct conn *c, const struct rpc_msg *m)
{
    m_run(c, m, OP_CHECK);
}

/* The names of large bindings as NAMES_TEXT's mutant finds them: from a
 * tree under the parse budget, as bindings_names_text() returns them. */
static int names_by_tree(const char *s, size_t n, char **out, size_t *outlen, const char **err)
{
    json_error_t jerr;
    int dense = 0;
    json_t *tree = rpc_loadb_bounded(s, n, JSON_ALLOW_NUL, &jerr, &dense);
    json_t *tn = tree ? bindings_names(tree, err) : NULL;

    *out = tn ? json_dumps(tn, JSON_COMPACT) : NULL;
    *outlen = *out ? strlen(*out) : 0;
    json_decref(tn);
    json_decref(tree);
    if (!tree)
        *err = "more values than the daemon parses for their size";
    if (!*out && !*err)
        *err = "out of memory";
    return *out ? 0 : -1;
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
        int rc = MUTANT(NAMES_TEXT)     /* mutant: a tree under the budget */
            ? names_by_tree(m->raw_bindings.p, m->raw_bindings.n, &text, &len, &err)
            : bindings_names_text(m->raw_bindings.p, m->raw_bindings.n, &text, &len, &err);

        if (rc < 0) {
            conn_send_error(c, m->id, strcmp(err, "out of memory") == 0 ? RPC_E_INTERNAL_ERROR
                            : RPC_E_INVALID_PARAMS, NULL, "bindings: %s", err);
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
        conn_send_error(c, m->id, RPC_E_INVALID_PARAMS, NULL, "params.bindings is required");
        return;
    }
    names = bindings_names(b, &err);
    if (!names) {
        conn_send_error(c, m->id, RPC_E_INVALID_PARAMS, NULL, "bindings: %s", err ? err : "malformed");
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
    json_t *d = json_pack("{s:s,s:s,s:i,s:s,s:o,s:o,s:o,s:{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I},s:{s:I,s:I,s:I,s:I,s:I,s:o,s:I}}",
                     "name", "sandboxd", "version", SANDBOXD_VERSION,
                     "protocol_version", SANDBOXD_PROTOCOL,
                     "protocol", SANDBOXD_PROTOCOL_VERSION,
                     "methods", method_names_new(),
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
    if (json_object_set_new(json_object_get(d, "daemon"), "max_sessions",
                            json_integer((json_int_t)s->cfg.max_sessions)) < 0 ||
        json_object_set_new(json_object_get(d, "daemon"), "session_idle_timeout_ms",
                            json_integer((json_int_t)s->cfg.session_idle_timeout_ms)) < 0 ||
        json_object_set_new(json_object_get(d, "state"), "sessions",
                            json_integer((json_int_t)s->n_sessions)) < 0 ||
        json_object_set_new(d, "features", features_new()) < 0 ||
        json_object_set_new(d, "error_kinds", rpc_kinds_new()) < 0 ||
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
    if (MUTANT(ID_BOUND))
        return 1;                       /* mutant: ids of any length */
    return !json_is_string(id) || json_string_length(id) <= RPC_ID_MAX;
}

/* The methods answered at once: a result, or NULL when out of memory. */
static void answer_now(struct conn *c, const struct rpc_msg *m, json_t *result)
{
    json_t *reply;

    if (!result) {
        conn_send_error(c, m->id, RPC_E_INTERNAL_ERROR, NULL, "out of memory");
        return;
    }
    reply = rpc_result_new(m->id, result);
    conn_send(c, reply);
    json_decref(reply);
}

static void m_prompt_info(struct conn *c, const struct rpc_msg *m)
{
    answer_now(c, m, prompt_info_new(json_is_true(json_object_get(m->params, "session"))));
}

static void m_ping(struct conn *c, const struct rpc_msg *m)
{
    answer_now(c, m, json_object());
}

static void m_describe(struct conn *c, const struct rpc_msg *m)
{
    answer_now(c, m, describe_new(c->sup));
}

static void m_metrics(struct conn *c, const struct rpc_msg *m)
{
    answer_now(c, m, metrics_new(c->sup));
}

void methods_request(struct conn *c, const struct rpc_msg *m)
{
    const struct method *t = NULL;
    const json_t *sid;

    if (!id_bounded(m->id)) {
        conn_send_error(c, m->id, RPC_E_INVALID_PARAMS, json_pack("{s:i}", "max_id_bytes", RPC_ID_MAX),
                        "the request id is %zu bytes long; a string id may have at most %d",
                        json_string_length(m->id), RPC_ID_MAX);
        return;
    }
    for (size_t i = 0; !t && i < sizeof methods / sizeof methods[0]; i++)
        if (strcmp(m->method, methods[i].name) == 0)
            t = &methods[i];
    if (!t) {
        conn_send_error(c, m->id, RPC_E_METHOD_NOT_FOUND, NULL, "method '%.64s' not found", m->method);
        return;
    }
    if ((t->flags & MF_OBJECT) && m->params && !json_is_object(m->params)) {
        conn_send_error(c, m->id, RPC_E_INVALID_PARAMS, NULL, "params must be an object");
        return;
    }
    if ((t->flags & MF_FRESH) && exec_find(c, m->id)) {
        conn_send_error(c, m->id, RPC_E_INVALID_REQUEST, NULL,
                        "a request with this id is still running on this connection");
        return;
    }
    sid = json_object_get(m->params, "session");
    if (t->session && sid && !json_is_null(sid))
        t->session(c, m);
    else
        t->handler(c, m);
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
