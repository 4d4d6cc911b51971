/*
 * answer.c - what a client is told about an execution: its answers (result
 * or error), their stats, its live output, and its one log line.  See
 * answer.h.
 */
#include "daemon/answer.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "daemon/conn.h"
#include "common/log.h"
#include "daemon/metrics.h"
#include "daemon/sup.h"
#include "common/trace.h"
#include "daemon/wproc.h"
#include "policy/seccomp.h"     /* containment: seccomp_syscall_name */
#include "proto/bindings.h"
#include "proto/chan.h"         /* WORKER_EXIT_* */
#include "proto/jsonrpc.h"
#include "proto/mutant.h"
#include "proto/utf8.h"

/* Kinds a worker may report in an ERROR frame (docs/architecture.md). */
static const enum rpc_kind worker_kinds[] = {
    RPC_E_SYNTAX_ERROR, RPC_E_RUNTIME_ERROR, RPC_E_MEMORY_LIMIT, RPC_E_REDUCTIONS_LIMIT,
    RPC_E_CPU_LIMIT, RPC_E_BINDINGS_TOO_LARGE, RPC_E_INVALID_PARAMS, RPC_E_INTERNAL_ERROR,
};

/* ------------------------------------------------------------------ */
/* stats and the log line                                              */

/* CPU time of this execution: for a session chunk, since the chunk began,
 * so that cpu_ms never accumulates across chunks. */
uint64_t answer_cpu_us(const struct exec *e)
{
    uint64_t raw = wproc_cpu_us(e->w, e->cpu_us_seen);

    return raw > e->cpu_base_us ? raw - e->cpu_base_us : 0;
}

static json_int_t stat_int(const json_t *stats, const char *key, json_int_t dflt)
{
    json_t *v = json_object_get(stats, key);
    return json_is_integer(v) && json_integer_value(v) >= 0 ? json_integer_value(v) : dflt;
}

/* Stats for an answer.  wall_us, cpu_us and tool_calls are the
 * supervisor's own; wstats (borrowed, may be NULL) are the worker's figures,
 * used only for what only it can count (reductions, heap peak). */
static json_t *stats_new(struct exec *e, const json_t *wstats)
{
    double wall = e->t_start > 0 ? ev_time() - e->t_start : 0;
    json_int_t cpu = (json_int_t)answer_cpu_us(e);

    if (wall < 0)
        wall = 0;
    if (MUTANT(CPU_OWN))
        cpu = stat_int(wstats, "cpu_us", cpu);  /* mutant: the worker's claim */
#if SANDBOXD_BENCH_TRACE
    {
        json_t *st = json_pack("{s:I,s:I,s:I,s:I,s:I}",
                               "wall_us", (json_int_t)(wall * 1e6),
                               "cpu_us", cpu,
                               "reductions", stat_int(wstats, "reductions", 0),
                               "heap_peak_bytes", stat_int(wstats, "heap_peak_bytes", 0),
                               "tool_calls", (json_int_t)e->tool_calls);
        json_t *sup = json_array();
        for (int i = 0; i < TR_SUP_N; i++)
            json_array_append_new(sup, json_integer((json_int_t)trace_t[i]));
        json_object_set_new(st, "trace", json_pack("{s:o,s:O}", "sup", sup, "worker",
                                                   json_object_get(wstats, "trace") ?
                                                   json_object_get(wstats, "trace") : json_null()));
        return st;
    }
#else
    return json_pack("{s:I,s:I,s:I,s:I,s:I}",
                     "wall_us", (json_int_t)(wall * 1e6),
                     "cpu_us", cpu,
                     "reductions", stat_int(wstats, "reductions", 0),
                     "heap_peak_bytes", stat_int(wstats, "heap_peak_bytes", 0),
                     "tool_calls", (json_int_t)e->tool_calls);
#endif
}

/* The one log line per execution (info; deployment.md promises exactly
 * one): connection, request id, outcome kind, wall and CPU time, heap peak.
 * The message and the result may carry the script's data, so they are
 * logged only at debug level. */
void answer_log(struct exec *e, const char *kind, const json_t *wstats, const char *detail)
{
    char *id = json_dumps(e->req_id, JSON_COMPACT | JSON_ENCODE_ANY);
    double wall = e->t_start > 0 ? (ev_time() - e->t_start) * 1e3 : 0.0;
    json_int_t cpu_us = e->t_start > 0 ? (json_int_t)answer_cpu_us(e) : 0;

    log_info("exec conn=%llu seq=%llu id=%.64s op=%s outcome=%s wall_ms=%.1f cpu_ms=%.1f "
             "heap_peak_bytes=%lld tool_calls=%u",
             e->conn ? (unsigned long long)e->conn->id : 0ULL, (unsigned long long)e->seq,
             id ? id : "?", e->op == OP_CHECK ? "check" : e->op == OP_SESSION ? "session" : "execute",
             kind,
             wall < 0 ? 0.0 : wall, (double)cpu_us / 1e3,
             (long long)stat_int(wstats, "heap_peak_bytes", 0), e->tool_calls);
    /* a session's chunk waits for no worker: its session holds one */
    metrics_exec_end(kind, e->t_start > 0, wall / 1e3,
                     e->op == OP_SESSION && e->sjob != SJ_OPEN ? 0 : e->t_start - e->t_submit);
    if (detail)
        log_debug("exec seq=%llu %s: %.1500s", (unsigned long long)e->seq, kind, detail);
    free(id);
}

/* ------------------------------------------------------------------ */
/* live output                                                          */

/* Pending output is sent at most this long after it arrived, so many
 * prints make one notification; more than STREAM_FLUSH_BYTES pending go
 * out at once.  Every notification repeats the request id, which is at most
 * RPC_ID_MAX bytes (methods.c refuses a longer one), so the ids cost at most
 * that per notification. */
#define STREAM_DELAY        0.02
#define STREAM_FLUSH_BYTES  65536

/* Send output[streamed..) (all of it when final, else up to a whole
 * character) as one execution/output notification. */
void answer_flush(struct exec *e, int final)
{
    size_t end;
    json_t *text, *msg;

    ev_timer_stop(e->sup->loop, &e->stream_timer);
    if (!e->stream || !e->conn || e->streamed >= e->output_len)
        return;
    end = final ? e->output_len
                : e->streamed + utf8_complete(e->output + e->streamed, e->output_len - e->streamed);
    if (end == e->streamed)
        return;
    text = utf8_string_new(e->output + e->streamed, end - e->streamed);
    msg = text ? json_pack("{s:s,s:s,s:{s:O,s:o}}", "jsonrpc", "2.0", "method", "execution/output",
                           "params", "execution_id", e->req_id, "text", text) : NULL;
    e->streamed = end;
    if (msg)
        conn_send(e->conn, msg);
    json_decref(msg);
}

void answer_stream_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop; (void)revents;
    answer_flush(t->data, 0);
}

/* New output was captured: send it soon. */
void answer_output_note(struct exec *e)
{
    if (!e->stream)
        return;
    if (e->output_len - e->streamed >= STREAM_FLUSH_BYTES) {
        answer_flush(e, 0);
        return;
    }
    if (!ev_is_active(&e->stream_timer)) {
        ev_timer_set(&e->stream_timer, STREAM_DELAY, 0.);
        ev_timer_start(e->sup->loop, &e->stream_timer);
    }
}

static json_t *output_string(const struct exec *e)
{
    json_t *s = utf8_string_new(e->output ? e->output : "", e->output_len);
    return s ? s : json_string("");
}

/* The output for an answer: a JSON string, or for a large output a splice
 * token whose text (jp_quote of the repaired bytes, *buf: the caller frees
 * it after sending) is recorded in sp[*nsp]. */
#define OUTPUT_SPLICE_MIN ((size_t)64 << 10)

static json_t *output_for(const struct exec *e, struct jp_splice *sp, size_t *nsp, char **buf)
{
    json_t *s;
    size_t len;

    *buf = NULL;
    if (e->output_len < OUTPUT_SPLICE_MIN || !(s = output_string(e)))
        return output_string(e);
    *buf = jp_quote(json_string_value(s), json_string_length(s), &len);
    json_decref(s);
    if (!*buf)
        return output_string(e);
    sp[*nsp].raw = (struct jp_span){ *buf, len };
    return jp_token((unsigned)(*nsp)++);
}

void answer_fail(struct exec *e, enum rpc_kind kind, json_t *data, const json_t *wstats,
                 const char *fmt, ...)
{
    char msg[1024], *obuf;
    struct jp_splice sp[1];
    size_t nsp = 0;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    answer_flush(e, 1);
    if (!data)
        data = json_object();
    json_object_set_new(data, "output", output_for(e, sp, &nsp, &obuf));
    json_object_set_new(data, "output_truncated", json_boolean(e->output_truncated));
    if (e->t_start > 0)
        json_object_set_new(data, "stats", stats_new(e, wstats));
    if (e->op == OP_SESSION && (e->sjob == SJ_CHUNK || e->sjob == SJ_SNAPSHOT))
        json_object_set_new(data, "session_closed", json_boolean(!e->keep_open));
    answer_log(e, rpc_kind_name(kind), wstats, msg);
    if (e->conn && e->req_id) {
        json_t *reply = rpc_error_new(e->req_id, kind, msg, data);
        if (reply)
            conn_send_spliced(e->conn, reply, sp, nsp);
        json_decref(reply);
    } else {
        json_decref(data);
    }
    free(obuf);
}

/* ------------------------------------------------------------------ */
/* the worker's end frames                                              */

int answer_error_frame_ok(const json_t *frame)
{
    enum rpc_kind kind;

    if (!json_is_string(json_object_get(frame, "message")) ||
        !rpc_kind_parse(rpc_cstring(json_object_get(frame, "kind")), &kind))
        return 0;
    for (size_t i = 0; i < sizeof worker_kinds / sizeof worker_kinds[0]; i++)
        if (kind == worker_kinds[i])
            return 1;
    return 0;
}

/* The names of raw bindings (validated JSON): the first member of each
 * [name, value] pair.  Only the shape is checked here; the typed encoding
 * is checked when the bindings come back (params.c, the worker). */
static json_t *raw_binding_names(struct jp_span b)
{
    json_t *names = json_array(), *name;
    struct jp_iter it, pair;
    struct jp_span e, k, n, v;

    if (!names || jp_iter_init(&it, b) < 0)
        goto fail;
    while (jp_iter_next(&it, &k, &e)) {
        if (jp_iter_init(&pair, e) < 0 || pair.obj || !jp_iter_next(&pair, &k, &n) ||
            n.p[0] != '"' || !jp_iter_next(&pair, &k, &v) || jp_iter_next(&pair, &k, &v))
            goto fail;
        if (!(name = jp_key(n)) || json_array_append_new(names, name) < 0)
            goto fail;
    }
    return names;
fail:
    json_decref(names);
    return NULL;
}

/* What goes in the answer for a value that may have passed through: a
 * splice token for raw (recorded in sp), else a new reference to tree. */
static json_t *pass_on(struct jp_splice *sp, size_t *nsp, struct jp_span raw,
                       const json_t *tree)
{
    if (!raw.p)
        return json_incref((json_t *)tree);
    sp[*nsp].raw = raw;
    return jp_token((unsigned)(*nsp)++);
}

int answer_result(struct exec *e, const struct exec_evdata *d)
{
    const json_t *bindings = json_object_get(d->json, "bindings");
    const json_t *wstats = json_object_get(d->json, "stats");
    json_t *result, *names = NULL, *reply;
    struct jp_splice sp[3];
    size_t nsp = 0;
    const char *err = NULL;
    char *obuf = NULL;

    /* a session chunk returns bindings only when asked; its open and
     * snapshot answers are their own */
    int want_bindings = e->op == OP_EXECUTE || e->sjob == SJ_SNAPSHOT ||
                        (e->sjob == SJ_CHUNK && e->return_bindings);

    if (want_bindings &&
        (!json_is_array(bindings) ||
         !(names = d->raw_bindings.p ? raw_binding_names(d->raw_bindings)
                                     : bindings_names(bindings, &err))))
        return -1;
    if (e->op == OP_CHECK) {
        result = json_pack("{s:b}", "ok", 1);
    } else if (e->sjob == SJ_OPEN) {
        result = json_pack("{s:s}", "session", e->session_id);
    } else if (e->sjob == SJ_SNAPSHOT) {
        result = json_pack("{s:o,s:o}", "bindings", pass_on(sp, &nsp, d->raw_bindings, bindings),
                           "binding_names", names);
    } else {
        result = json_pack("{s:o,s:o,s:b,s:o}",
                           "value", pass_on(sp, &nsp, d->raw_value,
                                            json_object_get(d->json, "value") ?
                                            json_object_get(d->json, "value") : json_null()),
                           "output", output_for(e, sp, &nsp, &obuf),
                           "output_truncated", e->output_truncated,
                           "stats", stats_new(e, wstats));
        if (result && want_bindings) {
            json_object_set_new(result, "bindings",
                                pass_on(sp, &nsp, d->raw_bindings, bindings));
            json_object_set_new(result, "binding_names", names);
        }
    }
    if (log_enabled(LOG_LVL_DEBUG)) {       /* the value only at debug */
        char *v = json_dumps(json_object_get(result, "value"), JSON_COMPACT | JSON_ENCODE_ANY);
        answer_log(e, "ok", wstats, v ? v : "");
        free(v);
    } else {
        answer_log(e, "ok", wstats, NULL);
    }
    answer_flush(e, 1);
    reply = rpc_result_new(e->req_id, result);
    if (reply && e->conn)
        conn_send_spliced(e->conn, reply, sp, nsp);
    json_decref(reply);
    free(obuf);
    return 0;
}

void answer_error(struct exec *e, const json_t *frame)
{
    json_t *line = json_object_get(frame, "line");
    json_t *tb = json_object_get(frame, "traceback");
    json_t *data = json_object();
    enum rpc_kind kind = RPC_E_INTERNAL_ERROR;  /* answer_error_frame_ok checked the name */

    if (json_is_integer(line))
        json_object_set(data, "line", line);
    if (json_is_string(tb))
        json_object_set(data, "traceback", tb);
    (void)rpc_kind_parse(json_string_value(json_object_get(frame, "kind")), &kind);
    answer_fail(e, kind, data,
                json_object_get(frame, "stats"), "%s",
                json_string_value(json_object_get(frame, "message")));
}

void answer_exit(struct exec *e, const struct exec_evdata *d)
{
    int st = d->status;
    json_t *data = json_object();

    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGXCPU) {
        answer_fail(e, RPC_E_CPU_LIMIT, data, NULL, "execution exceeded the CPU limit of %llu ms",
                    (unsigned long long)e->lim.cpu_ms);
    } else if (WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS && d->has_syscall && d->syscall >= 0) {
        /* containment: the worker's SIGSYS handler named the call (a hint
         * from a possibly compromised process: only a number, and only
         * believed when the worker did die by SIGSYS) */
        char name[64];
        if (seccomp_syscall_name(d->syscall, name, sizeof name) < 0)
            snprintf(name, sizeof name, "unknown");
        json_object_set_new(data, "signal", json_integer(SIGSYS));
        json_object_set_new(data, "reason", json_string("forbidden system call (seccomp)"));
        json_object_set_new(data, "syscall", json_integer(d->syscall));
        json_object_set_new(data, "syscall_name", json_string(name));
        answer_fail(e, RPC_E_CRASHED, data, NULL,
                    "worker killed by signal %d (forbidden system call %s, number %ld)",
                    SIGSYS, name, d->syscall);
    } else if (WIFSIGNALED(st)) {
        int sig = WTERMSIG(st);
        json_object_set_new(data, "signal", json_integer(sig));
        json_object_set_new(data, "reason", json_string(sig == SIGSYS ?
                            "forbidden system call (seccomp)" : strsignal(sig)));
        answer_fail(e, RPC_E_CRASHED, data, NULL, "worker killed by signal %d (%s)", sig,
                    sig == SIGSYS ? "forbidden system call" : strsignal(sig));
    } else if (WIFEXITED(st) && WEXITSTATUS(st) >= WORKER_EXIT_SETUP &&
               WEXITSTATUS(st) <= WORKER_EXIT_PANIC) {
        static const char *const what[] = { "set-up", "job intake", "Lua state (panic)" };
        answer_fail(e, RPC_E_INTERNAL_ERROR, data, NULL, "worker %s failed (exit status %d)",
                    what[WEXITSTATUS(st) - WORKER_EXIT_SETUP], WEXITSTATUS(st));
    } else {
        json_object_set_new(data, "reason", json_string("exited without a result"));
        answer_fail(e, RPC_E_CRASHED, data, NULL, "worker exited (status %d) without a result",
                    WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
}
