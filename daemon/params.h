/* Runs in: supervisor */
/*
 * params.h - the params of the requests that start a worker (execute,
 * check, session/open): one parser, one job builder.
 *
 * Contract:
 *  - methods.c has already checked what every request of its kind needs
 *    (params an object or absent, the request id not in use on the
 *    connection) and routed an execute that names a session to
 *    session_chunk().
 *  - params_code() reads params.code of execute and check (borrowed) into
 *    *code: a string within max_code_bytes.  0, or -1 after answering
 *    invalid_params or code_too_large.
 *  - params_parse() validates the rest fully, in the supervisor, before
 *    any worker is involved; the code itself is only measured
 *    (max_code_bytes), never parsed.  It returns 0 with *p filled in, or
 *    -1 after answering the request with its error (nothing in *p to
 *    release).  The order of the checks: code (execute, check) or
 *    idle_timeout_ms (session/open); tools; stream_output (execute,
 *    check); bindings; limits.
 *  - What *p holds is borrowed from the message (code, bindings) or owned
 *    (tools, index: released by params_clear() or taken by params_exec()).
 *  - params_exec() builds the job op's worker reads (docs/architecture.md,
 *    "Channel") from p, creates the QUEUED execution and keeps the raw
 *    bindings to splice into its job (execute, session/open).  It takes
 *    p's tools and index whatever happens.  NULL after answering (and
 *    logging) internal_error, out of memory; else the execution, not yet
 *    submitted.
 *  - params_job_limits() is the job's "limits" object for l (a new
 *    reference, or NULL when out of memory).
 */
#ifndef SANDBOXD_PARAMS_H
#define SANDBOXD_PARAMS_H

#include <jansson.h>

#include "daemon/exec.h"
#include "policy/config.h"

struct conn;
struct rpc_msg;
struct sup;

struct req_params {
    const json_t *code;         /* execute, check: params.code (a string) */
    const json_t *bindings;     /* params.bindings: an array, or NULL */
    json_t *tools;              /* owned: the normalised tools (proto/tools.h) */
    json_t *index;              /* owned: their index */
    struct limits lim;          /* resolved against the daemon's defaults and ceilings */
    int stream;                 /* execute: params.stream_output is true */
    unsigned idle_ms;           /* session/open: params.idle_timeout_ms, 0: the default */
};

int params_code(struct conn *c, const struct rpc_msg *m, const json_t **code);
int params_parse(struct conn *c, const struct rpc_msg *m, enum exec_op op, struct req_params *p);
void params_clear(struct req_params *p);
struct exec *params_exec(struct conn *c, const struct rpc_msg *m, enum exec_op op,
                         struct req_params *p);
json_t *params_job_limits(const struct sup *s, const struct limits *l);

#endif
