/*
 * charges.h - the reductions sandboxd bills for library work beyond the one
 * instruction of the call (docs/protocol.md, section 4, max_reductions), as
 * the precision harness (measure.c) adds them to stock Lua's instruction
 * count.
 *
 *   charges_install(L, total)  once the libraries are open: changes the
 *                              library functions in the globals of L so that
 *                              each call adds its charge to *total.
 *   charges_running(on)        the chunk starts (1) or ends (0) running:
 *                              what is charged by the allocation (new
 *                              strings) is charged only meanwhile, so the
 *                              chunk's own compilation costs nothing.
 *   charges_allocated(...)     called by the harness's allocator with every
 *                              growth it grants (fresh: a new block, osize
 *                              then its type tag).
 *   charges_rates              a short text naming where the rates are; the
 *                              measurement cache's key hashes that text and
 *                              the charge sources (tests/precision/harness.py),
 *                              so changing a rate re-measures every program.
 */
#ifndef PRECISION_CHARGES_H
#define PRECISION_CHARGES_H

#include <stddef.h>
#include <stdint.h>

#include <lua.h>

void charges_install(lua_State *L, uint64_t *total);
void charges_running(int on);
void charges_allocated(int fresh, size_t osize, size_t nsize);

extern const char charges_rates[];

#endif
