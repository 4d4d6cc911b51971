/* Runs in: tests (links worker/luaenv*.c and worker/charge*.c with the stock liblua5.3) */
/*
 * luadiff.h - the differential test of the worker's Lua library against
 * stock Lua 5.3.  A program is a prelude and a list of generated statements
 * (each a chunk named "=input") that call every function the worker wraps
 * or replaces (worker/charge.c, worker/luaenv_lib.c) with good and bad
 * arguments of every type, metamethods that log and raise at error levels
 * 1 to 3, and callers that change names and levels (pcall, xpcall, method
 * calls, locals, coroutines).  Each statement runs in four states: stock
 * (luaL_openlibs), the worker's environment (luaenv_new) with counting on
 * (a budget of LUADIFF_BUDGET reductions, renewed per statement) and with
 * counting off, and stock with worker/charge.c's charges (charge_open, as
 * tests/tools/lua_meter measures).  Its results (values, or the error
 * value), and the log its metamethods wrote, must be equal in all four;
 * addresses are masked.
 *
 * A statement that spends the budget with counting on is heavy: stock runs
 * it in a child process for at most LUADIFF_HEAVY_MS; if stock finishes, that
 * is a difference (the worker refused work stock does not do), otherwise the
 * statement is skipped (work stock does too, which no run here can finish).
 *
 * Functions whose differences are documented (docs/protocol.md: print's
 * destination, collectgarbage's options, load's mode) are compared for what
 * the documentation promises: their argument errors.
 */
#ifndef SANDBOXD_LUADIFF_H
#define SANDBOXD_LUADIFF_H

#include <stddef.h>
#include <stdint.h>

#define LUADIFF_BUDGET    1000000u     /* reductions per statement, counting on */
#define LUADIFF_HEAVY_MS  100          /* stock's time for a heavy statement */

struct luadiff_stats {
    unsigned long programs, statements, compared, heavy, differences;
};

/* Where choices come from: bytes (a fuzzer's input; zeros once used up),
 * or a seed when data is NULL. */
struct luadiff_rng {
    const uint8_t *data;
    size_t         len, pos;
    uint64_t       s;
};

void luadiff_rng_seed(struct luadiff_rng *r, uint64_t seed);
void luadiff_rng_bytes(struct luadiff_rng *r, const uint8_t *data, size_t len);

/* Generate one program of at most max_statements statements from r and run
 * it.  Returns 0 when every statement agrees; -1 at the first difference,
 * with the statement and the results in report (NUL-terminated).
 * Stock's print writes to a /dev/null stdout while the program runs. */
int luadiff_program(struct luadiff_rng *r, unsigned max_statements,
                    struct luadiff_stats *st, char *report, size_t cap);

/* Run one statement after the prelude (no generation); as luadiff_program. */
int luadiff_statement(const char *text, struct luadiff_stats *st, char *report, size_t cap);

#endif
