/* Runs in: supervisor */
/*
 * exec.h - executions: the state table and its single event entry point.
 *
 * Every execution moves through these states, driven only by exec_event()
 * (see docs/architecture.md, "Execution lifecycle"):
 *
 *   QUEUED -> STARTING -> RUNNING <-> WAIT_TOOL -> FINISHING -> DONE
 *
 * A session (OP_SESSION) is one execution from session/open to its end: its
 * open job runs RUNNING -> IDLE, then each chunk or snapshot
 * IDLE -> RUNNING <-> WAIT_TOOL -> IDLE, until an end that closes it goes on
 * to FINISHING.
 *
 * timeout_ms bounds the wait for a worker (STARTING: an execution whose
 * worker never comes is still answered, `timeout`), and then the run, from
 * the moment the job is sent (RUNNING).
 *
 * The hand-over: a worker takes its first job (an execute's, a check's, a
 * session's open) by reading it.  Nothing answers the hand-over (no hop
 * is added to an execution); the supervisor keeps the job and looks,
 * HANDOVER_LOOK s after the hand-over and then every HANDOVER_GAP s (the
 * first look only takes a sample), whether the worker has read it,
 * through the kernel (wproc_job_look).  A worker that has not,
 * and between two looks read nothing, used no CPU and was not runnable, is
 * stuck (stopped at once after the pool's liveness check, frozen by a
 * cgroup freezer, stopped by a tracer): XE_STUCK.  One that died without
 * reading its job (XE_EXIT with d->untaken) is the same.  Either way the
 * job goes back to STARTING, first in line, and to another worker (the
 * stuck one is killed; its reap follows), at most HANDOVER_TRIES workers
 * in all; the last lost hand-over answers internal_error (data.reason
 * "no worker took the job").  The deadline starts again for the wait and
 * for the run of the worker that takes the job.  Nothing a chunk does can
 * cause either: the chunk runs only after its worker has read the whole
 * job, from then on the worker has spoken or the look says "taken", and
 * under seccomp a worker cannot stop itself or anyone (no kill, tgkill,
 * ptrace); a chunk that ends its own worker later is answered `crashed`,
 * never handed on.  A session's later chunks are not watched: its state
 * lives in that one worker, so a chunk sent to a worker stopped between
 * chunks waits for its timeout, which ends the session.
 *
 * Which events each state accepts (x; `.`: refused, exec_unexpected()
 * decides what it means), one column a state, in enum exec_state's order
 * (each heading begins its name).  exec.c's accepts[] is this table:
 * tests/unit/test_exec_table.c reads it here and holds the code to it.
 *
 * accepts:
 *                 queu star runn wait idle fini done
 *   start         x    .    .    .    .    .    .
 *   worker        .    x    .    .    .    .    .
 *   stuck         .    .    x    .    .    .    .
 *   output        .    .    x    x    .    .    .
 *   tool_call     .    .    x    x    .    .    .
 *   result        .    .    x    .    .    .    .
 *   error         .    .    x    x    .    .    .
 *   bad_frame     .    .    x    x    x    .    .
 *   tool_ok       .    .    .    x    .    .    .
 *   tool_err      .    .    .    x    .    .    .
 *   tool_abort    .    .    .    x    .    .    .
 *   timeout       .    x    x    x    .    .    .
 *   cpu           .    .    x    x    .    .    .
 *   cancel        x    x    x    x    .    x    .
 *   disconnect    x    x    x    x    x    x    .
 *   exit          .    .    x    x    x    x    .
 *   chunk         .    .    .    .    x    .    .
 *   idle          .    .    .    .    x    .    .
 *   close         x    x    x    x    x    .    .
 *
 * WAIT_TOOL: at least one tool/call is outstanding.  Under parallel() the
 * worker keeps running there (output, further tool calls, up to
 * max_parallel_calls outstanding); it ends from RUNNING, or from
 * WAIT_TOOL with an ERROR frame (a limit hit while calls are outstanding).
 *
 * Contract:
 *  - Each request an execution carries (execute, check; a session's open,
 *    each chunk and snapshot, and its close) gets exactly one answer on its
 *    connection (result or error) unless the connection goes away first.
 *  - Once answered otherwise than by its worker's own end frame, the worker
 *    is killed at once; the execution stays in FINISHING until the worker is
 *    reaped, then it is freed (DONE).  An execution never outlives its
 *    worker's reap and never frees a worker: wproc.c owns worker memory.
 *  - exec_event() may free the execution; callers must not touch it after.
 */
#ifndef SANDBOXD_EXEC_H
#define SANDBOXD_EXEC_H

#include <ev.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/list.h"
#include "policy/config.h"
#include "proto/jsonpass.h"
#include "proto/jsonrpc.h"

/* The hand-over's bounds.  HANDOVER_LOOK: the time to the first look;
 * HANDOVER_GAP: between the later ones.  A worker stuck from the start is
 * found at the second look, HANDOVER_LOOK + HANDOVER_GAP after the
 * hand-over.  Not a bound on a healthy worker, which may wait longer for
 * a CPU (runnable: it shows life) and read its job 100 ms late on a
 * loaded machine (docs/architecture.md, "The hand-over").  The gap is not
 * HANDOVER_LOOK again because each look wakes the supervisor, and with a
 * look every 5 ms a worker starved beside two CPU hogs read its job later
 * still: trivial p99 135-190 ms against 40-50 ms without looks (45-54 ms
 * with this gap; 66-73 ms with gaps doubling from 5 ms).
 * HANDOVER_TRIES: the workers a job is handed to before it is answered
 * internal_error. */
#define HANDOVER_LOOK  0.005    /* s */
#define HANDOVER_GAP   0.050    /* s */
#define HANDOVER_TRIES 3

struct sup;
struct conn;
struct wproc;

enum exec_op { OP_EXECUTE, OP_CHECK, OP_SESSION };

/* ST_IDLE: a session between chunks (its worker alive, no job). */
enum exec_state {
    ST_QUEUED, ST_STARTING, ST_RUNNING, ST_WAIT_TOOL, ST_IDLE, ST_FINISHING, ST_DONE,
};

/* What a session's worker is doing (OP_SESSION only). */
enum session_job { SJ_NONE, SJ_OPEN, SJ_CHUNK, SJ_SNAPSHOT };

enum exec_ev {
    XE_START,       /* the scheduler admitted it (QUEUED -> STARTING) */
    XE_WORKER,      /* a worker is assigned (d->w) */
    XE_STUCK,       /* the worker does not take its job (see "the hand-over") */
    XE_OUTPUT,      /* CHAN_OUTPUT (d->payload, d->len) */
    XE_TOOL_CALL,   /* CHAN_TOOL_CALL (d->json) */
    XE_RESULT,      /* CHAN_RESULT (d->json) */
    XE_ERROR,       /* CHAN_ERROR (d->json) */
    XE_BAD,         /* protocol violation by the worker (d->why) */
    XE_TOOL_OK,     /* client answered tool call d->call (d->json = result) */
    XE_TOOL_ERR,    /* ... with an error (d->json, d->why = message) */
    XE_TOOL_ABORT,  /* ... with data.abort = true */
    XE_TIMEOUT,     /* timeout_ms passed */
    XE_CPU,         /* cpu_ms used */
    XE_CANCEL,      /* $/cancelRequest */
    XE_DISCONNECT,  /* the connection is closing */
    XE_EXIT,        /* the worker was reaped (d->status, d->untaken; d->w, gone after) */
    XE_CHUNK,       /* a session's next job (d->json, d->id, d->lim, flags) */
    XE_IDLE,        /* a session's idle_timeout_ms passed */
    XE_CLOSE,       /* session/close (d->id) */
};

struct exec_evdata {
    const unsigned char *payload;
    size_t len;
    const json_t *json;
    const char *why;
    int status;
    int untaken;                /* XE_EXIT: it died without reading its job (wproc_untaken) */
    unsigned call;              /* XE_TOOL_*: index in exec.pending */
    const json_t *id;           /* XE_CHUNK, XE_CLOSE: the request's id */
    const struct limits *lim;   /* XE_CHUNK: the chunk's limits */
    int stream, return_bindings, snapshot;  /* XE_CHUNK */
    struct wproc *w;            /* XE_WORKER; XE_EXIT: the reaped worker, valid for the call */
    /* XE_EXIT (containment): the number the worker's SIGSYS handler
     * reported in a CHAN_SYSCALL frame; a hint, valid if has_syscall */
    int has_syscall;
    long syscall;
    /* raw JSON passed through (proto/jsonpass.h; p NULL: none): XE_TOOL_OK
     * the tool's answer; XE_TOOL_CALL its args; XE_RESULT the value and the
     * bindings */
    struct jp_span raw, raw_value, raw_bindings;
};

struct exec {
    struct sup  *sup;
    struct conn *conn;          /* NULL once detached (connection gone) */
    struct list_head conn_node; /* in conn->execs */
    struct list_head q_node;    /* in conn->queue (QUEUED) or sup->starting (STARTING) */
    uint64_t seq;
    enum exec_op op;
    enum exec_state state;
    json_t  *req_id;            /* owned copy of the request id */
    json_t  *job;               /* owned JOB payload until its worker took it (the hand-over) */
    char    *job_bindings;      /* owned raw bindings spliced into the job, or NULL */
    size_t   job_bindings_len;
    json_t  *tools;             /* owned tool index, name -> {module, functions: {name:
                                 * entry}} (proto/tools.h; tool/call checks) */
    struct limits lim;
    struct wproc *w;            /* borrowed; NULL before RUNNING and after the reap */
    ev_timer deadline, cpu_timer;
    ev_timer handover;          /* the hand-over's looks (clocks.h) */
    unsigned handovers;         /* hand-overs of the job lost so far */
    ev_tstamp t_submit, t_start;
    uint64_t cpu_us_seen;       /* worker CPU time sampled when it was killed */
    /* outstanding tool/calls: the id sent to the client and the number of
     * the call (its CHAN_TOOL_CALL frames are numbered 1, 2, ... in arrival
     * order, which is the order the worker sent them) */
    struct exec_call { char id[48]; unsigned call; } *pending;   /* owned */
    unsigned n_pending, max_pending;
    unsigned call_seq;          /* CHAN_TOOL_CALL frames received */
    unsigned tool_calls;
    char    *output;            /* owned captured print output */
    size_t   output_len;
    int      output_truncated;
    /* stream_output: output[0..streamed) has been sent as execution/output
     * notifications; the rest goes out when stream_timer fires, before the
     * next tool/call and before the answer, so it arrives in order */
    int      stream;
    size_t   streamed;
    ev_timer stream_timer;
    /* sessions (OP_SESSION): one exec from session/open to its end; req_id,
     * lim, output and the counters are the current chunk's, and req_id is
     * NULL while the session is idle */
    char     session_id[32];
    int      sjob;              /* enum session_job */
    struct limits slim;         /* the session's: every chunk's defaults and ceilings */
    int      return_bindings;
    int      keep_open;         /* the answer being sent leaves the session open */
    json_t  *close_id;          /* session/close answered once the worker is gone; owned */
    ev_timer idle_timer;
    double   idle_timeout;      /* seconds */
    uint64_t cpu_base_us;       /* the worker's CPU time when the chunk began */
};

/* Create a QUEUED execution of connection c.  Steals job and tools; id is
 * copied.  NULL on allocation failure (job and tools released). */
struct exec *exec_new(struct conn *c, enum exec_op op, json_t *id, json_t *job, json_t *tools,
                      const struct limits *lim);
void exec_event(struct exec *e, enum exec_ev ev, const struct exec_evdata *d);

/* An open session of c called sid (a JSON string), or NULL. */
struct exec *exec_session_find(struct conn *c, const json_t *sid);
/* c will send nothing more: its idle sessions end now, busy ones after
 * their chunk. */
void exec_end_sessions(struct conn *c);

/* A live (not yet answered) execution of c with request id `id`, or NULL. */
struct exec *exec_find(struct conn *c, const json_t *id);
/* A response from the client; routed to the execution whose tool/call has
 * this id (returns 1), or logged and ignored (returns 0).  With result NULL,
 * error is the error object (borrowed). */
int exec_tool_response(struct conn *c, const json_t *id, const json_t *result,
                       const json_t *error, const struct jp_span *raw_result);
/* Keep a copy of raw (validated) bindings to splice into the job in place
 * of its "bindings".  0, or -1 when out of memory. */
int exec_set_job_bindings(struct exec *e, struct jp_span raw);
/* The connection is going away: detach and kill every execution of c. */
void exec_detach_all(struct conn *c);
/* Answer an execution that has no worker yet (QUEUED, never queued, or
 * STARTING) with internal_error "workers cannot be started: why",
 * data.reason "workers cannot be started" and data.retry_after_ms (when the
 * daemon tries again); it leaves the scheduler's lists and is freed. */
void exec_no_worker(struct exec *e, const char *why, double retry_s);
/* Answer an execution that was never queued with error `kind` (data stolen,
 * may be NULL; output and output_truncated are added), log its outcome as
 * `kind` and free it: the daemon is stopping (cancelled), the queue is full
 * (busy), its job could not be built (internal_error, out of memory). */
void exec_refuse(struct exec *e, enum rpc_kind kind, json_t *data, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Whether state st accepts event ev (1) or refuses it (0): the table
 * above.  exec_state_name() and exec_event_name() are the names the log
 * uses (static strings). */
int exec_accepts(enum exec_state st, enum exec_ev ev);
const char *exec_state_name(enum exec_state st);
const char *exec_event_name(enum exec_ev ev);
/* The job reached its worker (the hand-over's look says so): it is no
 * longer kept. */
void exec_job_taken(struct exec *e);
/* Answer an open execution with `cancelled` (shutdown). */
void exec_abort(struct exec *e, const char *why);

#endif
