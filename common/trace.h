/* Runs in: supervisor, worker */
/*
 * trace.h - timestamps of the steps of an execution, for bench/breakdown.
 *
 * Compiled in only with -DSANDBOXD_BENCH_TRACE=1 (`make trace`, build/trace,
 * never installed); in every other build TRACE() is empty and nothing here
 * exists.  Each TRACE(slot) stores CLOCK_MONOTONIC in ns (the vDSO, no
 * system call: a worker under seccomp may stamp too) in one process-wide
 * array.  The stamps describe the latest execution only, so they mean
 * something when executions run one at a time (bench/breakdown's
 * sequential client).
 *
 * Where they go: the worker's stamps ride in its end frame's stats
 * ("trace", an array indexed by slot), and the supervisor's answer carries
 * stats.trace = {"sup": [...], "worker": [...]}.  TR_ANSWER and TR_REAP
 * happen after an answer's stats are made, so an answer carries those of
 * the execution before it.
 */
#ifndef SANDBOXD_TRACE_H
#define SANDBOXD_TRACE_H

#ifndef SANDBOXD_BENCH_TRACE
#define SANDBOXD_BENCH_TRACE 0
#endif

#if SANDBOXD_BENCH_TRACE
#include <stdint.h>
#include <time.h>

enum trace_slot {
    /* the supervisor */
    TR_READ,        /* a client's bytes read (conn_read_cb) */
    TR_PARSED,      /* the request line parsed (rpc_parse) */
    TR_DISPATCH,    /* validated, queued, a pooled worker taken: exec_run */
    TR_JOB_SENT,    /* the JOB frame written */
    TR_END_READ,    /* the worker's end frame read, before it is handled */
    TR_ANSWER,      /* an answer dumped, before it is queued and written */
    TR_REAP,        /* the latest worker reaped */
    TR_SUP_N,
    /* the worker */
    TR_W_JOB = TR_SUP_N, /* the JOB frame read */
    TR_W_READY,     /* parsed, limits applied: Lua starts */
    TR_W_LUA,       /* the job function returned (tools, bindings, chunk, results) */
    TR_W_END,       /* the end frame's stats taken: its dump and write follow */
    TR_N
};

extern uint64_t trace_t[TR_N];

static inline void trace_stamp(enum trace_slot slot)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    trace_t[slot] = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
#define TRACE(slot) trace_stamp(slot)
#else
#define TRACE(slot) ((void)0)
#endif

#endif
