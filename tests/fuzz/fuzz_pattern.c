/* fuzz_pattern.c - libFuzzer target: the pattern functions
 * (worker/pattern.c) against the stock string library, through the
 * differential harness of tests/unit/pattern_diff.h.
 *
 * Input: byte 0 even, the rest drives the case generator (each byte a
 * choice), one case; byte 0 odd, the rest is a raw case (pd_raw: subject,
 * pattern and replacement bytes as given).  Any difference from stock (in
 * results, captures, replacement output, error message; counting on or off)
 * prints the case and aborts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tests/unit/pattern_diff.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct pd d;
    static int open;
    int bad;

    if (!open) {
        if (pd_open(&d) != 0)
            abort();
        open = 1;
    }
    if (size == 0)
        return 0;
    if (data[0] & 1) {
        bad = pd_raw(&d, data + 1, size - 1);
    } else {
        struct pd_src r = {data + 1, size - 1, 0, 0};

        bad = pd_case(&d, &r);
    }
    if (bad) {
        printf("contract violated: differs from stock\n");
        pd_report(&d, stdout);
        abort();
    }
    lua_gc(d.L, LUA_GCSTEP, 0);
    return 0;
}
