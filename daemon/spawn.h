/* Runs in: supervisor */
/*
 * spawn.h - the supervisor's handle on the zygote (worker/zygote.c).
 *
 * Called only in the supervisor.
 *
 * The supervisor exec's its own binary as `sandboxd --zygote FD PPID [...]`
 * at start-up, before any client I/O.  The zygote builds the sandbox Lua
 * state and the seccomp BPF program once, then answers each one-byte spawn
 * request on FD (SOCK_SEQPACKET) by forking a worker with CLONE_PARENT, so
 * the worker is the supervisor's child, and sending back one message
 * {int32 pid, int32 err} with the supervisor's end of the worker channel
 * attached (SCM_RIGHTS).  It never sees client bytes.
 *
 * Contract (supervisor side):
 *  - spawn_start() starts it; spawn_request() asks for one worker without
 *    blocking (-1 if the request cannot be queued now).
 *  - spawn_poll() reads every hand-over available now and passes each to
 *    sched_worker_arrived().
 *  - spawn_zygote_died() is called by the reaper; it takes the hand-overs
 *    already sent, forgets unanswered requests, and counts a failure of the
 *    worker supply (sched_supply_failed): the first death in a row is restarted at
 *    once, later ones when the supply back-off ends (the supply timer,
 *    which sched_pump keeps armed while no zygote runs), retrying forever.
 *  - A zygote that answers no spawn request for ZYGOTE_STALL_S (stopped or
 *    stuck) is killed, and so restarted.
 *  - spawn_stop() ends it (closing the socket is enough; it is also killed).
 */
#ifndef SANDBOXD_SPAWN_H
#define SANDBOXD_SPAWN_H

struct sup;

#define ZYGOTE_STALL_S 5.0

int  spawn_start(struct sup *s);
int  spawn_request(struct sup *s);
void spawn_poll(struct sup *s);
void spawn_zygote_died(struct sup *s, int status);
void spawn_stop(struct sup *s);

#endif
