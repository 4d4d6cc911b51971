/* Runs in: worker */
/*
 * hint.h - whether a chunk that failed to compile ends in a bare expression.
 *
 * Runs in the untrusted worker, after containment, on the chunk's own text.
 * The syntax error's note "a bare expression is not a valid Lua statement"
 * is given only where it is true: the chunk compiles once `return ` is put
 * in front of it, or in front of one of the last few non-blank lines at or
 * before the line of the error (`x = 1\nx`).  A missing `end`, an unfinished
 * string or an unfinished expression compile in none of these, so they get
 * no note.
 *
 * Each trial compiles in a throwaway Lua state of its own with a bounded
 * allocator (HINT_HEAP bytes), closed before it returns: the job's state,
 * its limits, its counters and a session's globals are never touched, and a
 * trial the bound refuses counts as "no".  At most HINT_TRIALS compilations
 * of the chunk.
 */
#ifndef SANDBOXD_HINT_H
#define SANDBOXD_HINT_H

#include <stddef.h>

#define HINT_HEAP   ((size_t)8 << 20)   /* bytes one trial may allocate */
#define HINT_TRIALS 4                   /* the chunk's start + up to 3 lines */

/* 1 when `return ` in front of the chunk, or of one of the last non-blank
 * lines at or before `line` (1-based, as Lua counts lines; 0 = unknown),
 * makes code[0..len) compile; 0 otherwise. */
int hint_bare_expression(const char *code, size_t len, long line);

#endif
