/*
 * fuzz_luadiff.c - the worker's Lua library against stock Lua 5.3: the
 * differential test of tests/diff/luadiff.h, open-ended.
 *
 * Input: the generator's choices, one byte each (zeros once used up): which
 * function, caller and arguments each statement has.  A program of up to 40
 * statements runs in stock Lua (luaL_openlibs) and in the worker's
 * environment (worker/luaenv.c) with counting on and off; any statement
 * whose value, error or metamethod log differs is a contract violation.
 */
#include <stddef.h>
#include <stdint.h>

#include "tests/diff/luadiff.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct luadiff_rng r;
    struct luadiff_stats st = {0};
    char report[4096];

    luadiff_rng_bytes(&r, data, size);
    CHECK(luadiff_program(&r, 40, &st, report, sizeof report) == 0, "\n%s", report);
    return 0;
}
