/* Runs in: supervisor, zygote, worker, sandboxctl */
/*
 * jsonpass.h - JSON the supervisor passes on as bytes instead of building it.
 *
 * A value the supervisor only forwards (bindings, a tool's answer, a chunk's
 * value) need not become a jansson tree, which costs up to 45 times the text
 * (136 bytes for `[]`).  It must still be valid JSON within the bounds:
 *
 *  - jp_validate() accepts exactly what json_loadb(JSON_DECODE_ANY |
 *    JSON_ALLOW_NUL) accepts (jansson 2.14: UTF-8, escapes and surrogate
 *    pairs, no NUL in keys, integers within json_int_t, reals that do not
 *    overflow, nesting of at most JP_MAX_DEPTH containers, nothing after the
 *    value but whitespace), without building the whole: containers larger
 *    than `chunk` bytes are walked here and what they hold goes to jansson
 *    in runs of at most `chunk` bytes, each tree freed at once.  Memory is
 *    O(chunk) trees and time O(n), whatever the text holds.
 *  - The span helpers walk text that jp_validate() accepted (on other text
 *    they stay within bounds and report failure or stop).
 *  - jp_dump_spliced() serialises a tree in which some strings are splice
 *    tokens (jp_token()) and puts raw bytes in their place.  The tokens hold
 *    a per-process random nonce and are checked to occur exactly once.
 *
 * Ownership: spans borrow the text they point into.
 */
#ifndef SANDBOXD_JSONPASS_H
#define SANDBOXD_JSONPASS_H

#include <jansson.h>
#include <stddef.h>

#define JP_MAX_DEPTH 2048           /* jansson's JSON_PARSER_MAX_DEPTH */
#define JP_CHUNK     ((size_t)64 << 10)

struct jp_span {
    const char *p;
    size_t n;
};

/* 0 when s[0..n) is one JSON text jansson accepts, else -1.  chunk: the
 * largest piece given to jansson at once (JP_CHUNK; tests use tiny ones). */
int jp_validate(const char *s, size_t n, size_t chunk);

/* The span of s without leading and trailing whitespace. */
struct jp_span jp_trim(const char *s, size_t n);

/* Iterate the members of an object or the elements of an array (a trimmed
 * span of validated text).  jp_iter_init: 0 when v is a container.
 * jp_iter_next: 1 with *key (objects; the quoted key text) and *val set, 0
 * at the end. */
struct jp_iter {
    const char *s;
    size_t n, i;
    int obj;
};
int jp_iter_init(struct jp_iter *it, struct jp_span v);
int jp_iter_next(struct jp_iter *it, struct jp_span *key, struct jp_span *val);

/* The key text of an object member (quoted, validated) as a new string;
 * NULL when out of memory. */
json_t *jp_key(struct jp_span key);

/* The JSON string literal (quotes included) of s[0..n), which must be
 * valid UTF-8: '"', '\\' and control bytes escaped (\n, \t, ... or
 * \u00XX), everything else as it is: the bytes jansson writes, so a
 * string reads the same whichever of the two wrote it.  A new malloc'd
 * buffer of *len bytes, or NULL.  jansson escapes through snprintf byte by byte, seconds for
 * 16 MiB of control bytes; this is one table-driven pass. */
char *jp_quote(const char *s, size_t n, size_t *len);

/* A splice point: a tree holds jp_token(i) where raw[i] goes. */
struct jp_splice {
    struct jp_span raw;
};
/* A new string value that marks splice i (i < 16). */
json_t *jp_token(unsigned i);
/* Serialise v compactly with each token i replaced by sp[i].raw.  Returns a
 * malloc'd buffer (NUL-terminated, *len bytes), or NULL when out of memory
 * or when a token does not occur exactly once. */
char *jp_dump_spliced(const json_t *v, const struct jp_splice *sp, size_t nsp, size_t *len);

/* The value of the four hex digits at s[0..4) (a \u escape), or -1. */
long jp_hex4(const char *s);

/* Draw the splice tokens' nonce now (getrandom), before a seccomp filter
 * that forbids it; the tokens would otherwise draw it on first use. */
void jp_init(void);

#endif
