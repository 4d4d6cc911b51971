/* metrics.c - see metrics.h. */
#include "daemon/metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The kinds an execution can end with (answer.c's log line `outcome=`). */
static const char *const kinds[] = {
    "ok", "syntax_error", "runtime_error", "timeout", "memory_limit", "reductions_limit",
    "cpu_limit", "crashed", "bindings_too_large", "invalid_params", "internal_error",
    "tool_aborted", "tool_call_limit", "cancelled", "busy", "disconnected", "other",
};
#define N_KINDS (sizeof kinds / sizeof kinds[0])

/* Bucket upper bounds, seconds; +Inf is implicit.  Run time spans a
 * millisecond script to the ten-minute ceiling of the sample config; a
 * queue wait is microseconds on an idle daemon and seconds when saturated. */
static const double wall_bounds[] = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600,
};
static const double wait_bounds[] = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
    5, 10, 30,
};
#define MAX_BOUNDS 18

struct histogram {
    const double *bounds;
    size_t n;
    uint64_t count[MAX_BOUNDS + 1];     /* per bucket, not cumulative; [n] is +Inf only */
    uint64_t total;
    double sum;
};

static struct {
    uint64_t executions[N_KINDS];
    uint64_t tool_calls, zygote_restarts, refused_peers;
    uint64_t handovers_stuck, handovers_died;
    struct histogram wall, wait;
} reg = {
    .wall = { wall_bounds, sizeof wall_bounds / sizeof wall_bounds[0], { 0 }, 0, 0 },
    .wait = { wait_bounds, sizeof wait_bounds / sizeof wait_bounds[0], { 0 }, 0, 0 },
};

static void observe(struct histogram *h, double v)
{
    size_t i = 0;

    if (!(v >= 0))
        v = 0;          /* a clock step or NaN: counted, as zero */
    while (i < h->n && v > h->bounds[i])
        i++;
    h->count[i]++;
    h->total++;
    h->sum += v;
}

void metrics_exec_end(const char *kind, int started, double wall_s, double wait_s)
{
    size_t k = N_KINDS - 1;

    for (size_t i = 0; kind && i < N_KINDS - 1; i++)
        if (strcmp(kinds[i], kind) == 0)
            k = i;
    reg.executions[k]++;
    if (started) {
        observe(&reg.wall, wall_s);
        observe(&reg.wait, wait_s);
    }
}

void metrics_tool_call(void)      { reg.tool_calls++; }
void metrics_zygote_restart(void) { reg.zygote_restarts++; }

void metrics_handover_lost(const char *reason)
{
    if (reason && strcmp(reason, "died") == 0)
        reg.handovers_died++;
    else
        reg.handovers_stuck++;
}
void metrics_refused_peer(void)   { reg.refused_peers++; }

/* ------------------------------------------------------------------ */
/* the text                                                            */

struct text {
    char *buf;
    size_t len, cap;
    int failed;
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct text *t, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (t->failed)
        return;
    for (;;) {
        va_start(ap, fmt);
        n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = 1;
            return;
        }
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap * 2 + (size_t)n;
        char *nb = realloc(t->buf, cap);
        if (!nb) {
            t->failed = 1;
            return;
        }
        t->buf = nb;
        t->cap = cap;
    }
}

static void family(struct text *t, const char *name, const char *type, const char *help)
{
    put(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void scalar(struct text *t, const char *name, const char *type, const char *help,
                   unsigned long long v)
{
    family(t, name, type, help);
    put(t, "%s %llu\n", name, v);
}

static void histogram(struct text *t, const char *name, const char *help,
                      const struct histogram *h)
{
    uint64_t cum = 0;

    family(t, name, "histogram", help);
    for (size_t i = 0; i < h->n; i++) {
        cum += h->count[i];
        put(t, "%s_bucket{le=\"%g\"} %llu\n", name, h->bounds[i], (unsigned long long)cum);
    }
    put(t, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)h->total);
    put(t, "%s_sum %.9g\n", name, h->sum);
    put(t, "%s_count %llu\n", name, (unsigned long long)h->total);
}

/* The supervisor's resident set, from /proc/self/statm (pages). */
static unsigned long long resident_bytes(void)
{
    unsigned long long size = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "re");

    if (f) {
        if (fscanf(f, "%llu %llu", &size, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return rss * (unsigned long long)sysconf(_SC_PAGESIZE);
}

char *metrics_render(const struct metrics_now *now)
{
    struct text t = { malloc(4096), 0, 4096, 0 };

    if (!t.buf)
        return NULL;
    family(&t, "sandboxd_executions_total", "counter",
           "Executions ended, by outcome kind (ok, an error kind, disconnected, busy).");
    for (size_t i = 0; i < N_KINDS; i++)
        put(&t, "sandboxd_executions_total{kind=\"%s\"} %llu\n", kinds[i],
            (unsigned long long)reg.executions[i]);
    histogram(&t, "sandboxd_execution_duration_seconds",
              "Wall time of executions that reached a worker, job sent to answer.", &reg.wall);
    histogram(&t, "sandboxd_queue_wait_seconds",
              "Time executions that reached a worker waited for it.", &reg.wait);
    scalar(&t, "sandboxd_tool_calls_total", "counter",
           "tool/call requests sent to clients.", reg.tool_calls);
    scalar(&t, "sandboxd_workers_started_total", "counter",
           "Worker processes the zygote handed over.", now->workers_started);
    scalar(&t, "sandboxd_workers", "gauge",
           "Live worker processes (running, idle or being killed).", now->workers);
    scalar(&t, "sandboxd_idle_workers", "gauge",
           "Idle workers in the warm pool.", now->idle_workers);
    scalar(&t, "sandboxd_queued_executions", "gauge",
           "Executions waiting for a worker.", now->queued);
    scalar(&t, "sandboxd_connections", "gauge", "Open client connections.", now->connections);
    scalar(&t, "sandboxd_sessions", "gauge", "Open sessions.", now->sessions);
    scalar(&t, "sandboxd_input_buffer_bytes", "gauge",
           "Bytes allocated for unfinished client messages.", now->input_buffer_bytes);
    scalar(&t, "sandboxd_output_buffer_bytes", "gauge",
           "Bytes allocated for answers not yet written to clients.", now->output_buffer_bytes);
    scalar(&t, "sandboxd_can_start_workers", "gauge",
           "1 while worker processes can be started, 0 from the third failure in a row.",
           now->can_start_workers ? 1 : 0);
    family(&t, "sandboxd_cannot_start_workers_since_seconds", "gauge",
           "Unix time of the first of the failures that stopped worker starts; 0 while they can.");
    put(&t, "sandboxd_cannot_start_workers_since_seconds %.3f\n",
        now->can_start_workers ? 0. : now->cannot_start_since);
    scalar(&t, "sandboxd_worker_start_failures", "gauge",
           "Failures to get a worker in a row (0 since the last success).", now->start_failures);
    family(&t, "sandboxd_handovers_lost_total", "counter",
           "Jobs a worker did not take, by reason: stuck (not read, no sign of life; the worker "
           "was killed) or died (it exited first).  Each went to another worker or, the third "
           "time, ended internal_error.");
    put(&t, "sandboxd_handovers_lost_total{reason=\"stuck\"} %llu\n",
        (unsigned long long)reg.handovers_stuck);
    put(&t, "sandboxd_handovers_lost_total{reason=\"died\"} %llu\n",
        (unsigned long long)reg.handovers_died);
    scalar(&t, "sandboxd_zygote_restarts_total", "counter",
           "Times the zygote died and was started again.", reg.zygote_restarts);
    scalar(&t, "sandboxd_refused_peers_total", "counter",
           "Connections refused for their peer credentials.", reg.refused_peers);
    scalar(&t, "process_resident_memory_bytes", "gauge",
           "Resident memory of the supervisor process.", resident_bytes());
    if (t.failed) {
        free(t.buf);
        return NULL;
    }
    return t.buf;
}
