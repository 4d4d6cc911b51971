/*
 * sched.h - admission, fair queueing across connections, and the warm pool.
 *
 * Contract:
 *  - sched_submit() admits a new execution or queues it; when max_queue
 *    executions already wait, it answers `busy` and frees it.
 *  - Queued executions are served round-robin across connections, so one
 *    client with a thousand queued requests cannot starve another.
 *  - Live worker processes plus unanswered spawn requests never exceed
 *    max_workers; the warm pool is refilled up to pool_size after each
 *    change, never ahead of executions that wait for a worker.
 *  - sched_pump() is idempotent: call it after anything that frees or
 *    delivers a worker.
 */
#ifndef SANDBOXD_SCHED_H
#define SANDBOXD_SCHED_H

#include <sys/types.h>

struct sup;
struct exec;

void sched_submit(struct exec *e);
void sched_unqueue(struct exec *e);
void sched_pump(struct sup *s);
/* The zygote handed over a worker (fd >= 0), or failed to make one (fd < 0). */
void sched_worker_arrived(struct sup *s, pid_t pid, int fd);
/* SIGCHLD: reap every exited child without blocking. */
void sched_reap(struct sup *s);
/* Spawn requests that will never be answered (the zygote died). */
void sched_spawns_lost(struct sup *s);

#endif
