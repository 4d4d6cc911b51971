/*
 * charges.h - the reductions sandboxd bills for library work beyond the one
 * instruction of the call (docs/protocol.md, section 4, max_reductions), as
 * the precision harness (measure.c) adds them to stock Lua's instruction
 * count.
 *
 * charges_install(L, total) changes the library functions in the globals of
 * L so that each call adds its documented charge to *total; a rate of zero
 * leaves the function as it is.  charges_rates is a short text naming the
 * rates in force: it is part of the key under which measurements are cached
 * (tests/precision/needs.json), so changing a rate re-measures every program.
 */
#ifndef PRECISION_CHARGES_H
#define PRECISION_CHARGES_H

#include <stdint.h>

#include <lua.h>

void charges_install(lua_State *L, uint64_t *total);

extern const char charges_rates[];

#endif
