/* Runs in: supervisor */
/*
 * metrics.h - the supervisor's metric registry and its Prometheus text
 * exposition (format 0.0.4), answered by the `metrics` method.
 *
 * Contract:
 *  - One registry per process, in static storage: the update functions
 *    never allocate, never fail, cost O(1) (a histogram: one pass over its
 *    bucket bounds), and may be called before anything else.  Only the
 *    supervisor's loop thread calls them.
 *  - Counters (and histograms) only grow; they start at 0 with the process.
 *    Every execution kind is exposed from the start, with 0, so rate() and
 *    alerts work before the first occurrence.
 *  - Gauges are not kept here: the caller reads them from its own state at
 *    scrape time and passes them to metrics_render() (struct metrics_now),
 *    so they cannot drift from what they describe.
 *  - metrics_render() returns the exposition text, malloc'd and
 *    NUL-terminated (the caller frees it), or NULL when out of memory.
 *    Families appear in a fixed order, each with one HELP and one TYPE line;
 *    every line ends with '\n'.
 *
 * The metrics are described, with sample alerts, in docs/deployment.md.
 */
#ifndef SANDBOXD_METRICS_H
#define SANDBOXD_METRICS_H

#include <stddef.h>
#include <stdint.h>

/* An execution answered (or ended unanswered): kind is "ok", an error kind
 * of docs/protocol.md, "disconnected" (the client went away first) or
 * "busy" (refused before it was queued); any other string counts as
 * "other".  started: it reached a worker, and then wall_s is its run time
 * and wait_s the time it waited for a worker (both observed in their
 * histograms). */
void metrics_exec_end(const char *kind, int started, double wall_s, double wait_s);
/* A tool/call sent to a client. */
void metrics_tool_call(void);
/* A hand-over lost (exec.h, "the hand-over"): reason "stuck" (the worker
 * did not take its job and was killed) or "died" (it exited first); any
 * other string counts as "stuck". */
void metrics_handover_lost(const char *reason);
/* The zygote died and was started again. */
void metrics_zygote_restart(void);
/* A connection refused for its peer credentials (allow_uids/allow_gids). */
void metrics_refused_peer(void);

/* The values read at scrape time. */
struct metrics_now {
    uint64_t workers_started;     /* counter kept by the scheduler */
    unsigned workers;             /* live worker processes */
    unsigned idle_workers;        /* of which idle in the warm pool */
    unsigned queued;              /* executions waiting for a worker */
    unsigned connections;         /* open client connections */
    unsigned sessions;            /* open sessions */
    size_t   input_buffer_bytes;  /* allocated for unfinished client messages */
    size_t   output_buffer_bytes; /* allocated for answers not yet written */
    int      can_start_workers;   /* health: the worker supply is up */
    double   cannot_start_since;  /* Unix time it went down (its first failure); 0: up */
    unsigned start_failures;      /* failures to get a worker in a row */
};

char *metrics_render(const struct metrics_now *now);

/* The MIME type of the text, as the exposition format names it. */
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4"

#endif
