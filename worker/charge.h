/* Runs in: zygote, worker */
/*
 * charge.h - what a chunk's work costs beyond its VM instructions: every
 * rate of the instruction budget's charges, in one place, and the library
 * functions that charge them.
 *
 * max_reductions counts VM instructions (a count hook) plus the charges
 * defined here, so that it bounds all the CPU a chunk can use: a C function
 * is one instruction to the hook however long it runs.  A charge is a count
 * of work divided by its rate, rounded down, paid when the work is known:
 * before it is done where the arguments tell (so a call that would spend
 * the budget stops before it runs), as it goes where they do not (pattern
 * matching).  docs/protocol.md ("Limits") lists the same rates; keep both.
 * bench/charge_bill.lua measures each kind of work against an instruction.
 *
 *   strings       every new string, whoever makes it (`..`, a library
 *                 function, load's lexer), as it is allocated:
 *                 length / CHARGE_BYTES.  Short strings (40 bytes or less,
 *                 interned, so made only when new) cost nothing, since any
 *                 string of fewer than CHARGE_BYTES bytes costs nothing.
 *   bytes         bytes a function copies or scans without looking at each
 *                 (memcpy, memchr, memcmp, strlen): / CHARGE_BYTES
 *   each byte     bytes a function handles one at a time (case mapping,
 *                 escaping, decoding UTF-8 or numbers, format strings):
 *                 / CHARGE_EACH_BYTES
 *   values        values a function pushes or takes as arguments: one each
 *   table values  values a function moves within a table or reads from one
 *                 to build a string (a read and a write each, in C):
 *                 CHARGE_TABLE_VALUE each
 *   steps         pattern matcher steps (pattern.c): / CHARGE_MATCH_STEPS.
 *                 A step is an item of the pattern taken up at a position
 *                 of the subject (a character, '.', a class or a set, with
 *                 its repetition; '(', '()', ')', %b, %f, %1-%9, a final
 *                 '$', and the end of the pattern; each start position
 *                 tried takes up the first item); a character a '*', '+'
 *                 or '-' item matches after its first; a character %b
 *                 passes after its opening one; a byte of the pattern
 *                 compiled (an item is compiled once a call, when first
 *                 taken up).  Paid every 4096 steps, before an error the
 *                 call raises, and at the step that takes the count past
 *                 struct charge's room.
 *   sorting       table.sort of n values: n * ceil(log2 n) *
 *                 CHARGE_SORT_LEVEL, before it sorts; of a table with a
 *                 __len metamethod (which only the stock function runs):
 *                 CHARGE_SORT_COMPARE per comparison by < or a C function,
 *                 before it is made (a Lua comparator's instructions pay)
 *   conversions   os.date's conversions (strftime): CHARGE_DATE_CONVERSION
 *                 for each '%' of the format
 *
 * A function's charge for one call is less CHARGE_FREE, its free part,
 * which the call's own instruction pays for (so small calls cost only that
 * instruction), except where it pays as it goes (the pattern functions,
 * table.concat and table.move of a table with a metatable, table.sort of a
 * table with a __len, load's source).
 * A charge is paid only for work stock would do: each function checks its
 * arguments as stock does, in stock's order, before it pays, so an argument
 * stock refuses is the same catchable error here, never a spent budget.
 *
 * Per function (besides the strings it makes):
 *   string.byte        values: the results
 *   string.char        values: the arguments
 *   string.find, match, gmatch, gsub    steps; bytes of a plain find (the
 *                      pattern up to its first special character, the
 *                      subject from init to the end of the match or of the
 *                      subject), bytes a back-reference compares, bytes
 *                      gsub copies into its result (the match, captures,
 *                      replacement values, the subject after the last
 *                      match); each byte of a replacement string, per match
 *   string.format      each byte of the format and of %q arguments, and
 *                      bytes of the other string arguments and of what a
 *                      __tostring gives for %s, as far as stock reads them
 *                      (to the directive it refuses, if any; the wrapper
 *                      runs those __tostring itself, in stock's order)
 *   string.lower, upper, reverse        each byte
 *   string.pack        each byte of the format; values: the arguments;
 *                      bytes of string arguments
 *   string.packsize    each byte of the format
 *   string.unpack      each byte of the format; values: the results; with a
 *                      'z' option, bytes from the position to the end
 *   table.concat       table values: the items; bytes of the items
 *   table.insert, remove    table values: the items moved
 *   table.move         table values: the items (each as it is moved when
 *                      either table has a metatable)
 *   table.unpack, pack values: the items
 *   table.sort         sorting
 *   utf8.char          values: the arguments
 *   utf8.codepoint     values: the bytes of the range
 *   utf8.len           each byte of the range
 *   utf8.offset        each byte from the start to the position found
 *                      (to the end when there is none)
 *   utf8.codes         each byte each step passes
 *   tonumber           each byte of a string
 *   rawequal           bytes of two strings of one length
 *   load               each byte of the source (every piece of a reader)
 *   os.date            conversions; each byte of the format
 * print is not charged in sandboxd: it copies at most max_output_bytes
 * (once its output is cut it does nothing), and a measuring harness's print
 * writes nothing.
 * table.insert, remove, unpack, concat and move are this module's own
 * (written from the manual, with stock's messages); table.sort is stock's
 * behind a wrapper that takes #t first with luaL_len, as sort itself does
 * then: a __len metamethod of the table it sorts runs twice.
 * Everything else in the library does bounded work per call.
 *
 * This module depends on the Lua API only, never on the worker: a program
 * linked with the stock liblua5.3 applies the same charges to measure what
 * a chunk needs.  Measuring with stock Lua:
 *   1. struct charge c = {.pay = pay, .ud = ud}: pay(L, ud, n) is called with each charge
 *      (the worker's raises the reductions limit; a meter adds n up);
 *   2. a lua_Alloc that adds charge_string(nsize - header - 1) for every
 *      block with ptr == NULL and osize == LUA_TSTRING (a new string), with
 *      header = charge_string_header(), from the moment the chunk starts
 *      running (its own compilation is not charged);
 *   3. luaL_openlibs(L), then charge_open(L, &c);
 *   4. a count hook of period 1 (lua_sethook; coroutines made afterwards
 *      inherit it) for the instructions.
 * The chunk's reductions are the instructions plus the charges; sandboxd
 * bills the same (tests/tools/lua_meter.c does exactly this).
 */
#ifndef SANDBOXD_CHARGE_H
#define SANDBOXD_CHARGE_H

#include <lua.h>
#include <stddef.h>
#include <stdint.h>

#define CHARGE_BYTES        64  /* bytes made, copied or scanned per reduction */
#define CHARGE_EACH_BYTES   4   /* bytes handled one at a time per reduction */
#define CHARGE_MATCH_STEPS  1   /* pattern matcher steps per reduction */
#define CHARGE_TABLE_VALUE  4   /* reductions per value moved in or read from a table */
#define CHARGE_SORT_LEVEL   4   /* reductions per value per level of a sort */
#define CHARGE_SORT_COMPARE 4   /* reductions per comparison of a sort that pays as it goes */
#define CHARGE_DATE_CONVERSION 64   /* reductions per conversion of os.date */
#define CHARGE_FREE         8   /* reductions of a call's charge that are free */

/* Billed by sandboxd alone: no stock Lua sees this work, and a chunk that
 * runs within twice its needs never pays for it (luaenv.c says when each
 * applies).
 *   collections     a full collection the chunk's allocation has not paid
 *                   for (each byte allocated pays for CHARGE_GC_CREDIT bytes
 *                   of collection, CHARGE_GC_CREDIT_HEAPS heap caps to
 *                   start), behind a refusal the chunk catches: its heap /
 *                   CHARGE_GC_BYTES (bench/gc_bill.lua)
 *   coroutines      a new coroutine's first count-hook period, paid when it
 *                   is made: CHARGE_COROUTINE_FIRST instructions
 *   deep errors     an error caught more than CHARGE_UNWIND_FREE levels
 *                   deep: CHARGE_UNWIND_LEVEL per level of about half its
 *                   depth (bench/unwind_bill.lua) */
#define CHARGE_GC_BYTES         4
#define CHARGE_GC_CREDIT        4
#define CHARGE_GC_CREDIT_HEAPS  2
#define CHARGE_COROUTINE_FIRST  4
#define CHARGE_UNWIND_FREE      1024
#define CHARGE_UNWIND_LEVEL     64

struct charge {
    /* Called with every charge (n > 0), from inside the function that does
     * the work; it may raise (lua_error) to stop that work. */
    void (*pay)(lua_State *L, void *ud, uint64_t n);
    void  *ud;
    /* Optional (NULL: no bound): the reductions that can still be paid
     * before pay raises.  The pattern functions, which pay as they go, ask
     * it after each payment so as to pay the step that crosses the budget
     * (pattern.c). */
    uint64_t (*room)(lua_State *L, void *ud);
    /* Optional (NULL: pay): called instead of pay with a charge for work
     * not yet done, paid before it runs (every charge but the pattern
     * functions', table.concat's and table.move's per item and
     * string.format's after it returns); the worker refuses one larger
     * than what is left of the budget without counting it. */
    void (*pay_ahead)(lua_State *L, void *ud, uint64_t n);
    /* Optional (0, NULL: none).  table.concat refuses a result longer than
     * cap bytes with the catchable "resulting string too large", before
     * building it, and calls fit(L, ud, need) before it builds need bytes
     * (the worker collects there when they would not fit). */
    size_t cap;
    void (*fit)(lua_State *L, void *ud, size_t need);
};

/* The charge for a new string of len bytes. */
static inline uint64_t charge_string(size_t len)
{
    return (uint64_t)(len / CHARGE_BYTES);
}

/* The charge for one call whose work comes to n reductions. */
static inline uint64_t charge_call(uint64_t n)
{
    return n > CHARGE_FREE ? n - CHARGE_FREE : 0;
}

/* The charge for the source text load compiles (len bytes). */
static inline uint64_t charge_source(size_t len)
{
    return (uint64_t)(len / CHARGE_EACH_BYTES);
}

static inline void charge_pay(lua_State *L, struct charge *c, uint64_t n)
{
    if (n != 0)
        c->pay(L, c->ud, n);
}

/* The bytes of a string's block besides its length + 1 (the header of the
 * Lua this is linked with), measured in a state of its own; 0 if no state
 * could be made. */
size_t charge_string_header(void);

/* Replace the functions listed above in the tables string, table, utf8 and
 * os and in the globals (tonumber, rawequal, load, unpack if present) of
 * L's global table by charging ones.  c must outlive L.  Call once, after
 * the libraries are open and before anything else replaces them. */
void charge_open(lua_State *L, struct charge *c);

/* The pattern functions (pattern.c), for charge_open: C closures with
 * the struct charge as upvalue 1. */
int charge_str_find(lua_State *L);
int charge_str_match(lua_State *L);
int charge_str_gmatch(lua_State *L);
int charge_str_gsub(lua_State *L);

#endif
