/*
 * session.c - the session methods (docs/protocol.md §3.8): session/open,
 * session/snapshot, session/close, and execute's chunks in a session.  See
 * session.h.
 */
#include "daemon/session.h"

#include <errno.h>
#include <limits.h>

#include "daemon/conn.h"
#include "daemon/exec.h"
#include "daemon/params.h"
#include "daemon/sched.h"
#include "daemon/sup.h"
#include "proto/jsonrpc.h"
#include "proto/mutant.h"

/* params.session of a request: the open session of this connection it
 * names.  NULL after answering session_not_found / invalid_params. */
static struct exec *find_session(struct conn *c, const struct rpc_msg *m)
{
    const json_t *sid = json_object_get(m->params, "session");
    struct exec *e;

    if (!json_is_string(sid) || json_string_length(sid) > RPC_ID_MAX) {
        conn_send_error(c, m->id, RPC_E_INVALID_PARAMS, NULL,
                        "params.session must be a string of at most %d bytes", RPC_ID_MAX);
        return NULL;
    }
    if (!(e = exec_session_find(c, sid))) {
        conn_send_error(c, m->id, RPC_E_SESSION_NOT_FOUND, NULL,
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
        conn_send_error(c, m->id, RPC_E_BUSY, NULL, "the session is %s",
                        e->sjob == SJ_OPEN ? "still opening" : "running another chunk");
        return;
    }
    if (!job) {
        conn_send_error(c, m->id, RPC_E_INTERNAL_ERROR, NULL, "out of memory");
        return;
    }
    exec_event(e, XE_CHUNK, &d);
    json_decref(job);
}

/* execute with params.session: one chunk in that session's Lua state. */
void session_chunk(struct conn *c, const struct rpc_msg *m)
{
    struct sup *s = c->sup;
    const json_t *p = m->params, *v, *code;
    const json_t *stream = json_object_get(p, "stream_output");
    const json_t *rb = json_object_get(p, "return_bindings");
    struct limits lim;
    struct exec *e;
    char err[256];
    int rc;

    if (params_code(c, m, &code) < 0)
        return;
    if (((v = json_object_get(p, "tools")) && !json_is_null(v)) ||
        ((v = json_object_get(p, "bindings")) && !json_is_null(v))) {
        conn_send_error(c, m->id, RPC_E_INVALID_PARAMS, NULL,
                        "a session chunk takes no tools or bindings: the session has them");
        return;
    }
    if ((stream && !json_is_boolean(stream) && !json_is_null(stream)) ||
        (rb && !json_is_boolean(rb) && !json_is_null(rb))) {
        conn_send_error(c, m->id, RPC_E_INVALID_PARAMS, NULL,
                        "params.stream_output and params.return_bindings must be booleans");
        return;
    }
    if (!(e = find_session(c, m)))
        return;
    /* the session's limits are this chunk's defaults and ceilings: narrow only */
    if ((rc = limits_resolve(&e->slim, &e->slim, p, &lim, err, sizeof err)) != 0) {
        conn_send_error(c, m->id, rc == ERANGE ? RPC_E_LIMIT_OUT_OF_RANGE : RPC_E_INVALID_PARAMS, NULL,
                        "%s (a chunk may only narrow its session's limits)", err);
        return;
    }
    session_job(c, m, e, json_pack("{s:s,s:O,s:o,s:b}", "op", "chunk", "code", code,
                                   "limits", params_job_limits(s, &lim),
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

    if (MUTANT(SESSION_SLOT))
        keep = s->cfg.max_workers;      /* mutant: sessions may hold every slot */
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
    if (MUTANT(SESSION_SHARE))
        return UINT_MAX;                /* mutant: one connection may take them all */
    return s->cfg.max_sessions_per_connection;
}

void m_session_open(struct conn *c, const struct rpc_msg *m)
{
    struct sup *s = c->sup;
    struct req_params p;
    struct exec *e;

    if (params_parse(c, m, OP_SESSION, &p) != 0)
        return;
    if (s->n_sessions >= session_cap(s)) {
        params_clear(&p);
        conn_send_error(c, m->id, RPC_E_BUSY, json_pack("{s:I}", "max_sessions",
                        (json_int_t)session_cap(s)),
                        "%u sessions are open (max_sessions %u, and one of max_workers %u is "
                        "kept for executions)", s->n_sessions, s->cfg.max_sessions,
                        s->cfg.max_workers);
        return;
    }
    if (conn_sessions(c) >= session_share(s)) {
        params_clear(&p);
        conn_send_error(c, m->id, RPC_E_BUSY, json_pack("{s:I}", "max_sessions_per_connection",
                        (json_int_t)s->cfg.max_sessions_per_connection),
                        "this connection has %u sessions open (max_sessions_per_connection %u)",
                        conn_sessions(c), s->cfg.max_sessions_per_connection);
        return;
    }
    if (!(e = params_exec(c, m, OP_SESSION, &p)))
        return;
    e->idle_timeout = (double)(p.idle_ms ? p.idle_ms : s->cfg.session_idle_timeout_ms) / 1e3;
    s->sessions_opened++;
    sched_submit(e);
}

void m_session_snapshot(struct conn *c, const struct rpc_msg *m)
{
    struct exec *e;

    if (!(e = find_session(c, m)))
        return;
    session_job(c, m, e, json_pack("{s:s,s:o}", "op", "snapshot", "limits",
                                   params_job_limits(c->sup, &e->slim)),
                &e->slim, 0, 1, 1);
}

void m_session_close(struct conn *c, const struct rpc_msg *m)
{
    struct exec *e;
    struct exec_evdata d = { .id = m->id };

    if (!(e = find_session(c, m)))
        return;
    exec_event(e, XE_CLOSE, &d);
}

