/*
 * clocks.c - an execution's timers: the deadline, the CPU budget, a
 * session's idle timeout and its idle CPU check.  See clocks.h.
 */
#include "daemon/clocks.h"

#include "common/log.h"
#include "daemon/answer.h"
#include "daemon/sched.h"
#include "daemon/sup.h"
#include "daemon/wproc.h"
#include "proto/mutant.h"

static void deadline_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct exec *e = t->data;
    (void)loop; (void)revents;
    exec_event(e, XE_TIMEOUT, NULL);
}

/* Between chunks a session's worker waits in read(2) for its next job and
 * uses no CPU; one that does is no longer running the worker's code.  The
 * idle clock is checked every IDLE_CPU_CHECK s; past IDLE_CPU_MAX_US since
 * the chunk ended (its teardown, a free of a large end frame, fits many
 * times over) the worker is killed as a protocol violation.  Without this,
 * nothing would bound its CPU until idle_timeout_ms: cpu_ms is per chunk,
 * and the soft RLIMIT_CPU of a session is raised by the worker itself. */
#define IDLE_CPU_CHECK  1.0
#define IDLE_CPU_MAX_US 500000u

static void idle_cpu_arm(struct exec *e)
{
    if (MUTANT(IDLE_CPU))
        return;                         /* mutant: an idle worker's CPU is free */
    e->cpu_base_us = wproc_cpu_us(e->w, e->cpu_us_seen);
    ev_timer_set(&e->cpu_timer, IDLE_CPU_CHECK, IDLE_CPU_CHECK);
    ev_timer_start(e->sup->loop, &e->cpu_timer);
}

/* The CPU budget is checked against the worker's CPU clock.  CPU time never
 * runs ahead of wall time, so the timer first fires after cpu_ms of wall
 * time and re-arms for whatever budget is left.  In IDLE the same timer is
 * the idle CPU check. */
static void cpu_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct exec *e = t->data;
    uint64_t used_ms = answer_cpu_us(e) / 1000;
    (void)revents;

    if (e->state == ST_IDLE) {
        if (answer_cpu_us(e) > IDLE_CPU_MAX_US && e->w)
            wproc_violation(e->w, "CPU time used between chunks");
        return;
    }
    if (used_ms >= e->lim.cpu_ms) {
        exec_event(e, XE_CPU, NULL);
        return;
    }
    ev_timer_set(t, (double)(e->lim.cpu_ms - used_ms) / 1e3 + 0.001, 0.);
    ev_timer_start(loop, t);
}

/* Has the worker taken its job?  Looked at again while it shows life; a
 * stuck one loses the job, which the scheduler hands on at once. */
static void handover_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct exec *e = t->data;
    struct sup *s = e->sup;
    (void)revents;

    if (!e->w)
        return;
    switch (wproc_job_look(e->w)) {
    case WT_TAKEN:
        exec_job_taken(e);
        return;
    case WT_MOVING:
        log_debug("exec seq=%llu: worker %d has not taken its job after %.1f ms; looking again",
                  (unsigned long long)e->seq, (int)e->w->pid, (ev_now(loop) - e->t_start) * 1e3);
        ev_timer_set(t, HANDOVER_GAP, 0.);
        ev_timer_start(loop, t);
        return;
    case WT_STILL:
        exec_event(e, XE_STUCK, NULL);
        sched_pump(s);
        return;
    }
}

static void idle_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop; (void)revents;
    exec_event(t->data, XE_IDLE, NULL);
}

/* Start t to fire once, ms milliseconds from now (again from now if it
 * runs), unless ms is infinite. */
static void arm_once(struct exec *e, ev_timer *t, uint64_t ms)
{
    if (ms == LIMIT_INF)
        return;
    ev_timer_stop(e->sup->loop, t);
    ev_timer_set(t, (double)ms / 1e3, 0.);
    ev_timer_start(e->sup->loop, t);
}

/* A job was just sent (an execution's, or a session's chunk or snapshot):
 * it gets the whole of timeout_ms from now, whatever the wait for a worker
 * took (XE_START), and its CPU budget. */
void clocks_start(struct exec *e)
{
    arm_once(e, &e->deadline, e->lim.timeout_ms);
    arm_once(e, &e->cpu_timer, e->lim.cpu_ms);
}

void clocks_init(struct exec *e)
{
    ev_timer_init(&e->deadline, deadline_cb, 0., 0.);
    e->deadline.data = e;
    ev_timer_init(&e->cpu_timer, cpu_cb, 0., 0.);
    e->cpu_timer.data = e;
    ev_timer_init(&e->stream_timer, answer_stream_cb, 0., 0.);
    e->stream_timer.data = e;
    ev_timer_init(&e->idle_timer, idle_cb, 0., 0.);
    e->idle_timer.data = e;
    ev_timer_init(&e->handover, handover_cb, 0., 0.);
    e->handover.data = e;
}

void clocks_wait(struct exec *e)
{
    arm_once(e, &e->deadline, e->lim.timeout_ms);
}

void clocks_handover(struct exec *e)
{
    ev_timer_set(&e->handover, HANDOVER_LOOK, 0.);
    ev_timer_start(e->sup->loop, &e->handover);
}

void clocks_idle(struct exec *e)
{
    ev_timer_set(&e->idle_timer, e->idle_timeout, 0.);
    ev_timer_start(e->sup->loop, &e->idle_timer);
    idle_cpu_arm(e);
}

void clocks_stop(struct exec *e)
{
    ev_timer_stop(e->sup->loop, &e->idle_timer);
    ev_timer_stop(e->sup->loop, &e->deadline);
    ev_timer_stop(e->sup->loop, &e->cpu_timer);
    ev_timer_stop(e->sup->loop, &e->stream_timer);
    ev_timer_stop(e->sup->loop, &e->handover);
}
