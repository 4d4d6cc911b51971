/* Runs in: shared */
/*
 * utf8.h - the UTF-8 rules of JSON strings, with no Lua: the supervisor
 * applies them to a client's and a worker's text, the worker's codec
 * (worker/codec.h) to Lua strings, so both sides agree byte for byte.
 *
 * Well-formed means RFC 3629: no overlong forms, no surrogates
 * (U+D800..U+DFFF), nothing above U+10FFFF, no truncated sequence; NUL is
 * allowed.  A repair puts one U+FFFD in place of each byte that does not
 * belong to a well-formed sequence.
 *
 * Ownership: utf8_repair returns a malloc'd buffer the caller frees;
 * utf8_string_new a new reference.  Nothing keeps state.
 */
#ifndef SANDBOXD_UTF8_H
#define SANDBOXD_UTF8_H

#include <jansson.h>
#include <stddef.h>

/* 1 if s[0..len) is well-formed UTF-8, else 0.  The same test decides what
 * utf8_string_new repairs and what bindings store as bytes. */
int utf8_valid(const char *s, size_t len);

/* The length of s[0..len) without an incomplete UTF-8 sequence at its end
 * (a lead byte followed by fewer continuation bytes than it needs, at most
 * 3 bytes in all), so that a text cut there never splits a character: for
 * well-formed s, s[0..result) is well-formed and the rest is the beginning
 * of one character.  Bytes that are not UTF-8 at all are left in place
 * (utf8_string_new repairs them).  Used to stream output in pieces. */
size_t utf8_complete(const char *s, size_t len);

/* Return a new JSON string for the bytes s[0..len), repaired when they are
 * not well-formed.  NULL only on allocation failure. */
json_t *utf8_string_new(const char *s, size_t len);

/* Copy s[0..len) into a new malloc'd buffer, repaired (and with NUL
 * repaired too when nul_bad: jansson cannot read NUL in an object key);
 * *outlen gets its length.  NULL on allocation failure. */
char *utf8_repair(const char *s, size_t len, int nul_bad, size_t *outlen);

/* Approximate size of s as a JSON string after repair and escaping: the
 * quotes, 3 bytes per invalid byte (U+FFFD), 6 per control character
 * (\u00XX; an overestimate for \n and friends), 2 for '"' and '\\'. */
size_t utf8_json_cost(const char *s, size_t len);

#endif
