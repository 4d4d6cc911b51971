/* Runs in: supervisor */
/*
 * spawn.h - the supervisor's handle on the zygotes (worker/zygote.c), one
 * per shard.
 *
 * Called only in the supervisor.
 *
 * The supervisor exec's its own binary as `sandboxd --zygote FD PPID [...]`
 * at start-up, before any client I/O.  The zygote builds the sandbox Lua
 * state and the seccomp BPF program once, then answers each one-byte spawn
 * request on FD (SOCK_SEQPACKET) by forking a worker with CLONE_PARENT, so
 * the worker is the supervisor's child, and sending back one struct zyg_msg
 * (proto/chan.h) with the supervisor's end of the worker channel attached
 * (SCM_RIGHTS).  It never sees client bytes.
 *
 * Shards ([daemon] shards): with n > 1, there are n zygotes, the first on
 * each of the first n CPUs this process may run on (sched_getaffinity), each
 * pinned to its CPU before it is exec'd, so each of its workers starts and
 * stays there: a worker's wake-ups then stay on one CPU and its set-up does
 * not move between them.  The scheduler (sched.c) asks the shard that is
 * short of pooled workers and hands a job to the worker whose CPU has the
 * fewest busy workers.  With one shard nothing is pinned.
 *
 * Contract (supervisor side):
 *  - spawn_start() starts every zygote that is not running (-1 if one could
 *    not be started; the others run).  spawn_running() says whether all
 *    run.  spawn_request(z) asks zygote z for one worker without blocking,
 *    holding a descriptor until its hand-over is read, so that every
 *    hand-over asked for has a descriptor to land in; -1 with errno
 *    EMFILE, ENFILE or ENOMEM if none can be held (nothing is asked), and
 *    -1 with another errno if it does not run or the request cannot be
 *    queued now.
 *  - spawn_poll() reads every hand-over available now, from every zygote,
 *    and passes each to sched_worker_arrived() with its shard.
 *  - spawn_find() names the zygote of a pid (NULL if none);
 *    spawn_zygote_died() is called by the reaper: it takes the hand-overs
 *    that zygote already sent, forgets its unanswered requests, and counts a
 *    failure of the worker supply (sched_supply_failed): the first death in
 *    a row is restarted at once, later ones when the supply back-off ends
 *    (the supply timer, which sched_pump keeps armed while a zygote does not
 *    run), retrying forever.  The other shards go on serving.
 *  - A zygote that answers no spawn request for ZYGOTE_STALL_S (stopped or
 *    stuck) is killed, and so restarted.
 *  - spawn_stop() ends them all (closing the socket is enough; each is also
 *    killed).
 */
#ifndef SANDBOXD_SPAWN_H
#define SANDBOXD_SPAWN_H

#include <sys/types.h>

struct sup;
struct zygote;

#define ZYGOTE_STALL_S 5.0

/* Set up the shards (once, before spawn_start): n_shards from the config,
 * at most one per CPU this process may run on. */
void spawn_init(struct sup *s);
int  spawn_start(struct sup *s);
int  spawn_running(const struct sup *s);
int  spawn_request(struct zygote *z);
void spawn_poll(struct sup *s);
struct zygote *spawn_find(struct sup *s, pid_t pid);
void spawn_zygote_died(struct zygote *z, int status);
void spawn_stop(struct sup *s);

#endif
