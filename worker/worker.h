/* Runs in: zygote, worker */
/*
 * worker.h - the worker runtime: one job in one process, then _exit.
 *
 * Runs in a process forked by the zygote (worker/zygote.c) after
 * policy/contain.c has confined it (own process group, fds closed, rlimits,
 * no_new_privs, seccomp).  From here on the only syscalls available are the
 * ones in policy/seccomp.c: read/write on WORKER_CHAN_FD, memory management,
 * clocks, exit.
 *
 * worker_run() reads exactly one CHAN_JOB frame, runs it in the Lua state the
 * zygote prepared, relays tool calls and print output over the channel, sends
 * exactly one CHAN_RESULT or CHAN_ERROR frame and calls _exit(0).  A "session"
 * job is the exception: after its end frame the worker reads "chunk" and
 * "snapshot" jobs and runs them in the same state, one end frame each, until
 * it is killed; a chunk that ends with a limit ends that loop (_exit(0)).
 * Tool calls and parallel(): worker/calls.h.  It never
 * returns and never calls lua_close (finalizers would run with hooks off).
 * Payload schemas: docs/architecture.md, section "Channel".
 */
#ifndef SANDBOXD_WORKER_H
#define SANDBOXD_WORKER_H

#include <lua.h>

struct luaenv;

/* Called once in the zygote, before any fork: a Lua state with the sandbox
 * environment (allowlisted libraries, wrappers) and an unlimited counting
 * allocator.  NULL on failure.  Workers inherit it copy-on-write. */
struct luaenv *worker_env_new(void);

/* In the worker, after containment.  Never returns. */
void worker_run(struct luaenv *env, int fd) __attribute__((noreturn));

#endif
