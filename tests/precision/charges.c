/*
 * charges.c - library-work charges for the precision harness (charges.h).
 *
 * docs/protocol.md documents no charge for library work: a call into a C
 * function counts as its one instruction.  So nothing is wrapped, and a
 * program's instruction need is stock Lua's instruction count alone.
 */
#include "tests/precision/charges.h"

const char charges_rates[] = "none";

void charges_install(lua_State *L, uint64_t *total)
{
    (void)L;
    (void)total;
}
