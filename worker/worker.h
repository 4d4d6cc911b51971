/* Runs in: zygote, worker */
/*
 * worker.h - the worker runtime: one job in one process (or one session's
 * jobs, one after another in the same Lua state), then _exit.
 *
 * Runs in a process forked by the zygote (worker/zygote.c) after
 * policy/contain.c has confined it (own process group, fds closed, rlimits,
 * no_new_privs, seccomp).  From here on the only syscalls available are the
 * ones in policy/seccomp.c: read/write on WORKER_CHAN_FD, a zero-timeout
 * poll of it (worker/look.h), memory management, clocks, lowering its own
 * RLIMIT_AS and RLIMIT_CPU, lowering its own priority, the kernel's
 * restart of an interrupted call (restart_syscall), exit; policy/seccomp.c
 * lists each with its arguments and its reason.
 *
 * worker_run() reads one CHAN_JOB frame ("execute" or "check"), runs it in
 * the Lua state the zygote prepared, relays tool calls and print output over
 * the channel, sends exactly one CHAN_RESULT or CHAN_ERROR frame and calls
 * _exit(WORKER_EXIT_OK).  A "session" job opens a session: after its end
 * frame the worker reads "chunk" and "snapshot" jobs and runs them in the
 * same state, one end frame each, until the supervisor kills it; any end
 * but a result, a syntax or runtime error, or a snapshot over
 * max_bindings_bytes (a limit, an internal error: the state may not be
 * whole) ends the loop with _exit(WORKER_EXIT_OK).  A missing or malformed
 * job, or an end frame that cannot be built or sent, ends the process with
 * WORKER_EXIT_PROTO (proto/chan.h), and a Lua panic with WORKER_EXIT_PANIC.
 * Tool calls and parallel(): worker/calls.h.  It never returns and never
 * calls lua_close (finalizers would run with hooks off).  Payload schemas:
 * docs/architecture.md, section "Channel".
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
