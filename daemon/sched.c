/*
 * sched.c - admission, round-robin queueing, worker hand-out, warm pool,
 * and reaping.  See sched.h and the counting rules in sup.h.
 */
#include "daemon/sched.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/conn.h"
#include "daemon/exec.h"
#include "daemon/log.h"
#include "daemon/sup.h"
#include "daemon/wproc.h"
#include "daemon/zygote.h"

/* Can one more execution get a worker without exceeding max_workers?
 * Executions already STARTING beyond the idle and pending workers each
 * need a new process too: without counting them, sched_pump() moved the
 * whole queue to STARTING in one pass (procs only grows in spawn(), after
 * the loop), which bypassed the round-robin (a later connection went to the
 * back of every earlier one's backlog) and max_queue (issue 6: fairness). */
static int has_capacity(const struct sup *s)
{
    unsigned need_new;

    if (s->n_idle + s->pending > s->n_starting)
        return 1;
    need_new = s->n_starting - s->n_idle - s->pending;
    return s->procs + need_new < s->cfg.max_workers;
}

void sup_count_down(unsigned *counter, const char *name)
{
    if (*counter == 0) {
        log_err("internal: counter %s would go below zero; kept at 0", name);
        return;
    }
    (*counter)--;
}

static void rr_enqueue(struct exec *e)
{
    struct conn *c = e->conn;
    struct sup *s = e->sup;

    list_add_tail(&c->queue, &e->q_node);
    s->queued++;
    if (!list_linked(&c->rr_node))
        list_add_tail(&s->rr, &c->rr_node);
}

void sched_unqueue(struct exec *e)
{
    struct conn *c = e->conn;

    if (!list_linked(&e->q_node))
        return;         /* never queued: nothing to take out, nothing to count */
    list_del(&e->q_node);
    sup_count_down(&e->sup->queued, "queued");
    if (c && list_empty(&c->queue))
        list_del(&c->rr_node);
}

/* The next queued execution, taking connections in turn. */
static struct exec *rr_pop(struct sup *s)
{
    struct conn *c = list_first(&s->rr, struct conn, rr_node);
    struct exec *e = list_first(&c->queue, struct exec, q_node);

    sched_unqueue(e);
    if (!list_empty(&c->queue)) {           /* to the back of the line */
        list_del(&c->rr_node);
        list_add_tail(&s->rr, &c->rr_node);
    }
    return e;
}

static void spawn(struct sup *s, unsigned n)
{
    while (n-- > 0 && s->procs < s->cfg.max_workers) {
        if (zygote_request(s) < 0)
            break;
        s->pending++;
        s->procs++;
    }
}

void sched_pump(struct sup *s)
{
    unsigned spare, have;

    for (;;) {
        /* hand idle workers to executions that wait for one */
        while (!list_empty(&s->starting) && !list_empty(&s->idle)) {
            struct exec *e = list_first(&s->starting, struct exec, q_node);
            struct wproc *w = list_first(&s->idle, struct wproc, pool_node);
            struct exec_evdata d = { .w = w };
            list_del(&w->pool_node);
            sup_count_down(&s->n_idle, "n_idle");
            exec_event(e, XE_WORKER, &d);
        }
        if (s->queued == 0 || !has_capacity(s))
            break;
        exec_event(rr_pop(s), XE_START, NULL);
    }
    /* ask the zygote for the workers that executions still wait for */
    if (s->n_starting > s->pending)
        spawn(s, s->n_starting - s->pending);
    /* workers nobody waits for any more (their execution was cancelled, or
     * pool_size shrank on reload) are not kept beyond the pool size */
    while (s->n_idle > (s->stopping ? 0 : s->cfg.pool_size) && list_empty(&s->starting)) {
        struct wproc *w = list_first(&s->idle, struct wproc, pool_node);
        list_del(&w->pool_node);
        sup_count_down(&s->n_idle, "n_idle");
        wproc_kill(w);
    }
    /* then keep the warm pool full */
    if (s->stopping)
        return;
    spare = s->pending > s->n_starting ? s->pending - s->n_starting : 0;
    have = s->n_idle + spare;
    if (have < s->cfg.pool_size)
        spawn(s, s->cfg.pool_size - have);
}

void sched_submit(struct exec *e)
{
    struct sup *s = e->sup;

    if (s->stopping) {          /* refused at once, never queued */
        exec_refuse(e, "cancelled", NULL, "the daemon is shutting down");
        return;
    }
    if (s->queued == 0 && has_capacity(s)) {
        exec_event(e, XE_START, NULL);
        sched_pump(s);
        return;
    }
    if (s->queued >= s->cfg.max_queue) {
        conn_send_error(e->conn, e->req_id, "busy", NULL,
                        "all %u workers are busy and %u executions are queued",
                        s->cfg.max_workers, s->queued);
        exec_drop(e);
        return;
    }
    rr_enqueue(e);
    sched_pump(s);
}

void sched_worker_arrived(struct sup *s, pid_t pid, int fd)
{
    struct wproc *w;
    unsigned i;

    if (s->pending > 0)
        s->pending--;
    if (fd < 0) {
        s->procs--;
        log_err("the zygote could not start a worker");
        sched_spawns_lost(s);
        return;
    }
    /* It may have died before its hand-over was read. */
    for (i = 0; i < sizeof s->reaped_unknown / sizeof s->reaped_unknown[0]; i++) {
        if (s->reaped_unknown[i] == pid) {
            s->reaped_unknown[i] = 0;
            close(fd);
            s->procs--;
            log_warn("worker %d died during set-up (status 0x%x)", (int)pid,
                     s->reaped_status[i]);
            sched_pump(s);
            return;
        }
    }
    if (!(w = wproc_new(s, pid, fd))) {
        kill(pid, SIGKILL);
        close(fd);
        /* procs stays counted until the reap finds no wproc for it */
        return;
    }
    list_add_tail(&s->idle, &w->pool_node);
    s->n_idle++;
    s->workers_started++;
    sched_pump(s);
}

/* Fail executions that wait for workers which will not come, when nothing
 * else can serve them. */
void sched_spawns_lost(struct sup *s)
{
    while (s->n_starting > s->pending + s->n_idle && !list_empty(&s->starting)) {
        struct exec *e = list_entry(s->starting.prev, struct exec, q_node);
        exec_abort(e, "no worker could be started");
    }
}

void sched_reap(struct sup *s)
{
    int status;
    pid_t pid;
    struct rusage ru;

    zygote_poll(s);     /* hand-overs first, so every reaped pid is known */
    while ((pid = wait4(-1, &status, WNOHANG, &ru)) > 0) {
        struct wproc *w;
        if (pid == s->zygote_pid) {
            zygote_died(s, status);
            continue;
        }
        if ((w = wproc_find(s, pid))) {
            uint64_t cpu = (uint64_t)ru.ru_utime.tv_sec * 1000000u + (uint64_t)ru.ru_utime.tv_usec +
                           (uint64_t)ru.ru_stime.tv_sec * 1000000u + (uint64_t)ru.ru_stime.tv_usec;
            wproc_exited(w, status, cpu);
            continue;
        }
        s->reaped_unknown[s->reaped_next] = pid;
        s->reaped_status[s->reaped_next] = status;
        s->reaped_next = (s->reaped_next + 1) % (sizeof s->reaped_unknown / sizeof(pid_t));
    }
    sched_pump(s);
}
