/* Runs in: zygote, worker */
/*
 * luaenv.h - the sandbox Lua state: counting allocator, allowlisted
 * environment, sticky (uncatchable) limits.
 *
 * Lifetime.  luaenv_new() runs once in the zygote; every worker inherits the
 * state copy-on-write, calls luaenv_apply() with its job's limits, runs one
 * chunk and _exits (a session's worker runs its chunks one after another,
 * luaenv_apply() before each, with what earlier chunks left).  The state is never closed (finalizers would run with
 * hooks off) and no Lua runs after the chunk returns: results and bindings
 * are read raw from C.
 *
 * Environment (never luaL_openlibs).  base, string, table, math, coroutine,
 * utf8 via luaL_requiref; `os` reduced to time, clock, date, difftime;
 * no io, package, debug, require, dofile, loadfile, string.dump;
 * registry._LOADED holds only the exposed tables; the string metatable is
 * stock (getmetatable("") returns it; changes stay in this process).
 * Replaced functions:
 *   load            text only (mode forced to "t") for strings and readers;
 *                   env defaults to the sandbox globals; a reader may
 *                   deliver at most the string cap in total; lua_load runs
 *                   under the caller's message handler, as in stock Lua
 *                   (the chunk's own handler ignores it: luaenv_in_load)
 *   pcall, xpcall   rethrow while a fatal limit is set; xpcall skips the
 *                   user handler while fatal (a guard of Lua code in front of
 *                   it, so it runs at stock's C-stack depth)
 *   coroutine.resume, coroutine.wrap   rethrow while fatal
 *   setmetatable    refuses a metatable with a __gc field
 *   collectgarbage  "count" is real; every other option returns 0
 *   print           the global tostring of each argument (stock's checks and
 *                   messages), tab separated, newline, each piece written as
 *                   stock writes it; each line is sent as CHAN_OUTPUT frames
 *                   when complete, up to max_output_bytes, then dropped
 *                   (output_truncated)
 *   string.rep, table.concat   pre-check the result size against the string
 *                   cap and raise the catchable "resulting string too large";
 *                   large results are built with lua_concat (string.rep by
 *                   doubling, table.concat of up to 4096 items at once), not
 *                   in a buffer, so a result of the cap fits in the heap
 *                   (table.concat is charge.c's, given the cap and a
 *                   collection before it builds through struct charge)
 *   unpack          a copy of table.unpack (as in Legion): the same
 *                   function, another value, so error messages name each
 *                   one alone whatever the state's hash seed
 *
 * Limits.  All per-run state hangs off the allocator's ud (this struct), so
 * any C function finds it with lua_getallocf().
 *   heap      every byte the state holds is counted (`ptr ? osize : 0`, since
 *             osize is a type tag for new objects); growth past max_heap is
 *             refused; shrinks never fail.
 *   string    a single new string (LUA_TSTRING allocation) longer than
 *             string_cap = min(max_heap/2, 256 MiB) bytes is refused, exactly
 *             (the block is string_header + length + 1, the header measured
 *             at start-up); at the next protected boundary the "not enough
 *             memory" error becomes the catchable "resulting string too large".
 *   reductions  a count hook (period 1000, charged per period), installed
 *             only when a budget (or a CPU budget) is set; a new coroutine
 *             starts on a short period paid up front, doubling up to 1000,
 *             each paid as it begins (luaenv.c), and keeps its countdown
 *             across resumes: a coroutine is billed the instructions it
 *             runs (never fewer, at most twice plus 4).
 *   GC        with a heap cap the collector never idles (pause 100), and
 *             string.rep / table.concat run a full collection first when
 *             their result would not fit: luaL_Buffer growth gets no
 *             emergency collection, and its refusal is fatal.  Full
 *             collections are paid by allocation (a credit, luaenv.c): one
 *             the heap needs that allocation has not paid for sets the
 *             memory limit; one behind a caught string refusal is billed to
 *             the budget for its unpaid part, one reduction per 4 bytes of
 *             heap; one that ends the chunk is never billed.  Every such
 *             collection checks the CPU budget; a caught error more than
 *             1024 levels deep is billed by its depth.
 *   charges   new strings cost their bytes, library functions their work
 *             (charge.h, installed by charge_open), while the chunk runs
 *             (luaenv_start .. luaenv_finish), outside host code.
 * A refusal by the heap cap that is final (the core's retry after its
 * emergency collection is refused too: set in the allocator, because
 * lua_checkstack swallows the error and its callers raise ordinary ones), the
 * runtime error "not enough memory for buffer allocation" while the last
 * refusal was a heap refusal, an exhausted instruction budget or CPU budget
 * sets `fatal`.  From then on
 * every protected boundary rethrows and the hook is re-armed with count 1,
 * so no pcall, xpcall, coroutine or load reader can swallow the limit.  The
 * top level classifies by luaenv_fatal(), never by message text.
 */
#ifndef SANDBOXD_LUAENV_H
#define SANDBOXD_LUAENV_H

#include <lua.h>
#include <stddef.h>
#include <stdint.h>

#include "worker/charge.h"

#define LUAENV_STRING_CAP_MAX ((size_t)256 << 20)  /* 256 MiB */
#define LUAENV_EXIT_PANIC     122   /* _exit status after an unprotected error */

enum luaenv_fatal {
    LUAENV_FATAL_NONE = 0,
    LUAENV_FATAL_MEMORY,
    LUAENV_FATAL_REDUCTIONS,
    LUAENV_FATAL_CPU,
};

/* What luaenv_catch() made of a caught error. */
enum luaenv_caught {
    LUAENV_CAUGHT_PLAIN = 0,    /* an ordinary error: the script may handle it */
    LUAENV_CAUGHT_STRING,       /* the string cap: value is now "resulting string too large" */
    LUAENV_CAUGHT_FATAL,        /* a sticky limit is set: rethrow / end the run */
};

struct luaenv_limits {
    size_t   max_heap;          /* bytes; 0 = unlimited */
    uint64_t max_reductions;    /* VM instructions; 0 = no budget */
    uint64_t cpu_us;            /* process CPU time; 0 = not checked by the hook */
    size_t   max_output_bytes;  /* print output forwarded before truncation */
    int      output_fd;         /* channel for CHAN_OUTPUT; -1 = discard */
};

struct luaenv_stats {
    uint64_t reductions;        /* instructions counted by the hook (0: no hook) */
    uint64_t refused;           /* a charge that ended the chunk unpaid (0: none) */
    uint64_t max_reductions;    /* the budget (0: none) */
    size_t   heap_bytes;        /* current */
    size_t   heap_peak_bytes;   /* since the last luaenv_apply() */
    int      output_truncated;
};

#define LUAENV_OUTBUF 4096      /* print's output buffer (luaenv_output) */

struct luaenv {                 /* read by luaenv*.c only; others use the functions */
    lua_State *L;
    /* allocator */
    size_t   used, peak;
    size_t   max_heap;          /* 0 = unlimited */
    size_t   string_cap;        /* longest string allowed, in bytes */
    size_t   string_header;     /* a string's allocation is header + length + 1 */
    int      probing;           /* luaenv_new(): measuring string_header */
    int      last_refusal;      /* LUAENV_REFUSED_*, cleared by luaenv_catch() */
    /* the last refused request, until the next growth (env_alloc) */
    int      retry_armed;
    const void *retry_ptr;
    size_t   retry_osize, retry_nsize, retry_used;
    /* collections (luaenv.c): credit earned by allocating, and the
     * emergency collections behind string refusals not yet settled */
    size_t   gc_credit, gc_credit_max, gc_caught;
    /* charges (charge.h): only while the chunk runs (luaenv_start), and
     * not for what host code makes for it (luaenv_host_begin) */
    int      charging, host;
    int      loading;           /* load calls running (luaenv_loading) */
    struct charge charge;       /* the library's charges, paid by luaenv_charge */
    /* sticky limits */
    int      fatal;             /* enum luaenv_fatal */
    uint64_t max_reductions, reductions, cpu_us;
    uint64_t refused;           /* luaenv_charge: a charge larger than what is left */
    int      hook_period;       /* 0 = no hook installed */
    unsigned hook_ticks;
    /* print */
    int      output_fd;
    size_t   output_max, output_sent;   /* output_sent: sent and buffered */
    int      output_truncated;
    size_t   outbuf_len;
    char     outbuf[LUAENV_OUTBUF];
};

enum { LUAENV_REFUSED_NONE = 0, LUAENV_REFUSED_HEAP, LUAENV_REFUSED_STRING,
       LUAENV_REFUSED_BUDGET };

/* A new state with the sandbox environment and no limits.  NULL on failure.
 * The caller owns it; it is never closed in a worker. */
struct luaenv *luaenv_new(void);

/* Close and free: only where no job code ever ran in the state (the
 * zygote, tests); a worker _exits instead. */
void luaenv_free(struct luaenv *e);

lua_State *luaenv_state(struct luaenv *e);

/* The env of any thread of the state (the allocator's ud). */
struct luaenv *luaenv_from(lua_State *L);

/* Set the job's limits, reset counters and the peak, install the count hook
 * on the main thread when a budget is set.  Call before any job code (tool
 * tables, bindings, the chunk) so all of it is counted. */
void luaenv_apply(struct luaenv *e, const struct luaenv_limits *lim);

/* Right before the chunk runs (after its compilation): from here until
 * luaenv_finish() the chunk's work is charged to the budget (charge.h). */
void luaenv_start(struct luaenv *e);

/* Host code that makes values for the chunk (a tool's answer, a string the
 * sandbox builds its own way and charges as its result) is not charged:
 * begin returns the state to give back to end.  An error caught at a
 * protected boundary ends host code (luaenv_catch resets it). */
int luaenv_host_begin(lua_State *L);
void luaenv_host_end(lua_State *L, int was);

/* Charge units to the budget while the chunk runs (outside host code);
 * raises the reductions limit when that spends it. */
void luaenv_charge(lua_State *L, uint64_t units);

/* The same for work not yet done, paid before it runs: a charge larger than
 * what is left of the budget raises the limit without being counted
 * (stats.reductions stays what was paid; the work never runs), and is kept
 * as `refused`, which the verdict names. */
void luaenv_charge_ahead(lua_State *L, uint64_t units);

/* After the chunk has returned and before results are converted in C: send
 * the buffered output, lift the heap cap, stop charges and remove the hook.
 * No Lua may run after this. */
void luaenv_finish(struct luaenv *e);

enum luaenv_fatal luaenv_fatal(const struct luaenv *e);
void luaenv_stats(const struct luaenv *e, struct luaenv_stats *out);
size_t luaenv_string_cap(const struct luaenv *e);

/* The protected boundary.  A protected call (lua_pcall, lua_resume,
 * lua_load) returned status with the error value on top of L.  Promotes
 * memory errors to the fatal flag (or to the string error), clears the
 * refusal record and says what the error is.  Never raises; may replace the
 * value on top with a preallocated string. */
enum luaenv_caught luaenv_catch(lua_State *L, int status);

/* The same for the error that ends the chunk (or the job): classifies it
 * and replaces a string refusal's value as luaenv_catch() does, but settles
 * nothing and runs no collection, since nothing of the chunk runs after it:
 * a chunk that ends with "resulting string too large" ends with that error. */
enum luaenv_caught luaenv_catch_end(lua_State *L, int status);

/* Raise again while fatal: re-arm the hook with count 1 on L and lua_error
 * with the value on top.  Does not return. */
int luaenv_rethrow(lua_State *L);
/* A coroutine was just made (coroutine.create, wrap, a parallel branch):
 * give it the count hook with its first, short period, paid now (raises
 * when that spends the budget).  L is the running thread.  See luaenv.c. */
void luaenv_arm_new(lua_State *L, lua_State *co);
/* Before resuming thread co from L: give it the count hook of the current
 * limits if it has another (a coroutine may come from an earlier session
 * chunk), as a new coroutine; a coroutine that has it keeps its countdown.
 * May raise as luaenv_arm_new(). */
void luaenv_arm(lua_State *L, lua_State *co);

/* Bill the core's unwinding of a caught error at a deep stack (see
 * luaenv.c); call where an error was caught, before luaenv_catch(), which
 * then finds the fatal flag if that spent the budget.  Never raises. */
void luaenv_charge_unwind(lua_State *L);

/* A full collection (lua_gc LUA_GCCOLLECT) billed to the budget like the
 * core's emergency collections (see luaenv.c); raises when that spends it. */
void luaenv_collect(lua_State *L);

/* Raise the limit (re-arming the hook) if a fatal limit is set: for C code
 * that saw a refusal it does not raise for (lua_checkstack failing). */
void luaenv_check(lua_State *L);

/* The same test luaenv_catch() applies, without clearing anything, for
 * message handlers that run before the stack unwinds: would the error value
 * at idx be fatal?  Sets the fatal flag when it is. */
int luaenv_is_fatal_error(lua_State *L, int idx);

/* load (luaenv_lib.c) runs lua_load under the caller's message handler,
 * as stock Lua does: delta 1 before, -1 after.  luaenv_in_load() is true
 * while one runs: an error a message handler sees then is load's to catch
 * (on the thread that runs the chunk's top-level handler, no other
 * protected call can be between them), not one that ends the chunk. */
void luaenv_loading(lua_State *L, int delta);
int luaenv_in_load(lua_State *L);

/* Output of print: s[0..len) into the output buffer, within the cap
 * (max_output_bytes counts what is sent and what is buffered; the rest is
 * dropped and output_truncated set).  A full buffer is sent at once. */
void luaenv_output(struct luaenv *e, const char *s, size_t len);
/* Send the buffered output as CHAN_OUTPUT frames.  print calls it after its
 * newline, calls.c before a tool call (so the client sees output and calls
 * in the chunk's order), luaenv_finish() at the chunk's end (a print that
 * failed midway leaves its first arguments buffered, as stock leaves them
 * in stdout). */
void luaenv_output_flush(struct luaenv *e);

/* Internal to luaenv*.c: install the replacement functions (luaenv_lib.c)
 * into the globals at the top of the stack. */
int luaenv_openlib(lua_State *L);

#endif
