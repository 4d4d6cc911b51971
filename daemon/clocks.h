/* Runs in: supervisor */
/*
 * clocks.h - an execution's timers, each of which feeds one event into
 * exec_event(): the deadline (XE_TIMEOUT: timeout_ms, first for the wait
 * for a worker, then afresh for the job), the CPU budget (XE_CPU: cpu_ms
 * on the worker's CPU clock, never the worker's own figure), a session's
 * idle timeout (XE_IDLE), and the hand-over's looks (XE_STUCK, exec.h:
 * after HANDOVER_LOOK s, then every HANDOVER_GAP s, until the worker has
 * taken its job, which is then
 * no longer kept, exec_job_taken).  Between a session's chunks the CPU
 * timer checks instead that the idle worker uses no CPU (more than 0.5 s
 * since the chunk ended is a protocol violation: wproc_violation).
 *
 * Contract: the timers are the exec's own members (exec.h); these
 * functions only arm and stop them, and clocks_idle() records the CPU
 * time the idle check counts from (e->cpu_base_us).  A limit of LIMIT_INF
 * arms nothing.  Arming a timer that runs restarts it from now.
 *  - clocks_init(): once, in exec_new (the stream timer too: answer.h).
 *  - clocks_wait(): QUEUED -> STARTING, the deadline for the wait.
 *  - clocks_start(): a job was just sent (an execution's, a session's chunk
 *    or snapshot): the deadline from now and the CPU budget.
 *  - clocks_handover(): a job was just handed to a worker: its looks.
 *  - clocks_idle(): a session went IDLE: its idle timeout and idle check.
 *  - clocks_stop(): every timer of e stopped, the stream timer too.
 */
#ifndef SANDBOXD_CLOCKS_H
#define SANDBOXD_CLOCKS_H

#include "daemon/exec.h"

void clocks_init(struct exec *e);
void clocks_wait(struct exec *e);
void clocks_start(struct exec *e);
void clocks_handover(struct exec *e);
void clocks_idle(struct exec *e);
void clocks_stop(struct exec *e);

#endif
