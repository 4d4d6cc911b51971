/*
 * luaenv.c - the sandbox state: allocator, environment assembly, sticky
 * limits and the protected-boundary classification.  Contract: luaenv.h.
 * The replacement library functions are in luaenv_lib.c.
 *
 * The MUTANT(...) branches are the mutation check's (proto/mutant.h): each
 * switches one hardening piece off in a test build, and is constant false
 * in every other.
 */
#include "worker/luaenv.h"

#include <lauxlib.h>
#include <limits.h>
#include <lualib.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "proto/chan.h"
#include "proto/mutant.h"

/* Messages pushed while the heap may be full.  They are short strings
 * (interned) anchored in the registry at start-up, so pushing them again
 * finds the existing object and allocates nothing. */
#define MSG_STRING     "resulting string too large"
#define MSG_MEMORY     "memory limit exceeded"
#define MSG_REDUCTIONS "reductions limit exceeded"
#define MSG_CPU        "cpu limit exceeded"
#define MSG_BUFFER     "not enough memory for buffer allocation"  /* lauxlib's text */

#define PROBE_LEN      100    /* luaenv_new(): a string this long measures the header */

#define HOOK_PERIOD    1000   /* instructions between hook calls */
#define CPU_EVERY      16     /* hook calls between CPU-time checks */
#define GC_PAUSE_CAPPED 100   /* with a heap cap: start a cycle right after the last */

/* A full collection costs about as much CPU as one VM instruction per 6 to
 * 13 bytes of a heap of small objects (tables, closures, short strings,
 * coroutines), per hundreds of bytes of long strings (bench/gc_bill.lua).
 * Where a collection is billed, it is billed below the dearest rate
 * measured, so that no kind of heap makes collections cheaper than the
 * instructions that force them. */
#define GC_BYTES_PER_REDUCTION CHARGE_GC_BYTES

/* Collection credit.  Lua's own pace collects about the heap once per
 * heap's worth of allocation; every byte a chunk allocates pays for
 * GC_CREDIT_PER_BYTE bytes of full collection, up to GC_CREDIT_HEAPS heap
 * caps in store (and a chunk starts with that store, which also covers a
 * session's heap inherited from earlier chunks).  A collection the credit
 * pays for is free.  One it does not pay for is work the chunk buys again
 * and again without making progress:
 *   - a collection the heap needs to go on (the core's emergency collection
 *     whose retry then fits, or string.rep / table.concat making room): the
 *     live heap is so close to the cap that each full collection makes room
 *     for less than a GC_CREDIT_PER_BYTE-th of itself.  The heap cap is what
 *     is reached: memory_limit (a live heap up to 3/4 of the cap never gets
 *     here: each collection then frees room for at least a quarter of it);
 *   - a collection behind a refusal the chunk catches and goes on from (the
 *     string cap): the unpaid part is billed to the budget, one reduction
 *     per GC_BYTES_PER_REDUCTION bytes, so a loop of caught refusals ends
 *     with reductions_limit.
 * A collection that ends the chunk (a refusal that is final) is never
 * billed. */
#define GC_CREDIT_PER_BYTE CHARGE_GC_CREDIT
#define GC_CREDIT_HEAPS    CHARGE_GC_CREDIT_HEAPS

enum { GC_NEEDED, GC_CAUGHT };

static uint64_t cpu_now_us(void);

static void set_fatal(struct luaenv *e, int kind)
{
    if (e->fatal == LUAENV_FATAL_NONE)
        e->fatal = kind;
}

/* Add units to the budget's count; the fatal flag when that spends it.
 * No effect without a budget or once a limit is set.  The count saturates
 * at INT64_MAX, so it stays a JSON integer (a library charge larger than
 * what is left of a budget never gets here: luaenv_charge refuses it). */
#define REDUCTIONS_MAX ((uint64_t)INT64_MAX)

static void bill(struct luaenv *e, uint64_t units)
{
    if (e->hook_period == 0 || e->fatal != LUAENV_FATAL_NONE)
        return;
    e->reductions = units < REDUCTIONS_MAX - e->reductions ? e->reductions + units
                                                           : REDUCTIONS_MAX;
    if (e->max_reductions != 0 && e->reductions > e->max_reductions)
        e->fatal = LUAENV_FATAL_REDUCTIONS;
}

/*
 * A full collection of a heap of `heap` bytes ran (or is about to): take it
 * from the credit, and settle what the credit does not cover as `event`
 * says (above).  Also checks the CPU budget (the hook checks it only every
 * CPU_EVERY periods, and one collection can take tens of milliseconds).
 * Sets the fatal flag when a limit is reached; never raises.
 */
static void gc_spend(struct luaenv *e, size_t heap, int event)
{
    size_t unpaid;

    if (e->fatal != LUAENV_FATAL_NONE)
        return;
    if (e->cpu_us != 0 && cpu_now_us() > e->cpu_us) {
        e->fatal = LUAENV_FATAL_CPU;
        return;
    }
    if (e->gc_credit >= heap) {
        e->gc_credit -= heap;
        return;
    }
    unpaid = heap - e->gc_credit;
    e->gc_credit = 0;
    if (event == GC_NEEDED) {
        if (!MUTANT(GC_THRASH))
            e->fatal = LUAENV_FATAL_MEMORY;
        return;
    }
    if (!MUTANT(GC_BILLING))
        bill(e, unpaid / GC_BYTES_PER_REDUCTION);
}

static void gc_earn(struct luaenv *e, size_t grow)
{
    size_t max = e->gc_credit_max;

    if (grow > max / GC_CREDIT_PER_BYTE || e->gc_credit > max - grow * GC_CREDIT_PER_BYTE)
        e->gc_credit = max;
    else
        e->gc_credit += grow * GC_CREDIT_PER_BYTE;
}

/*
 * Refusals.  The core (luaM_realloc_) answers a refused request with an
 * emergency full collection and one retry with the same arguments; the
 * collection only frees.  So a growth request equal to the last refused one,
 * with no growth in between, is that retry, and then:
 *   - a heap refusal of the retry is final: LUA_ERRMEM follows, or
 *     lua_checkstack swallows it and its caller raises an ordinary error
 *     ("too many results to unpack", "stack overflow") or reports failure.
 *     The limit must hold either way, so the fatal flag is set here, and the
 *     collection is not billed;
 *   - a string refusal of the retry stays catchable: the collection is kept
 *     in gc_caught, settled by luaenv_catch() if the chunk catches the error
 *     and goes on;
 *   - a retry that fits spends the collection as one the heap needed
 *     (gc_spend), which may end the chunk with memory_limit instead.
 * A luaL_Buffer grows through the allocator directly, with no collection and
 * no retry; its refusal is recognised at the boundary (luaenv_catch).
 */
static void *refuse(struct luaenv *e, int kind, const void *ptr, size_t osize, size_t nsize,
                    int retry)
{
    e->last_refusal = kind;
    if (retry) {
        if (kind == LUAENV_REFUSED_STRING)
            e->gc_caught += e->retry_used;
        if (!MUTANT(REFUSAL_FINAL) && kind == LUAENV_REFUSED_HEAP && e->fatal == LUAENV_FATAL_NONE)
            e->fatal = LUAENV_FATAL_MEMORY;
    } else {
        e->retry_armed = 1;
        e->retry_ptr = ptr;
        e->retry_osize = osize;
        e->retry_nsize = nsize;
        e->retry_used = e->used;
    }
    return NULL;
}

/*
 * Allocator.  ptr == NULL means a new block and osize is then a type tag,
 * so the old size is `ptr ? osize : 0`.  Growth is checked against the caps
 * (a new string of length n is one block of string_header + n + 1 bytes);
 * shrinks and frees always succeed (Lua assumes they cannot fail, so a
 * failing shrink realloc returns the old block).
 */
static void *env_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    struct luaenv *e = ud;
    size_t old = ptr ? osize : 0;
    void *p;

    if (nsize == 0) {
        free(ptr);
        e->used -= old;
        return NULL;
    }
    if (nsize > old) {
        size_t grow = nsize - old;
        int retry = e->retry_armed && ptr == e->retry_ptr && osize == e->retry_osize
                    && nsize == e->retry_nsize;

        e->retry_armed = 0;
        if (retry && e->fatal != LUAENV_FATAL_NONE)
            return refuse(e, LUAENV_REFUSED_HEAP, ptr, osize, nsize, 1);
        if (e->probing && ptr == NULL && osize == LUA_TSTRING)
            e->string_header = nsize - PROBE_LEN - 1;
        if (MUTANT(STRING_EXACT)) {
            if (ptr == NULL && osize == LUA_TSTRING && nsize > e->string_cap + 64)  /* mutant: slack */
                return refuse(e, LUAENV_REFUSED_STRING, ptr, osize, nsize, retry);
        } else if (!MUTANT(STRING_CAP) && ptr == NULL && osize == LUA_TSTRING &&
                   nsize - e->string_header - 1 > e->string_cap) {
            return refuse(e, LUAENV_REFUSED_STRING, ptr, osize, nsize, retry);
        }
        if (!MUTANT(HEAP_CAP) && e->max_heap != 0 &&
            (grow > e->max_heap || e->used > e->max_heap - grow))
            return refuse(e, LUAENV_REFUSED_HEAP, ptr, osize, nsize, retry);
        if (retry) {                    /* the emergency collection made room */
            gc_spend(e, e->retry_used, GC_NEEDED);
            if (e->fatal != LUAENV_FATAL_NONE)
                return refuse(e, LUAENV_REFUSED_HEAP, ptr, osize, nsize, 1);
        }
        if (ptr == NULL && osize == LUA_TSTRING && e->charging && !e->host) {
            /* a new string: the chunk pays for its bytes (charge.h) */
            if (!MUTANT(STRING_CHARGE))
                bill(e, charge_string(nsize - e->string_header - 1));
            if (e->fatal != LUAENV_FATAL_NONE)
                return refuse(e, LUAENV_REFUSED_BUDGET, ptr, osize, nsize, retry);
        }
        p = realloc(ptr, nsize);
        if (p == NULL)      /* the system refused: the same verdict */
            return refuse(e, LUAENV_REFUSED_HEAP, ptr, osize, nsize, retry);
        gc_earn(e, grow);
    } else {
        p = realloc(ptr, nsize);
        if (p == NULL)
            return ptr;                 /* a shrink never fails */
    }
    e->used = e->used - old + nsize;
    if (e->used > e->peak)
        e->peak = e->used;
    return p;
}

/* An error outside any protected call.  Nothing sensible is left to do, and
 * stdio may be forbidden by seccomp: exit; the supervisor reports a worker
 * that ends without an end frame as crashed. */
static int env_panic(lua_State *L)
{
    (void)L;
    _exit(LUAENV_EXIT_PANIC);
}

struct luaenv *luaenv_from(lua_State *L)
{
    void *ud;
    lua_getallocf(L, &ud);
    return ud;
}

lua_State *luaenv_state(struct luaenv *e) { return e->L; }
enum luaenv_fatal luaenv_fatal(const struct luaenv *e) { return (enum luaenv_fatal)e->fatal; }
size_t luaenv_string_cap(const struct luaenv *e) { return e->string_cap; }

void luaenv_stats(const struct luaenv *e, struct luaenv_stats *out)
{
    out->reductions = e->hook_period ? e->reductions : 0;
    out->refused = e->refused;
    out->max_reductions = e->max_reductions;
    out->heap_bytes = e->used;
    out->heap_peak_bytes = e->peak;
    out->output_truncated = e->output_truncated;
}

static uint64_t cpu_now_us(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void push_fatal_message(lua_State *L, int kind)
{
    switch (kind) {
    case LUAENV_FATAL_REDUCTIONS: lua_pushliteral(L, MSG_REDUCTIONS); break;
    case LUAENV_FATAL_CPU:        lua_pushliteral(L, MSG_CPU); break;
    default:                      lua_pushliteral(L, MSG_MEMORY); break;
    }
}

/*
 * The count hook.  Each thread keeps its own countdown, and a coroutine's
 * runs on across its resumes, so the hook sees every instruction of a
 * thread that runs on.  What it would miss is the instructions a coroutine
 * runs after its last hook call before it ends (or is left suspended), so a
 * coroutine pays its periods when they begin: COROUTINE_FIRST instructions
 * when it is made (luaenv_arm_new), then at each hook call the next period,
 * twice the last, up to hook_period.  It is billed at least the
 * instructions it runs, less than twice them plus COROUTINE_FIRST, and at
 * most one hook_period more.  The main thread pays each period when it
 * ends (at most one period of it goes unbilled, at the end of the chunk).
 * Once a limit is exhausted (or any fatal flag is set) the hook re-arms
 * itself with count 1 on this thread and raises, so every further
 * instruction raises again.
 */
#define COROUTINE_FIRST CHARGE_COROUTINE_FIRST

static void count_hook(lua_State *L, lua_Debug *ar)
{
    struct luaenv *e = luaenv_from(L);

    (void)ar;
    if (e->fatal == LUAENV_FATAL_NONE && e->hook_period > 0) {
        int period = lua_gethookcount(L);
        if (L != e->L && period < e->hook_period) {
            period = period <= e->hook_period / 2 ? 2 * period : e->hook_period;
            lua_sethook(L, count_hook, LUA_MASKCOUNT, period);
        }
        e->reductions += (uint64_t)period;
        if (e->max_reductions != 0 && e->reductions > e->max_reductions)
            e->fatal = LUAENV_FATAL_REDUCTIONS;
        else if (e->cpu_us != 0 && ++e->hook_ticks % CPU_EVERY == 0 && cpu_now_us() > e->cpu_us)
            e->fatal = LUAENV_FATAL_CPU;
    }
    if (e->fatal == LUAENV_FATAL_NONE)
        return;
    if (!MUTANT(HOOK_REARM))
        lua_sethook(L, count_hook, LUA_MASKCOUNT, 1);
    push_fatal_message(L, e->fatal);
    lua_error(L);
}

/* Arm co as a new coroutine: its first period, paid now (raises when that
 * spends the budget).  L is the running thread. */
static void arm_new(lua_State *L, lua_State *co)
{
    struct luaenv *e = luaenv_from(L);
    int first = e->hook_period < COROUTINE_FIRST ? e->hook_period : COROUTINE_FIRST;

    if (e->hook_period == 0) {
        lua_sethook(co, NULL, 0, 0);
        return;
    }
    if (e->fatal != LUAENV_FATAL_NONE) {
        lua_sethook(co, count_hook, LUA_MASKCOUNT, 1);
        return;
    }
    lua_sethook(co, count_hook, LUA_MASKCOUNT, first);
    bill(e, (uint64_t)first);
    luaenv_check(L);
}

void luaenv_arm_new(lua_State *L, lua_State *co)
{
    if (!MUTANT(COROUTINE_PREPAY))      /* the mutant: it keeps its maker's countdown */
        arm_new(L, co);
}

void luaenv_collect(lua_State *L)
{
    struct luaenv *e = luaenv_from(L);
    size_t heap = e->used;

    lua_gc(L, LUA_GCCOLLECT, 0);
    gc_spend(e, heap, GC_NEEDED);
    luaenv_check(L);
}

void luaenv_check(lua_State *L)
{
    struct luaenv *e = luaenv_from(L);

    if (e->fatal == LUAENV_FATAL_NONE)
        return;
    push_fatal_message(L, e->fatal);
    luaenv_rethrow(L);
}

/*
 * Give thread co the count hook the state runs under now, unless it has it
 * already: then its countdown, and the period it paid for, run on.  A
 * coroutine may come from an earlier session chunk under other limits (or
 * none): without this, resuming it would run the instructions of this
 * chunk unbilled; it is armed as a new one.
 */
void luaenv_arm(lua_State *L, lua_State *co)
{
    struct luaenv *e = luaenv_from(co);

    if (MUTANT(SESSION_REARM))
        return;                         /* mutant: coroutines keep their old hook */
    if (e->hook_period == 0) {
        if (lua_gethook(co) != NULL)
            lua_sethook(co, NULL, 0, 0);
        return;
    }
    if (e->fatal != LUAENV_FATAL_NONE) {
        lua_sethook(co, count_hook, LUA_MASKCOUNT, 1);
        return;
    }
    if (lua_gethook(co) == count_hook && lua_gethookmask(co) == LUA_MASKCOUNT
        && lua_gethookcount(co) <= e->hook_period)
        return;
    arm_new(L, co);
}

/*
 * A caught error costs the core O(depth) and more: luaD_pcall shrinks the
 * stack, which walks every frame, and may reallocate it (and the next call
 * grows it again, initialising every new slot: at 200,000 levels that is
 * about 20 ms per caught error).  A loop that catches errors at a deep stack
 * buys that per few instructions, so it is billed: the depth is found by
 * probes at doubling levels from UNWIND_FREE (lua_getstack is O(level)), and
 * `level`, the deepest probe that exists (more than half the depth), is
 * billed UNWIND_BILL times, above the dearest cost measured per level
 * (bench/unwind_bill.lua: up to about 50 instructions' worth).  Shallow
 * stacks cost one probe and are not billed.
 */
#define UNWIND_FREE CHARGE_UNWIND_FREE
#define UNWIND_BILL CHARGE_UNWIND_LEVEL

void luaenv_charge_unwind(lua_State *L)
{
    struct luaenv *e = luaenv_from(L);
    lua_Debug ar;
    int level = UNWIND_FREE;

    if (MUTANT(UNWIND_BILLING))
        return;                         /* mutant: caught errors are free at any depth */
    if (e->hook_period == 0 || e->fatal != LUAENV_FATAL_NONE || !lua_getstack(L, level, &ar))
        return;
    while (level <= INT_MAX / 2 && lua_getstack(L, level * 2, &ar))
        level *= 2;
    bill(e, (uint64_t)level * UNWIND_BILL);
}

void luaenv_apply(struct luaenv *e, const struct luaenv_limits *lim)
{
    lua_State *L = e->L;

    e->max_heap = lim->max_heap;
    e->string_cap = LUAENV_STRING_CAP_MAX;
    if (lim->max_heap != 0 && lim->max_heap / 2 < e->string_cap)
        e->string_cap = lim->max_heap / 2;
    e->charge.cap = e->string_cap;
    e->loading = 0;
    e->peak = e->used;
    e->last_refusal = LUAENV_REFUSED_NONE;
    e->retry_armed = 0;
    e->charging = 0;
    e->host = 0;
    e->gc_caught = 0;
    e->gc_credit_max = lim->max_heap != 0 && lim->max_heap <= SIZE_MAX / 2 / GC_CREDIT_HEAPS
                       ? lim->max_heap * GC_CREDIT_HEAPS : SIZE_MAX / 2;
    e->gc_credit = e->gc_credit_max;
    e->fatal = LUAENV_FATAL_NONE;
    e->max_reductions = lim->max_reductions;
    e->cpu_us = lim->cpu_us;
    e->reductions = 0;
    e->refused = 0;
    e->hook_ticks = 0;
    e->hook_period = 0;
    e->output_fd = lim->output_fd;
    e->output_max = lim->max_output_bytes;
    e->output_sent = 0;
    e->output_truncated = 0;
    e->outbuf_len = 0;

    /* Buffers (luaL_Buffer) grow without the emergency collection that
     * Lua-managed blocks get, so near a cap garbage must not pile up. */
    if (lim->max_heap != 0)
        lua_gc(L, LUA_GCSETPAUSE, GC_PAUSE_CAPPED);

    if (lim->max_reductions != 0 || lim->cpu_us != 0) {
        e->hook_period = HOOK_PERIOD;
        if (lim->max_reductions != 0 && lim->max_reductions < HOOK_PERIOD)
            e->hook_period = (int)lim->max_reductions;
        lua_sethook(L, count_hook, LUA_MASKCOUNT, e->hook_period);
    } else {
        lua_sethook(L, NULL, 0, 0);
    }
}

void luaenv_start(struct luaenv *e)
{
    e->charging = 1;
    e->host = 0;
}

int luaenv_host_begin(lua_State *L)
{
    struct luaenv *e = luaenv_from(L);
    int was = e->host;

    e->host = 1;
    return was;
}

void luaenv_host_end(lua_State *L, int was)
{
    luaenv_from(L)->host = was;
}

void luaenv_charge(lua_State *L, uint64_t units)
{
    struct luaenv *e = luaenv_from(L);

    if (!e->charging || e->host)
        return;
    bill(e, units);
    luaenv_check(L);
}

void luaenv_charge_ahead(lua_State *L, uint64_t units)
{
    struct luaenv *e = luaenv_from(L);

    if (!e->charging || e->host)
        return;
    if (e->hook_period != 0 && e->fatal == LUAENV_FATAL_NONE && e->max_reductions != 0
        && units > e->max_reductions - (e->reductions < e->max_reductions ? e->reductions
                                                                          : e->max_reductions)) {
        e->refused = units;             /* the work never runs: not counted */
        e->fatal = LUAENV_FATAL_REDUCTIONS;
    } else {
        bill(e, units);
    }
    luaenv_check(L);
}

/* struct charge's pay and pay_ahead: the library's charges (charge.h). */
static void pay_charge(lua_State *L, void *ud, uint64_t n)
{
    (void)ud;
    luaenv_charge(L, n);
}

static void pay_ahead_charge(lua_State *L, void *ud, uint64_t n)
{
    (void)ud;
    luaenv_charge_ahead(L, n);
}

/* struct charge's room: the reductions left before a payment raises. */
static uint64_t room_charge(lua_State *L, void *ud)
{
    struct luaenv *e = ud;

    (void)L;
    if (!e->charging || e->host || e->hook_period == 0)
        return UINT64_MAX;
    if (e->fatal != LUAENV_FATAL_NONE || (e->max_reductions != 0 && e->reductions >= e->max_reductions))
        return 0;
    return e->max_reductions != 0 ? e->max_reductions - e->reductions : UINT64_MAX;
}

/* struct charge's fit: before a result of need bytes is built in a
 * luaL_Buffer or by lua_concat (which get no emergency collection),
 * collect first if it would not fit. */
static void fit_charge(lua_State *L, void *ud, size_t need)
{
    struct luaenv *e = ud;

    if (e->max_heap != 0 && (need > e->max_heap || e->used > e->max_heap - need))
        luaenv_collect(L);
}

void luaenv_loading(lua_State *L, int delta)
{
    luaenv_from(L)->loading += delta;
}

int luaenv_in_load(lua_State *L)
{
    if (MUTANT(LOAD_BOUNDARY))
        return 0;                       /* mutant: load's errors reach the chunk's handler */
    return luaenv_from(L)->loading > 0;
}

void luaenv_finish(struct luaenv *e)
{
    luaenv_output_flush(e);
    e->charging = 0;
    e->max_heap = 0;
    e->string_cap = (size_t)-1 / 2;
    e->charge.cap = e->string_cap;
    lua_sethook(e->L, NULL, 0, 0);
}

static int is_buffer_message(lua_State *L, int idx)
{
    size_t len, n = sizeof MSG_BUFFER - 1;
    const char *s;

    if (lua_type(L, idx) != LUA_TSTRING)
        return 0;
    s = lua_tolstring(L, idx, &len);
    return len >= n && memcmp(s + len - n, MSG_BUFFER, n) == 0;
}

int luaenv_is_fatal_error(lua_State *L, int idx)
{
    struct luaenv *e = luaenv_from(L);

    if (e->fatal == LUAENV_FATAL_NONE && e->last_refusal == LUAENV_REFUSED_HEAP
        && is_buffer_message(L, idx))
        set_fatal(e, LUAENV_FATAL_MEMORY);
    return e->fatal != LUAENV_FATAL_NONE;
}

/* luaenv_catch() and luaenv_catch_end(); goes_on: the chunk goes on after
 * this error (a protected boundary inside it), so what it bought is
 * settled here. */
static enum luaenv_caught classify(lua_State *L, int status, int goes_on)
{
    struct luaenv *e = luaenv_from(L);
    int refusal = e->last_refusal;
    size_t caught = e->gc_caught;

    e->last_refusal = LUAENV_REFUSED_NONE;
    e->gc_caught = 0;
    e->host = 0;                /* an error that left host code: the chunk's again */
    if (e->fatal != LUAENV_FATAL_NONE)
        return LUAENV_CAUGHT_FATAL;
    if (status == LUA_ERRMEM) {
        if (refusal == LUAENV_REFUSED_STRING) {
            lua_pushliteral(L, MSG_STRING);
            lua_replace(L, -2);
            if (!goes_on)
                return LUAENV_CAUGHT_STRING;
            /* The chunk caught the refusal and goes on: the emergency
             * collection behind it is one it can buy again and again.
             * And a string built in a luaL_Buffer leaves the buffer behind,
             * whose memory goes only with its finalizer, which the emergency
             * collection does not run: without a full collection here the
             * next such error would find the heap full of dead buffers.
             * Both are settled like any collection a caught refusal bought. */
            gc_spend(e, caught, GC_CAUGHT);
            if (!MUTANT(STRING_COLLECT) && e->fatal == LUAENV_FATAL_NONE) {
                size_t heap = e->used;
                lua_gc(L, LUA_GCCOLLECT, 0);
                gc_spend(e, heap, GC_CAUGHT);
            }
            if (e->fatal != LUAENV_FATAL_NONE)
                return LUAENV_CAUGHT_FATAL;
            return LUAENV_CAUGHT_STRING;
        }
        set_fatal(e, LUAENV_FATAL_MEMORY);
        return LUAENV_CAUGHT_FATAL;
    }
    if (refusal == LUAENV_REFUSED_HEAP && is_buffer_message(L, -1)) {
        set_fatal(e, LUAENV_FATAL_MEMORY);
        return LUAENV_CAUGHT_FATAL;
    }
    return LUAENV_CAUGHT_PLAIN;
}

enum luaenv_caught luaenv_catch(lua_State *L, int status)
{
    return classify(L, status, 1);
}

enum luaenv_caught luaenv_catch_end(lua_State *L, int status)
{
    return classify(L, status, 0);
}

int luaenv_rethrow(lua_State *L)
{
    if (!MUTANT(HOOK_REARM))
        lua_sethook(L, count_hook, LUA_MASKCOUNT, 1);
    return lua_error(L);
}

/* Send s[0..len), already counted in output_sent, as frames. */
static void output_send(struct luaenv *e, const char *s, size_t len)
{
    while (len > 0 && e->output_fd >= 0) {
        size_t n = len < CHAN_OUTPUT_MAX ? len : CHAN_OUTPUT_MAX;
        if (chan_send(e->output_fd, CHAN_OUTPUT, s, n) != 0) {
            e->output_fd = -1;          /* the reader is gone: stop trying */
            e->output_truncated = 1;
            return;
        }
        s += n;
        len -= n;
    }
}

void luaenv_output_flush(struct luaenv *e)
{
    output_send(e, e->outbuf, e->outbuf_len);
    e->outbuf_len = 0;
}

void luaenv_output(struct luaenv *e, const char *s, size_t len)
{
    size_t room;

    if (e->output_truncated)
        return;
    if (MUTANT(PRINT_CAP))
        room = (size_t)-1;              /* mutant: no bound on captured output */
    else
        room = e->output_max - e->output_sent;
    if (len > room) {
        len = room;
        e->output_truncated = 1;
    }
    e->output_sent += len;
    if (len <= sizeof e->outbuf - e->outbuf_len) {
        memcpy(e->outbuf + e->outbuf_len, s, len);
        e->outbuf_len += len;
        return;
    }
    luaenv_output_flush(e);             /* keep the order: what is buffered first */
    if (len <= sizeof e->outbuf) {
        memcpy(e->outbuf, s, len);
        e->outbuf_len = len;
    } else {
        output_send(e, s, len);
    }
}

/* Copy the named fields of the table at src into the table at dst. */
static void copy_fields(lua_State *L, int src, int dst, const char *const *names)
{
    for (; *names != NULL; names++) {
        lua_getfield(L, src, *names);
        lua_setfield(L, dst, *names);
    }
}

#if defined(SANDBOXD_TEST_HOOKS)
/*
 * Test builds only (`make test-hooks`; never in build/sandboxd):
 * sandboxd_test.syscall(nr) makes the worker issue system call nr with zero
 * arguments, as a worker whose Lua had been subverted would.  The seccomp
 * filter decides what happens; the tests expect `crashed` and a live daemon.
 */
static int test_syscall(lua_State *L)
{
    long nr = (long)luaL_checkinteger(L, 1);

    lua_pushinteger(L, (lua_Integer)syscall(nr, 0L, 0L, 0L, 0L, 0L, 0L));
    return 1;
}

static void open_test_hooks(lua_State *L, int g)
{
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, test_syscall);
    lua_setfield(L, -2, "syscall");
    lua_setfield(L, g, "sandboxd_test");
}
#endif

/* Build the environment; runs under lua_pcall in luaenv_new(). */
static int build_env(lua_State *L)
{
    static const luaL_Reg libs[] = {
        {"_G", luaopen_base},
        {LUA_STRLIBNAME, luaopen_string},
        {LUA_TABLIBNAME, luaopen_table},
        {LUA_MATHLIBNAME, luaopen_math},
        {LUA_COLIBNAME, luaopen_coroutine},
        {LUA_UTF8LIBNAME, luaopen_utf8},
        {LUA_OSLIBNAME, luaopen_os},
        {NULL, NULL},
    };
    static const char *const os_keep[] = {"time", "clock", "date", "difftime", NULL};
    static const char *const exposed[] = {LUA_STRLIBNAME, LUA_TABLIBNAME, LUA_MATHLIBNAME,
                                          LUA_COLIBNAME, LUA_UTF8LIBNAME, LUA_OSLIBNAME, NULL};
    static const char *const anchors[] = {MSG_STRING, MSG_MEMORY, MSG_REDUCTIONS, MSG_CPU, NULL};
    const luaL_Reg *lib;
    int g, i;

    if (MUTANT(OPENLIBS)) {
        luaL_openlibs(L);               /* mutant: every standard library */
    } else {
        for (lib = libs; lib->func != NULL; lib++) {
            luaL_requiref(L, lib->name, lib->func, 1);
            lua_pop(L, 1);
        }
    }
    lua_pushglobaltable(L);
    g = lua_gettop(L);

    /* os: the time functions only, in a new table (the full one is dropped) */
    lua_getfield(L, g, LUA_OSLIBNAME);
    lua_createtable(L, 0, 4);
    copy_fields(L, g + 1, g + 2, os_keep);
    lua_setfield(L, g, LUA_OSLIBNAME);
    lua_pop(L, 1);

    /* removals: in the real tables, not in copies */
    lua_pushnil(L);
    lua_setfield(L, g, "dofile");
    lua_pushnil(L);
    lua_setfield(L, g, "loadfile");
    if (!MUTANT(STRING_DUMP)) {
        lua_getfield(L, g, LUA_STRLIBNAME); /* also the string metatable's __index */
        lua_pushnil(L);
        lua_setfield(L, -2, "dump");
        lua_pop(L, 1);
    }

    /* The string metatable stays as stock Lua has it: getmetatable("")
     * returns it and a chunk may change it.  Each worker is its own process
     * (and a session its own state), so a change reaches nothing else; and
     * no C code here reads a string through its metatable. */

    /* the library's charges (charge.h), then the replacements
     * (luaenv_lib.c), some of which wrap charged functions */
    if (!MUTANT(LIB_CHARGES))
        charge_open(L, &luaenv_from(L)->charge);
    lua_pushvalue(L, g);
    luaenv_openlib(L);
    lua_pop(L, 1);

    /* registry._LOADED: the exposed tables only */
    lua_createtable(L, 0, 8);
    lua_pushvalue(L, g);
    lua_setfield(L, -2, "_G");
    copy_fields(L, g, lua_gettop(L), exposed);
    lua_setfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);

#if defined(SANDBOXD_TEST_HOOKS)
    open_test_hooks(L, g);
#endif

    /* anchors for the messages pushed under memory pressure */
    lua_createtable(L, 4, 0);
    for (i = 0; anchors[i] != NULL; i++) {
        lua_pushstring(L, anchors[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_rawsetp(L, LUA_REGISTRYINDEX, anchors);
    lua_settop(L, 0);
    return 0;
}

struct luaenv *luaenv_new(void)
{
    struct luaenv *e = calloc(1, sizeof *e);

    if (e == NULL)
        return NULL;
    e->output_fd = -1;
    e->string_cap = LUAENV_STRING_CAP_MAX;
    e->charge.pay = pay_charge;
    e->charge.ud = e;
    e->charge.cap = e->string_cap;
    e->charge.fit = fit_charge;
    e->charge.pay_ahead = pay_ahead_charge;
    e->charge.room = room_charge;
    e->L = lua_newstate(env_alloc, e);
    if (e->L == NULL)
        goto fail;
    lua_atpanic(e->L, env_panic);
    {                           /* measure a string's allocation header */
        static const char probe[PROBE_LEN];
        e->probing = 1;
        lua_pushlstring(e->L, probe, PROBE_LEN);
        e->probing = 0;
        lua_pop(e->L, 1);
    }
    lua_pushcfunction(e->L, build_env);
    if (lua_pcall(e->L, 0, 0, 0) != LUA_OK)
        goto fail_close;    /* in the zygote no user code ever ran: closing is safe */
    lua_gc(e->L, LUA_GCCOLLECT, 0);
    return e;

fail_close:
    lua_close(e->L);
fail:
    free(e);
    return NULL;
}

void luaenv_free(struct luaenv *e)
{
    if (e == NULL)
        return;
    lua_close(e->L);
    free(e);
}
