/*
 * charge.h - what a chunk's work costs beyond its VM instructions: every
 * rate of the instruction budget's charges, in one place.
 *
 * max_reductions counts VM instructions (a count hook) plus the charges
 * defined here, so that it bounds all the CPU a chunk can use.  A charge is
 * a count of work (bytes produced, values moved, ...) divided by its rate,
 * rounded down per event.  docs/protocol.md ("Limits") lists the same rates.
 *
 * Strings.  Every new string costs one reduction per CHARGE_STRING_BYTES
 * bytes of its length: whoever makes it (`..`, a library function, load's
 * lexer), as it is allocated.  Short strings (40 bytes or less, interned,
 * so made only when new) never cost anything: a string of fewer than
 * CHARGE_STRING_BYTES bytes costs nothing.
 *
 * This header depends on nothing of the worker: a program linked with the
 * stock liblua5.3 applies the same charges to measure what a chunk needs
 * (see "Measuring with stock Lua" below).
 *
 * Measuring with stock Lua.  The charges of a chunk run by stock lua5.3
 * are those its allocator sees: in a lua_Alloc, a new string is a block
 * with ptr == NULL and osize == LUA_TSTRING, of charge_string_header() +
 * length + 1 bytes; add charge_string(length) for each.  Count from the
 * moment the chunk starts running (its own compilation is not charged),
 * and add the instructions counted by a count hook of period 1.
 */
#ifndef SANDBOXD_CHARGE_H
#define SANDBOXD_CHARGE_H

#include <stddef.h>
#include <stdint.h>

#define CHARGE_STRING_BYTES 64      /* bytes of a new string per reduction */

/* The charge for a new string of len bytes. */
static inline uint64_t charge_string(size_t len)
{
    return (uint64_t)(len / CHARGE_STRING_BYTES);
}

/* The bytes of a string's block besides its length + 1 (the header of the
 * Lua this is linked with), measured in a state of its own; 0 if no state
 * could be made. */
size_t charge_string_header(void);

#endif
