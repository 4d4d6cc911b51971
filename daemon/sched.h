/* Runs in: supervisor */
/*
 * sched.h - admission, fair queueing across connections, and the warm pool.
 *
 * Contract:
 *  - sched_submit() admits a new execution or queues it; when max_queue
 *    executions already wait, it answers `busy` and frees it, and so it
 *    does with `cancelled` while the daemon stops, and with internal_error
 *    (exec_no_worker) while workers cannot be started and no pooled or
 *    pending worker is there for it (see sched_supply_failed).
 *  - Queued executions are served round-robin across connections, so one
 *    client with a thousand queued requests cannot starve another.
 *  - Capacity is exact: max_workers executions hold a slot (from XE_START
 *    until answered; a worker killed after its answer and not reaped yet
 *    holds none) and max_queue more wait; the next one is busy.
 *  - Live worker processes plus unanswered spawn requests never exceed
 *    max_workers; the warm pool is refilled up to pool_size after each
 *    change, never ahead of executions that wait for a worker, and when a
 *    back-off ends, without waiting for demand.
 *  - sched_pump() is idempotent: call it after anything that frees or
 *    delivers a worker.
 *  - A pooled worker is handed a job only if it is alive and not stopped
 *    (checked at the hand-over, and every POOL_CHECK_INTERVAL for the whole
 *    pool); one that is not is killed and replaced.  One that passes the
 *    check and still does not take its job (stopped just after it, frozen,
 *    traced) or dies first is found by the hand-over's looks (exec.h): the
 *    execution comes back to STARTING, first in line, and sched_pump()
 *    hands it on.
 */
#ifndef SANDBOXD_SCHED_H
#define SANDBOXD_SCHED_H

#include <sys/types.h>

struct sup;
struct exec;

void sched_submit(struct exec *e);
void sched_unqueue(struct exec *e);
void sched_pump(struct sup *s);
/* Set up the scheduler's timers (once, before the loop runs). */
void sched_init(struct sup *s);
/* The zygote of shard handed over a worker (fd >= 0), or failed to make one
 * (fd < 0; err the errno it reported, 0 if none). */
void sched_worker_arrived(struct sup *s, unsigned shard, pid_t pid, int fd, int err);
/* SIGCHLD: reap every exited child without blocking. */
void sched_reap(struct sup *s);
/* A worker could not be had (the zygote died or could not start, a spawn
 * failed, a worker died in set-up): log why, and hold spawn requests (and
 * the zygote's restart) for a back-off that doubles with each failure in a
 * row (0, then 50 ms ... SUPPLY_BACKOFF_MAX); it keeps retrying.  From
 * SUPPLY_FAIL_LIMIT failures in a row, executions waiting for a worker that
 * none pooled or pending can serve, and new ones until the next attempt,
 * are answered internal_error (exec_no_worker), unless a pooled or pending
 * worker is there for them.  A worker ends the streak (sched_supply_ok)
 * when it sends the end frame of its job or is found alive in the pool
 * SUPPLY_PROVEN_S after its hand-over, unless it was handed over before
 * the zygote last died or failed to start (it says nothing about the next
 * zygote).  One that dies on its own before a job (pooled, or in its
 * set-up) is a failure.  While a streak lasts, one such
 * worker is asked for even when no execution or pool place wants it (a
 * probe), so an idle daemon finds out that workers start again.
 * Whatever happens to the streak, a zygote that is not running is started
 * when the back-off ends: its start is never dropped. */
void sched_supply_failed(struct sup *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Worker w did its job (sent its end frame), or lived through its set-up
 * in the pool: unless it is older than the zygote's last failure, the
 * supply works again, and what the back-off held (a zygote's start, the
 * pool's refill) is done now. */
struct wproc;
void sched_supply_ok(struct sup *s, const struct wproc *w);

/* Health: whether workers can be started now (fewer than
 * SUPPLY_FAIL_LIMIT failures in a row), and since when they cannot (the
 * time, ev_now, of the first failure of the streak; 0 while they can). */
int    sched_supply_up(const struct sup *s);
double sched_supply_down_since(const struct sup *s);

/* How long a worker waiting for a tool answer may look at its channel
 * before it sleeps, in microseconds: the configured tool_spin_us while the
 * busy workers are fewer than the CPUs, else 0.  Looking pays only while a
 * CPU would otherwise idle; when every CPU has work, it takes time from
 * another execution (the job's limits and each TOOL_RESULT carry it). */
unsigned sched_spin_hint(const struct sup *s);

#define SUPPLY_FAIL_LIMIT   3
#define SUPPLY_BACKOFF_MIN  0.05    /* s */
#define SUPPLY_BACKOFF_MAX  5.0     /* s */
#define POOL_CHECK_INTERVAL 1.0     /* s: a stopped pooled worker is found within this */
#define SUPPLY_PROVEN_S     0.5     /* s: a fresh pooled worker alive this long ends a streak */

#endif
