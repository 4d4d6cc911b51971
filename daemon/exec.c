/*
 * exec.c - the execution state table and its single event entry point.
 *
 * Every change of an execution's state happens in exec_event().  The table
 * `accepts` says which events each state expects; anything else goes to
 * exec_unexpected(), the one place that decides what an unexpected event
 * means (a worker's frame out of turn is a protocol violation that kills the
 * worker; anything else is logged and ignored or answered as internal_error).
 * The scheduler (sched.c), the worker channel (wproc.c) and the timers
 * (clocks.c) feed events in; what the client is told about each change
 * (answers, stats, live output, the log line) is answer.c's.
 */
#include "daemon/exec.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "daemon/answer.h"
#include "daemon/clocks.h"
#include "daemon/conn.h"
#include "common/log.h"
#include "daemon/metrics.h"
#include "daemon/sched.h"
#include "daemon/wproc.h"
#include "daemon/sup.h"
#include "common/trace.h"
#include "policy/seccomp.h"     /* containment: seccomp_syscall_name */
#include "proto/bindings.h"
#include "proto/chan.h"            /* WORKER_EXIT_* */
#include "proto/jsonrpc.h"
#include "proto/mutant.h"
#include "proto/tools.h"
#include "proto/utf8.h"

#define BIT(ev) (1u << (ev))

static const char *const state_names[] = {
    "queued", "starting", "running", "wait_tool", "idle", "finishing", "done",
};

static const char *const event_names[] = {
    "start", "worker", "stuck", "output", "tool_call", "result", "error", "bad_frame",
    "tool_ok", "tool_err", "tool_abort", "timeout", "cpu", "cancel",
    "disconnect", "exit", "chunk", "idle", "close",
};

/* The state table: which events each state expects. */
static const unsigned accepts[ST_DONE + 1] = {
    [ST_QUEUED]    = BIT(XE_START) | BIT(XE_CANCEL) | BIT(XE_DISCONNECT) | BIT(XE_CLOSE),
    [ST_STARTING]  = BIT(XE_WORKER) | BIT(XE_TIMEOUT) | BIT(XE_CANCEL) | BIT(XE_DISCONNECT) |
                     BIT(XE_CLOSE),
    [ST_RUNNING]   = BIT(XE_STUCK) | BIT(XE_OUTPUT) | BIT(XE_TOOL_CALL) | BIT(XE_RESULT) |
                     BIT(XE_ERROR) | BIT(XE_BAD) | BIT(XE_TIMEOUT) | BIT(XE_CPU) | BIT(XE_CANCEL) |
                     BIT(XE_DISCONNECT) | BIT(XE_EXIT) | BIT(XE_CLOSE),
    [ST_WAIT_TOOL] = BIT(XE_TOOL_OK) | BIT(XE_TOOL_ERR) | BIT(XE_TOOL_ABORT) | BIT(XE_BAD) |
                     BIT(XE_OUTPUT) | BIT(XE_TOOL_CALL) | BIT(XE_ERROR) |
                     BIT(XE_TIMEOUT) | BIT(XE_CPU) | BIT(XE_CANCEL) | BIT(XE_DISCONNECT) |
                     BIT(XE_EXIT) | BIT(XE_CLOSE),
    [ST_IDLE]      = BIT(XE_CHUNK) | BIT(XE_IDLE) | BIT(XE_CLOSE) | BIT(XE_BAD) |
                     BIT(XE_DISCONNECT) | BIT(XE_EXIT),
    [ST_FINISHING] = BIT(XE_EXIT) | BIT(XE_DISCONNECT) | BIT(XE_CANCEL),
    [ST_DONE]      = 0,
};

int exec_accepts(enum exec_state st, enum exec_ev ev)
{
    return (accepts[st] & BIT(ev)) != 0;
}

const char *exec_state_name(enum exec_state st)
{
    return state_names[st];
}

const char *exec_event_name(enum exec_ev ev)
{
    return event_names[ev];
}

/* Events that come from the worker: out of turn, they are its fault. */
static const unsigned worker_events =
    BIT(XE_OUTPUT) | BIT(XE_TOOL_CALL) | BIT(XE_RESULT) | BIT(XE_ERROR) | BIT(XE_BAD);

static void exec_free(struct exec *e);
static void session_idle(struct exec *e);

/* Take e out of the scheduler's lists (the queue, or the executions that
 * wait for a worker) if it is in one.  The counters move with a removal
 * only: an execution that was never queued (refused at submission) has an
 * unlinked q_node and changes nothing. */
static void exec_unlist(struct exec *e)
{
    if (!list_linked(&e->q_node))
        return;
    if (e->state == ST_QUEUED) {
        sched_unqueue(e);
    } else if (e->state == ST_STARTING) {
        list_del(&e->q_node);
        sup_count_down(&e->sup->n_starting, "n_starting");
    }
}

/* ------------------------------------------------------------------ */
/* moving between states                                               */

/* The client has its answer (or is gone): kill the worker if there is one
 * and wait for the reap; free at once otherwise. */
static void exec_finish(struct exec *e)
{
    clocks_stop(e);
    e->n_pending = 0;
    if (e->w) {
        e->cpu_us_seen = wproc_cpu_us(e->w, e->cpu_us_seen);
        wproc_kill(e->w);
        e->state = ST_FINISHING;
        return;
    }
    e->state = ST_DONE;
    exec_free(e);
}

static void exec_free(struct exec *e)
{
    struct conn *c = e->conn;

    if (e->w)
        e->w->exec = NULL;
    clocks_stop(e);
    if (e->op == OP_SESSION) {
        sup_count_down(&e->sup->n_sessions, "n_sessions");
        if (e->close_id && c) {     /* session/close: the worker is gone now */
            json_t *reply = rpc_result_new(e->close_id, json_object());
            if (reply)
                conn_send(c, reply);
            json_decref(reply);
        }
        log_info("session conn=%llu %s closed", c ? (unsigned long long)c->id : 0ULL,
                 e->session_id);
    }
    json_decref(e->close_id);
    list_del(&e->conn_node);
    if (c)
        conn_maybe_finish(c);
    list_del(&e->q_node);
    json_decref(e->req_id);
    json_decref(e->job);
    free(e->job_bindings);
    json_decref(e->tools);
    free(e->output);
    free(e->pending);
    free(e);
}

/* The job's limits.tool_spin_us, taken when it is sent: by then w counts
 * as busy, as it does for every TOOL_RESULT (spin_hint).  The value the
 * request put there (params.c) left w out, so a job for the last free CPU
 * would have looked at its channel for its first answer. */
static void job_spin_hint(const struct sup *s, json_t *job)
{
    json_t *l = json_object_get(job, "limits");

    if (json_is_object(l))
        json_object_set_new(l, "tool_spin_us", json_integer((json_int_t)sched_spin_hint(s)));
}

/* STARTING -> RUNNING: send the job and start the clocks. */
static void exec_run(struct exec *e, struct wproc *w)
{
    struct sup *s = e->sup;
    struct jp_splice sp = { { e->job_bindings, e->job_bindings_len } };
    int rc;

    TRACE(TR_DISPATCH);
    e->w = w;
    w->exec = e;
    e->t_start = ev_time();
    wproc_apply_limits(w, &e->lim);
    job_spin_hint(s, e->job);
    if (e->job_bindings)
        json_object_set_new(e->job, "bindings", jp_token(0));
    if ((rc = wproc_send_spliced(w, CHAN_JOB, e->job, &sp, e->job_bindings != NULL)) < 0) {
        if (rc == -2)
            answer_fail(e, RPC_E_INVALID_PARAMS, NULL, NULL, "the job is larger than a worker "
                        "accepts (%zu bytes once encoded)", (size_t)CHAN_JOB_MAX);
        else
            answer_fail(e, RPC_E_INTERNAL_ERROR, NULL, NULL, "could not send the job to the worker");
        exec_finish(e);
        return;
    }
    TRACE(TR_JOB_SENT);
    e->state = ST_RUNNING;
    clocks_start(e);
    clocks_handover(e);
}

void exec_job_taken(struct exec *e)
{
    json_decref(e->job);
    e->job = NULL;
    free(e->job_bindings);
    e->job_bindings = NULL;
}

/* The worker of a RUNNING execution did not take its job (XE_STUCK: why
 * "did not take its job"; XE_EXIT with untaken: "died before it took its
 * job").  Nothing of it ran: the job goes to another worker, first in
 * line, unless HANDOVER_TRIES workers have lost it.  The caller pumps the
 * scheduler (the timer's callback; the reap's sched_reap). */
static void exec_rehand(struct exec *e, pid_t pid, const char *reason, const char *why)
{
    struct sup *s = e->sup;
    struct wproc *w = e->w;

    metrics_handover_lost(reason);
    clocks_stop(e);
    if (w) {
        w->exec = NULL;
        e->w = NULL;
        wproc_kill(w);
    }
    if (++e->handovers >= HANDOVER_TRIES || !e->job) {   /* no job: a look said "taken" */
        log_warn("exec seq=%llu: worker %d %s; %u workers in a row did not, giving up",
                 (unsigned long long)e->seq, (int)pid, why, e->handovers);
        answer_fail(e, RPC_E_INTERNAL_ERROR, json_pack("{s:s}", "reason", "no worker took the job"),
                    NULL, "no worker took the job: %u workers in a row were stopped, frozen or "
                    "dead before they read it", e->handovers);
        exec_finish(e);
        return;
    }
    log_warn("exec seq=%llu: worker %d %s; handing it to another worker",
             (unsigned long long)e->seq, (int)pid, why);
    e->state = ST_STARTING;
    list_add(&s->starting, &e->q_node);
    s->n_starting++;
    clocks_wait(e);
}

/* ------------------------------------------------------------------ */
/* sessions                                                            */

/* A session's job has been answered: forget the chunk, wait for the next.
 * A session whose connection will send nothing more ends here. */
static void session_idle(struct exec *e)
{
    clocks_stop(e);
    exec_job_taken(e);          /* answered: the open job was read */
    json_decref(e->req_id);
    e->req_id = NULL;
    free(e->output);
    e->output = NULL;
    e->output_len = e->streamed = 0;
    e->output_truncated = e->stream = e->return_bindings = e->keep_open = 0;
    e->tool_calls = e->n_pending = 0;
    e->sjob = SJ_NONE;
    e->lim = e->slim;
    e->state = ST_IDLE;
    if (!e->conn || e->conn->closing) {
        exec_finish(e);
        return;
    }
    clocks_idle(e);
}

/* IDLE -> RUNNING: send the chunk (or snapshot) job and start its clocks. */
static void session_run(struct exec *e, const struct exec_evdata *d)
{
    int rc;

    clocks_stop(e);             /* the idle timer and the idle CPU check */
    e->req_id = json_deep_copy(d->id);
    e->lim = *d->lim;
    e->stream = d->stream;
    e->return_bindings = d->return_bindings;
    e->sjob = d->snapshot ? SJ_SNAPSHOT : SJ_CHUNK;
    e->t_start = ev_time();
    e->cpu_base_us = wproc_cpu_us(e->w, e->cpu_us_seen);
    e->state = ST_RUNNING;
    wproc_apply_limits(e->w, &e->lim);
    if ((rc = wproc_send_json(e->w, CHAN_JOB, d->json)) < 0) {
        answer_fail(e, rc == -2 ? RPC_E_INVALID_PARAMS : RPC_E_INTERNAL_ERROR, NULL, NULL,
                    rc == -2 ? "the chunk is larger than a worker accepts" :
                               "could not send the chunk to the worker");
        exec_finish(e);
        return;
    }
    clocks_start(e);
}

/* session/close: answer what is pending, end the worker; the close itself
 * is answered once the worker is gone (exec_free). */
static void session_close(struct exec *e, const struct exec_evdata *d)
{
    e->close_id = json_deep_copy(d->id);
    exec_unlist(e);
    if (e->state != ST_IDLE)
        answer_fail(e, RPC_E_CANCELLED, NULL, NULL, "%s", e->sjob == SJ_OPEN ?
                    "the session was closed before it opened" : "the session was closed");
    exec_finish(e);
}

/* ------------------------------------------------------------------ */
/* frames from the worker                                              */

static void on_output(struct exec *e, const struct exec_evdata *d)
{
    size_t cap = e->lim.max_output_bytes, room, n;
    char *p;

    if (e->op == OP_CHECK) {
        wproc_violation(e->w, "output from a check job");
        return;
    }
    room = e->output_len < cap ? cap - e->output_len : 0;
    n = d->len < room ? d->len : room;
    if (n < d->len)
        e->output_truncated = 1;
    if (n == 0)
        return;
    p = realloc(e->output, e->output_len + n + 1);
    if (!p) {
        e->output_truncated = 1;
        return;
    }
    memcpy(p + e->output_len, d->payload, n);
    e->output = p;
    e->output_len += n;
    answer_output_note(e);
}

/* A TOOL_RESULT tells the worker how long it may look for the next answer
 * before it sleeps (sched_spin_hint).  A result it lacks means 0: no harm. */
static void spin_hint(const struct exec *e, json_t *ans)
{
    if (ans)
        json_object_set_new(ans, "spin_us", json_integer((json_int_t)sched_spin_hint(e->sup)));
}

static void on_tool_call(struct exec *e, const struct exec_evdata *d)
{
    const json_t *tool = NULL, *fn, *args = json_object_get(d->json, "args");
    const char *tname = rpc_cstring(json_object_get(d->json, "tool"));
    const char *fname = rpc_cstring(json_object_get(d->json, "function"));
    struct exec_call *pc;
    struct jp_splice sp = { d->raw };
    size_t nargs = json_array_size(args);
    json_t *id, *req;

    if (d->raw.p) {             /* large args pass through: count them */
        struct jp_iter it;
        struct jp_span k, v;
        nargs = 0;
        if (jp_iter_init(&it, d->raw) == 0)
            while (jp_iter_next(&it, &k, &v))
                nargs++;
    }
    if (e->op == OP_CHECK || !tname || !fname || !json_is_array(args) ||
        !(fn = tools_find(e->tools, tname, fname, &tool)) ||
        !tools_arity_ok(fn, nargs)) {
        wproc_violation(e->w, "tool call that the job does not allow");
        return;
    }
    /* The budget is kept here, not in the worker: a chunk cannot reach the
     * count, so no pcall can catch the end and no subverted worker can lift it. */
    if (!MUTANT(TOOL_CALL_LIMIT) && e->lim.max_tool_calls != LIMIT_INF &&
        e->tool_calls >= e->lim.max_tool_calls) {
        answer_fail(e, RPC_E_TOOL_CALL_LIMIT, NULL, NULL,
                    "execution exceeded the limit of %llu tool calls",
                    (unsigned long long)e->lim.max_tool_calls);
        exec_finish(e);
        return;
    }
    if (e->n_pending >= e->max_pending) {
        wproc_violation(e->w, "more tool calls outstanding than max_parallel_calls");
        return;
    }
    e->tool_calls++;
    e->call_seq++;
    answer_flush(e, 0);         /* what was printed before the call comes first */
    metrics_tool_call();
    pc = &e->pending[e->n_pending++];
    pc->call = e->call_seq;
    snprintf(pc->id, sizeof pc->id, "sbx-%llu-%u", (unsigned long long)e->seq, e->call_seq);
    id = json_string(pc->id);
    req = rpc_request_new(id, "tool/call",
                          json_pack("{s:O,s:s,s:O,s:s,s:o}", "execution_id", e->req_id,
                                    "tool", tname, "module", json_object_get(tool, "module"),
                                    "function", fname, "args",
                                    d->raw.p ? jp_token(0) : json_incref((json_t *)args)));
    json_decref(id);
    e->state = ST_WAIT_TOOL;
    if (!req || conn_send_spliced(e->conn, req, &sp, d->raw.p != NULL) < 0) {
        json_decref(req);
        return;     /* the connection is gone; its close cancelled us */
    }
    json_decref(req);
}

static void on_result(struct exec *e, const struct exec_evdata *d)
{
    sched_supply_ok(e->sup, e->w);  /* this worker did its job */
    if (json_is_true(json_object_get(d->json, "output_truncated")))
        e->output_truncated = 1;
    if (answer_result(e, d) < 0) {
        wproc_violation(e->w, "malformed bindings in the result");
        return;
    }
    if (e->op == OP_SESSION)
        session_idle(e);
    else
        exec_finish(e);
}

static void on_error(struct exec *e, const struct exec_evdata *d)
{
    const char *kind = json_string_value(json_object_get(d->json, "kind"));

    if (!answer_error_frame_ok(d->json)) {
        wproc_violation(e->w, "malformed error frame");
        return;
    }
    sched_supply_ok(e->sup, e->w);  /* this worker did its job */
    if (json_is_true(json_object_get(d->json, "output_truncated")))
        e->output_truncated = 1;
    /* A session survives its chunk's syntax or runtime error, and a snapshot
     * over max_bindings_bytes: a read-only checkpoint never ends the state
     * it reads (docs/protocol.md §3.8).  The worker goes on in both cases;
     * if it does not, its exit between chunks ends the session. */
    e->keep_open = e->op == OP_SESSION &&
                   ((e->sjob == SJ_CHUNK && (strcmp(kind, "syntax_error") == 0 ||
                                             strcmp(kind, "runtime_error") == 0)) ||
                    (e->sjob == SJ_SNAPSHOT && strcmp(kind, "bindings_too_large") == 0));
    answer_error(e, d->json);
    if (e->keep_open)
        session_idle(e);
    else
        exec_finish(e);
}

/* The worker died before its end frame. */
static void on_exit_early(struct exec *e, const struct exec_evdata *d)
{
    answer_exit(e, d);
    e->state = ST_DONE;
    exec_free(e);
}
/* ------------------------------------------------------------------ */
/* the entry point                                                     */

/* The one place for events a state does not expect. */
static void exec_unexpected(struct exec *e, enum exec_ev ev)
{
    if (BIT(ev) & worker_events) {
        if (e->state == ST_FINISHING)
            return;     /* the worker is being killed; its last words don't matter */
        wproc_violation(e->w, "frame out of turn");
        return;
    }
    log_warn("exec seq=%llu: unexpected event %s in state %s",
             (unsigned long long)e->seq, event_names[ev], state_names[e->state]);
    if (ev == XE_WORKER || ev == XE_TIMEOUT || ev == XE_CPU) {
        if (e->state < ST_FINISHING) {
            answer_fail(e, RPC_E_INTERNAL_ERROR, NULL, NULL, "internal error (%s in %s)",
                        event_names[ev], state_names[e->state]);
            exec_finish(e);
        }
    }
    /* client-side events (tool answers, cancels) are ignored */
}

/* A verdict of the supervisor's own (deadline, CPU budget, cancel,
 * shutdown) is about to end a running execution: first take in what the
 * worker already sent, so data.output holds everything printed before it.
 * Returns 1 if those frames ended the execution themselves (answered; the
 * verdict no longer applies). */
static int exec_catch_up(struct exec *e)
{
    if (e->state != ST_RUNNING || !e->w)
        return 0;
    if (!MUTANT(DRAIN_DEADLINE))
        wproc_catch_up(e->w);
    return e->state >= ST_FINISHING || e->state == ST_IDLE;
}

/* Events that are verdicts of the supervisor's own, see exec_catch_up(). */
static const unsigned verdict_events = BIT(XE_TIMEOUT) | BIT(XE_CPU) | BIT(XE_CANCEL);

void exec_event(struct exec *e, enum exec_ev ev, const struct exec_evdata *d)
{
    struct sup *s = e->sup;

    if (!(accepts[e->state] & BIT(ev))) {
        exec_unexpected(e, ev);
        return;
    }
    if ((BIT(ev) & verdict_events) && exec_catch_up(e))
        return;
    log_debug("exec seq=%llu: %s in %s", (unsigned long long)e->seq, event_names[ev],
              state_names[e->state]);
    switch (ev) {
    case XE_START:
        e->state = ST_STARTING;
        list_add_tail(&s->starting, &e->q_node);
        s->n_starting++;
        clocks_wait(e);
        break;
    case XE_WORKER:
        exec_unlist(e);
        exec_run(e, d->w);
        break;
    case XE_STUCK:
        exec_rehand(e, e->w->pid, "stuck", "did not take its job");
        break;
    case XE_OUTPUT:
        on_output(e, d);
        break;
    case XE_TOOL_CALL:
        on_tool_call(e, d);
        break;
    case XE_RESULT:
        on_result(e, d);
        break;
    case XE_ERROR:
        on_error(e, d);
        break;
    case XE_BAD: {
        json_t *data = json_pack("{s:s}", "reason", d->why);
        answer_fail(e, RPC_E_CRASHED, data, NULL, "worker violated the channel protocol: %s", d->why);
        exec_finish(e);
        break;
    }
    case XE_TOOL_OK:
    case XE_TOOL_ERR: {
        json_int_t call = (json_int_t)e->pending[d->call].call;
        struct jp_splice sp = { d->raw };
        json_t *ans = ev == XE_TOOL_OK ?
            json_pack("{s:I,s:b,s:o}", "call", call, "ok", 1, "value",
                      d->raw.p ? jp_token(0) : json_incref((json_t *)d->json)) :
            json_pack("{s:I,s:b,s:s}", "call", call, "ok", 0, "message", d->why);
        int rc;

        spin_hint(e, ans);
        rc = ans ? wproc_send_spliced(e->w, CHAN_TOOL_RESULT, ans, &sp,
                                      ev == XE_TOOL_OK && d->raw.p) : -1;

        e->pending[d->call] = e->pending[--e->n_pending];
        if (e->n_pending == 0)
            e->state = ST_RUNNING;
        if (rc == -2) {     /* a tool error the chunk can catch, not a dead worker */
            json_decref(ans);
            ans = json_pack("{s:I,s:b,s:s}", "call", call, "ok", 0, "message", "the tool's "
                            "answer is larger than a worker accepts once encoded");
            spin_hint(e, ans);
            rc = ans ? wproc_send_json(e->w, CHAN_TOOL_RESULT, ans) : -1;
        }
        if (rc < 0) {
            answer_fail(e, RPC_E_INTERNAL_ERROR, NULL, NULL, "could not pass the tool result on");
            exec_finish(e);
        }
        json_decref(ans);
        break;
    }
    case XE_TOOL_ABORT:
        answer_fail(e, RPC_E_TOOL_ABORTED, json_pack("{s:O}", "tool_error", d->json), NULL,
                    "a tool aborted the execution: %s", d->why);
        exec_finish(e);
        break;
    case XE_TIMEOUT:
        if (e->state == ST_STARTING) {
            exec_unlist(e);
            answer_fail(e, RPC_E_TIMEOUT, json_pack("{s:s}", "reason", "waiting for a worker"), NULL,
                        "execution exceeded the timeout of %llu ms waiting for a worker",
                        (unsigned long long)e->lim.timeout_ms);
        } else {
            answer_fail(e, RPC_E_TIMEOUT, NULL, NULL, "execution exceeded the timeout of %llu ms",
                        (unsigned long long)e->lim.timeout_ms);
        }
        exec_finish(e);
        break;
    case XE_CPU:
        answer_fail(e, RPC_E_CPU_LIMIT, NULL, NULL, "execution exceeded the CPU limit of %llu ms",
                    (unsigned long long)e->lim.cpu_ms);
        exec_finish(e);
        break;
    case XE_CANCEL:
        if (e->state == ST_FINISHING)
            break;      /* already answered */
        exec_unlist(e);
        answer_fail(e, RPC_E_CANCELLED, NULL, NULL, "execution cancelled");
        exec_finish(e);
        break;
    case XE_DISCONNECT:
        if (e->state != ST_FINISHING)   /* not answered: its one log line */
            answer_log(e, "disconnected", NULL, NULL);
        exec_unlist(e);
        list_del(&e->conn_node);
        e->conn = NULL;
        if (e->state != ST_FINISHING)
            exec_finish(e);
        break;
    case XE_EXIT:
        if (e->state == ST_FINISHING) {
            e->state = ST_DONE;
            exec_free(e);
        } else if (e->state == ST_IDLE) {
            log_warn("session %s: its worker died between chunks (status 0x%x)",
                     e->session_id, d->status);
            e->w = NULL;
            e->state = ST_DONE;
            exec_free(e);
        } else if (d->untaken && e->state == ST_RUNNING) {
            exec_rehand(e, d->w->pid, "died", "died before it took its job");
        } else {
            on_exit_early(e, d);
        }
        break;
    case XE_CHUNK:
        session_run(e, d);
        break;
    case XE_IDLE:
        log_info("session %s idle for %.0f ms: closing it", e->session_id, e->idle_timeout * 1e3);
        exec_finish(e);
        break;
    case XE_CLOSE:
        session_close(e, d);
        break;
    }
}

/* ------------------------------------------------------------------ */
/* requests from the connection                                        */

struct exec *exec_new(struct conn *c, enum exec_op op, json_t *id, json_t *job, json_t *tools,
                      const struct limits *lim)
{
    struct sup *s = c->sup;
    unsigned max_pending = s->cfg.max_parallel_calls ? s->cfg.max_parallel_calls : 1;
    struct exec *e = calloc(1, sizeof *e);
    struct exec_call *pending = calloc(max_pending, sizeof *pending);

    if (!e || !pending) {
        free(e);
        free(pending);
        json_decref(job);
        json_decref(tools);
        return NULL;
    }
    e->pending = pending;
    e->max_pending = max_pending;
    e->sup = s;
    e->conn = c;
    e->seq = ++s->next_exec_seq;
    e->op = op;
    e->state = ST_QUEUED;
    e->req_id = json_deep_copy(id);
    e->job = job;
    e->tools = tools ? tools : json_object();
    e->lim = *lim;
    e->t_submit = ev_time();
    list_init(&e->q_node);
    list_add_tail(&c->execs, &e->conn_node);
    clocks_init(e);
    if (op == OP_SESSION) {
        e->sjob = SJ_OPEN;
        e->slim = *lim;
        snprintf(e->session_id, sizeof e->session_id, "ses-%llu", (unsigned long long)e->seq);
        s->n_sessions++;
    }
    if (log_enabled(LOG_LVL_DEBUG)) {       /* code only at debug level */
        char *code = json_dumps(json_object_get(job, "code"), JSON_COMPACT | JSON_ENCODE_ANY);
        log_debug("exec conn=%llu seq=%llu %s code=%.1500s", (unsigned long long)c->id,
                  (unsigned long long)e->seq, op == OP_CHECK ? "check" : "execute",
                  code ? code : "?");
        free(code);
    }
    return e;
}

/* A response may be passed on only by the connection the execution
 * belongs to, and only for the id of its pending tool/call. */
int exec_set_job_bindings(struct exec *e, struct jp_span raw)
{
    free(e->job_bindings);
    if (!(e->job_bindings = malloc(raw.n ? raw.n : 1)))
        return -1;
    memcpy(e->job_bindings, raw.p, raw.n);
    e->job_bindings_len = raw.n;
    return 0;
}

int exec_tool_response(struct conn *c, const json_t *id, const json_t *result,
                       const json_t *error, const struct jp_span *raw_result)
{
    struct list_head *pos, *tmp;
    const char *sid = json_string_value(id);

    /* Exact match, length included: "<id>\u0000junk" is another id. */
    list_for_each_safe(pos, tmp, &c->execs) {
        struct exec *e = list_entry(pos, struct exec, conn_node);
        struct exec_evdata d = { 0 };
        unsigned i;
        if (!sid || e->state != ST_WAIT_TOOL)
            continue;
        for (i = 0; i < e->n_pending; i++)
            if (rpc_string_is(id, e->pending[i].id, strlen(e->pending[i].id)))
                break;
        if (i == e->n_pending)
            continue;
        d.call = i;
        if (result) {
            d.json = result;
            if (raw_result)
                d.raw = *raw_result;
            exec_event(e, XE_TOOL_OK, &d);
        } else {
            const char *m = json_string_value(json_object_get(error, "message"));
            d.json = error;
            d.why = m ? m : "tool error";
            exec_event(e, json_is_true(json_object_get(json_object_get(error, "data"), "abort"))
                          ? XE_TOOL_ABORT : XE_TOOL_ERR, &d);
        }
        return 1;
    }
    log_notice("conn=%llu: ignoring a response for unknown id %s",
               (unsigned long long)c->id, sid ? sid : "(not a string)");
    return 0;
}

struct exec *exec_find(struct conn *c, const json_t *id)
{
    struct list_head *pos, *tmp;

    list_for_each_safe(pos, tmp, &c->execs) {
        struct exec *e = list_entry(pos, struct exec, conn_node);
        if (e->state != ST_FINISHING && e->req_id && json_equal(e->req_id, id))
            return e;
    }
    return NULL;
}

struct exec *exec_session_find(struct conn *c, const json_t *sid)
{
    struct list_head *pos, *tmp;

    if (!json_is_string(sid))
        return NULL;
    list_for_each_safe(pos, tmp, &c->execs) {
        struct exec *e = list_entry(pos, struct exec, conn_node);
        if (e->op == OP_SESSION && e->state < ST_FINISHING && !e->close_id &&
            rpc_string_is(sid, e->session_id, strlen(e->session_id)))
            return e;
    }
    return NULL;
}

void exec_end_sessions(struct conn *c)
{
    struct list_head *pos, *tmp;

    list_for_each_safe(pos, tmp, &c->execs) {
        struct exec *e = list_entry(pos, struct exec, conn_node);
        if (e->op == OP_SESSION && e->state == ST_IDLE)
            exec_finish(e);
    }
}

void exec_detach_all(struct conn *c)
{
    struct list_head *pos, *tmp;

    list_for_each_safe(pos, tmp, &c->execs)
        exec_event(list_entry(pos, struct exec, conn_node), XE_DISCONNECT, NULL);
}

/* Used at shutdown: answer everything still open. */
void exec_abort(struct exec *e, const char *why)
{
    if (e->state == ST_IDLE) {      /* a session between chunks: nothing to answer */
        exec_finish(e);
        return;
    }
    if (e->state >= ST_FINISHING || exec_catch_up(e))
        return;
    exec_unlist(e);
    answer_fail(e, RPC_E_CANCELLED, NULL, NULL, "%s", why);
    exec_finish(e);
}

void exec_no_worker(struct exec *e, const char *why, double retry_s)
{
    if (e->state > ST_STARTING)
        return;
    exec_unlist(e);
    answer_fail(e, RPC_E_INTERNAL_ERROR,
                json_pack("{s:s,s:I}", "reason", "workers cannot be started",
                          "retry_after_ms", (json_int_t)(retry_s * 1e3 + 0.5)),
                NULL, "workers cannot be started: %s", why);
    exec_finish(e);
}

void exec_refuse(struct exec *e, enum rpc_kind kind, json_t *data, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    answer_fail(e, kind, data, NULL, "%s", msg);
    exec_free(e);
}
