/*
 * params.c - the params of execute, check and session/open, validated in
 * one place, and the job built from them.  See params.h.
 */
#include "daemon/params.h"

#include <errno.h>
#include <stdint.h>

#include "daemon/conn.h"
#include "daemon/sched.h"
#include "daemon/sup.h"
#include "proto/bindings.h"
#include "proto/jsonrpc.h"
#include "proto/tools.h"

#define MAX_IDLE_TIMEOUT_MS 86400000    /* a day */

/* Slack for RLIMIT_AS above max_heap: the process image, jansson buffers for
 * the job and the result, allocator fragmentation.  Lua's own cap always
 * fires first; the kernel limit is the backstop for bugs in C. */
#define AS_SLACK (512ull * 1024 * 1024)

/* Limits as the worker sees them: integers, null for infinity.  rlimit_as
 * and rlimit_cpu (seconds) are the kernel backstops the worker sets on
 * itself: SIGXCPU a second after the supervisor's own CPU check.  nice is
 * the priority's nice value, which the worker also sets on itself (a
 * supervisor without CAP_SYS_NICE cannot renice a worker of another uid). */
json_t *params_job_limits(const struct sup *s, const struct limits *l)
{
    json_t *as = json_null(), *cpu = json_null();

    if (!SANDBOXD_SANITIZE && l->max_heap != LIMIT_INF && l->max_heap < UINT64_MAX / 2)
        as = json_integer((json_int_t)(l->max_heap + AS_SLACK));
    if (l->cpu_ms != LIMIT_INF)
        cpu = json_integer((json_int_t)(l->cpu_ms / 1000 + 2));
    return json_pack("{s:o,s:o,s:I,s:I,s:I,s:I,s:I,s:o,s:o,s:i}",
                     "max_heap", l->max_heap == LIMIT_INF ? json_null() :
                                 json_integer((json_int_t)l->max_heap),
                     "max_reductions", l->max_reductions == LIMIT_INF ? json_null() :
                                       json_integer((json_int_t)l->max_reductions),
                     "max_output_bytes", (json_int_t)l->max_output_bytes,
                     "max_bindings_bytes", (json_int_t)l->max_bindings_bytes,
                     "max_result_bytes", (json_int_t)s->cfg.max_message_bytes,
                     "max_parallel_calls", (json_int_t)s->cfg.max_parallel_calls,
                     "tool_spin_us", (json_int_t)sched_spin_hint(s),
                     "rlimit_as", as, "rlimit_cpu", cpu,
                     "nice", priority_nice(l->priority, s->nice));
}

int params_code(struct conn *c, const struct rpc_msg *m, const json_t **code)
{
    *code = json_object_get(m->params, "code");
    if (!json_is_string(*code)) {
        conn_send_error(c, m->id, RPC_E_INVALID_PARAMS, NULL, "params.code must be a string");
        return -1;
    }
    if (json_string_length(*code) > c->sup->cfg.max_code_bytes) {
        conn_send_error(c, m->id, RPC_E_CODE_TOO_LARGE, NULL,
                        "code exceeds maximum size of %zu bytes", c->sup->cfg.max_code_bytes);
        return -1;
    }
    return 0;
}

/* params.idle_timeout_ms of session/open: absent, null, or 1 ms to a day. */
static int parse_idle(struct conn *c, const struct rpc_msg *m, struct req_params *p)
{
    const json_t *idle = json_object_get(m->params, "idle_timeout_ms");

    if (idle && !json_is_null(idle) &&
        (!json_is_integer(idle) || json_integer_value(idle) < 1 ||
         json_integer_value(idle) > MAX_IDLE_TIMEOUT_MS)) {
        conn_send_error(c, m->id, RPC_E_INVALID_PARAMS, NULL,
                        "params.idle_timeout_ms must be an integer from 1 to %d",
                        MAX_IDLE_TIMEOUT_MS);
        return -1;
    }
    p->idle_ms = json_is_integer(idle) ? (unsigned)json_integer_value(idle) : 0;
    return 0;
}

/* params.bindings: absent, null, or an array of valid bindings.  Checked
 * here, not only in the worker: valid bindings re-encode to at most their
 * own size (no reals, canonical forms), so the job frame stays within what
 * a worker reads.  Large bindings (passed through as the client sent them)
 * are the worker's to validate. */
static int parse_bindings(struct conn *c, const struct rpc_msg *m, struct req_params *p)
{
    const json_t *b = json_object_get(m->params, "bindings");

    if (b && !json_is_null(b) && !json_is_array(b)) {
        conn_send_error(c, m->id, RPC_E_INVALID_PARAMS, NULL,
                        "params.bindings must be the array returned by an earlier execute");
        return -1;
    }
    if (json_is_array(b) && json_array_size(b) > 0 && !m->raw_bindings.p) {
        const char *berr = NULL;
        json_t *names = bindings_names(b, &berr);
        if (!names) {
            conn_send_error(c, m->id, RPC_E_INVALID_PARAMS, NULL, "%s",
                            berr ? berr : "malformed bindings");
            return -1;
        }
        json_decref(names);
    }
    p->bindings = json_is_array(b) ? b : NULL;
    return 0;
}

int params_parse(struct conn *c, const struct rpc_msg *m, enum exec_op op, struct req_params *p)
{
    struct sup *s = c->sup;
    const json_t *stream = json_object_get(m->params, "stream_output");
    char err[256];
    int rc;

    *p = (struct req_params){ 0 };
    if (op == OP_SESSION ? parse_idle(c, m, p) < 0 : params_code(c, m, &p->code) < 0)
        return -1;
    if (!(p->tools = tools_norm(json_object_get(m->params, "tools"), &p->index, err,
                                sizeof err))) {
        conn_send_error(c, m->id, RPC_E_INVALID_PARAMS, NULL, "%s", err);
        return -1;
    }
    if (op != OP_SESSION && stream && !json_is_boolean(stream) && !json_is_null(stream)) {
        params_clear(p);
        conn_send_error(c, m->id, RPC_E_INVALID_PARAMS, NULL, "params.stream_output must be a boolean");
        return -1;
    }
    p->stream = op == OP_EXECUTE && json_is_true(stream);
    if (parse_bindings(c, m, p) < 0) {
        params_clear(p);
        return -1;
    }
    if ((rc = limits_resolve(&s->cfg.defaults, &s->cfg.ceilings, m->params, &p->lim, err,
                             sizeof err)) != 0) {
        params_clear(p);
        conn_send_error(c, m->id, rc == ERANGE ? RPC_E_LIMIT_OUT_OF_RANGE : RPC_E_INVALID_PARAMS, NULL,
                        "%s", err);
        return -1;
    }
    return 0;
}

void params_clear(struct req_params *p)
{
    json_decref(p->tools);
    json_decref(p->index);
    p->tools = p->index = NULL;
}

struct exec *params_exec(struct conn *c, const struct rpc_msg *m, enum exec_op op,
                         struct req_params *p)
{
    json_t *job, *bindings = p->bindings ? json_incref((json_t *)p->bindings) : json_array();
    json_t *limits = params_job_limits(c->sup, &p->lim);
    struct exec *e;

    if (op == OP_CHECK)
        job = json_pack("{s:s,s:O,s:o}", "op", "check", "code", p->code, "limits", limits);
    else if (op == OP_EXECUTE)
        job = json_pack("{s:s,s:O,s:O,s:o,s:o}", "op", "execute", "code", p->code,
                        "tools", p->tools, "bindings", bindings, "limits", limits);
    else
        job = json_pack("{s:s,s:O,s:o,s:o}", "op", "session", "tools", p->tools,
                        "bindings", bindings, "limits", limits);
    if (op == OP_CHECK)
        json_decref(bindings);
    json_decref(p->tools);      /* the job holds its own reference */
    p->tools = NULL;
    e = job ? exec_new(c, op, m->id, job, p->index, &p->lim) : NULL;
    if (!job)
        json_decref(p->index);
    p->index = NULL;
    if (!e) {
        conn_send_error(c, m->id, RPC_E_INTERNAL_ERROR, NULL, "out of memory");
        return NULL;
    }
    /* large bindings pass through as the client sent them (the worker
     * validates them; they are not re-encoded, so they cannot grow) */
    if (op != OP_CHECK && m->raw_bindings.p && exec_set_job_bindings(e, m->raw_bindings) < 0) {
        exec_refuse(e, RPC_E_INTERNAL_ERROR, NULL, "out of memory");
        return NULL;
    }
    return e;
}
