/* Runs in: worker */
/*
 * calls.h - tool calls from the worker's Lua state, and parallel().
 *
 * Runs in the untrusted worker only (after containment; see worker.h).
 *
 * Calls are numbered 1, 2, ... in the order their CHAN_TOOL_CALL frames are
 * sent; the supervisor numbers the frames it receives the same way and names
 * the call in each CHAN_TOOL_RESULT ({"call": k, "ok": ..}).  At most
 * max_parallel calls are outstanding (sent, not answered); answers may come
 * in any order, and one that arrives while another call is awaited is kept
 * (outside the Lua heap) until its caller takes it.
 *
 * A tool function called from a branch of parallel() (a coroutine that
 * parallel() resumes) sends its call and yields to parallel()'s scheduler,
 * so the other branches run and send theirs; anywhere else (and where the
 * branch cannot yield, e.g. under a C function without a continuation) it
 * blocks until its own answer is there.  Every branch is armed like a
 * coroutine.create'd one (luaenv_arm_new: billed the instructions it runs,
 * its first period paid when it is made); a fatal limit inside a branch is
 * rethrown by parallel(), so no limit is lifted inside it.
 *
 * A broken channel, or an answer for a call that is not outstanding, ends
 * the process with WORKER_EXIT_PROTO (the supervisor reports it).
 */
#ifndef SANDBOXD_CALLS_H
#define SANDBOXD_CALLS_H

#include <jansson.h>
#include <lua.h>
#include <stddef.h>
#include <stdint.h>

#include "worker/look.h"

struct calls_answer;

struct calls {
    int       fd;               /* the channel */
    size_t    max_result;       /* bound on one call's encoded arguments; 0 = none */
    unsigned  max_parallel;     /* >= 1 */
    unsigned  next_call;        /* number of the last call sent */
    unsigned  outstanding;      /* sent, not yet answered */
    unsigned *pend;             /* their numbers (max_parallel entries), owned */
    struct calls_answer *kept;  /* answered, not yet taken (list), owned */
    struct look look;           /* at the channel before sleeping (look.h) */
};

/* In the zygote: register the metatables this module uses in L. */
void calls_prepare(lua_State *L);

/* Set up c for a job; max_parallel 0 counts as 1.  A worker waiting for an
 * answer looks at the channel for up to spin_us microseconds of its own CPU
 * before it sleeps (0: sleeps at once).  Exits the process when out of
 * memory (nothing can be reported yet). */
void calls_init(struct calls *c, int fd, size_t max_result, unsigned max_parallel,
                unsigned spin_us);

/* A later job of the same worker (a session's chunk): its spin_us bounds
 * the look from now on, as each answer's does (the work on the other CPUs
 * may have changed since the last answer). */
void calls_set_spin(struct calls *c, unsigned spin_us);

/* Push a tool function: pops the tool name, function name and arities
 * (a sequence of integers, or nil for any count) from the stack. */
void calls_push_tool(lua_State *L, struct calls *c);

/* Push the parallel(f1, f2, ...) function. */
void calls_push_parallel(lua_State *L, struct calls *c);

#endif
