/*
 * charges.c - library-work charges for the precision harness (charges.h).
 *
 * docs/protocol.md documents no charge for library work: a call into a C
 * function counts as its one instruction.  So nothing is wrapped or
 * charged, and a program's reductions need is stock Lua's instruction count
 * alone.
 */
#include "tests/precision/charges.h"

const char charges_rates[] = "none";

void charges_install(lua_State *L, uint64_t *total)
{
    (void)L;
    (void)total;
}

void charges_running(int on)
{
    (void)on;
}

void charges_allocated(int fresh, size_t osize, size_t nsize)
{
    (void)fresh;
    (void)osize;
    (void)nsize;
}
