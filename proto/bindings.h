/* Runs in: shared */
/*
 * bindings.h - globals carried between executions as plain data.
 *
 * The bindings value is opaque to clients but is ordinary JSON: an array of
 * [name, value] pairs sorted by name (bytewise), `[]` meaning fresh state.
 * Values use a typed encoding that restores exactly what was saved:
 *
 *   true / false            JSON boolean
 *   integer                 JSON integer
 *   string, valid UTF-8     JSON string (NUL allowed: \u0000, so a jansson
 *                           reader needs JSON_ALLOW_NUL)
 *   string, other bytes     ["b", "<base64>"]
 *   float                   ["f", "<C99 hex float, e.g. 0x1.8p+1, or inf, -inf, nan, -nan>"]
 *   table                   ["t", [[key, value], ...]]   (keys encoded the same way)
 *
 * Exported table entries are sorted by key (booleans, integers, floats,
 * strings; strings bytewise), so equal data gives byte-equal JSON.  Floats
 * are written with "%a" (exact, -0.0 and the sign of NaN kept; NaN payloads
 * are not); "b" is padded standard base64 (RFC 4648 section 4).  Both assume
 * the C locale (LC_NUMERIC) and restore rejects anything but that canonical
 * form: unpadded or non-zero-tail base64, decimal or uppercase floats, a
 * bare JSON real, null, an object, a table or NaN as a key.
 *
 * What export keeps and how restore sets it: worker/bindings_lua.h.  This
 * header is the format alone, with no Lua: the supervisor reads the names
 * (bindings_names, bindings_names_text), the worker checks and walks a
 * value it restores (bindings_check, bindings_walk) and encodes bytes
 * (bindings_b64_string), and all of them apply the same code.
 */
#ifndef SANDBOXD_BINDINGS_H
#define SANDBOXD_BINDINGS_H

#include <jansson.h>
#include <stddef.h>

/* Tables nest at most this deep: a global's own table is at depth 1
 * (worker/codec.h's CODEC_MAX_DEPTH, the same number). */
#define BINDINGS_MAX_DEPTH 100

/* 0 when b is well-formed bindings (the whole value), else -1 with *err
 * set ("malformed bindings: ..."). */
int bindings_check(const json_t *b, const char **err);

/* What bindings_walk() hands over, in document order: each value once
 * (a table's entries as key, value, then entry()), ctx passed on. */
struct bindings_sink {
    void (*boolean)(void *ctx, int b);
    void (*integer)(void *ctx, json_int_t i);
    void (*number)(void *ctx, double d);                    /* an "f" value */
    void (*string)(void *ctx, const char *s, size_t len);   /* a plain string */
    /* a "b" value: n bytes, which bindings_b64_decode(b64, len, dst) writes */
    void (*bytes)(void *ctx, const char *b64, size_t len, size_t n);
    /* a "t" value: a new table, seq entries 1..seq and rest others (hints) */
    void (*table)(void *ctx, size_t seq, size_t rest);
    /* the key and the value just handed over belong to the table below them */
    void (*entry)(void *ctx);
};

/* Hand the stored value v (one pair's second member) to sk.  v must come
 * from bindings that bindings_check() accepted: then it returns 0; else -1
 * with *err set, after some values were handed over. */
int bindings_walk(const json_t *v, const struct bindings_sink *sk, void *ctx, const char **err);

/* Padded standard base64 (RFC 4648 section 4) of n bytes: its length, and
 * a new JSON string holding it (NULL on allocation failure). */
size_t bindings_b64_len(size_t n);
json_t *bindings_b64_string(const unsigned char *in, size_t n);

/* Decode in[0..n) into out, which holds the decoded length, or validate
 * only when out is NULL.  Strict: padded to a multiple of 4, alphabet
 * characters only, '=' only as the last one or two, and the unused bits
 * of a padded group zero (so each byte string has one encoding).  Returns
 * the decoded length or BINDINGS_B64_BAD. */
#define BINDINGS_B64_BAD ((size_t)-1)
size_t bindings_b64_decode(const char *in, size_t n, unsigned char *out);

/* The names held by bindings b, as a new JSON array of strings in stored
 * order; NULL with *err set when b is malformed. */
json_t *bindings_names(const json_t *b, const char **err);

/* The same for bindings as text s[0..n), which must be valid JSON (the
 * supervisor's large messages pass proto/jsonpass first): the checks of
 * bindings_names() in one pass, no tree built.  On success *out is a new
 * malloc'd JSON array text of *outlen bytes (not NUL-terminated), the
 * names as they are written in s (so at most n + 2 bytes); returns 0, or
 * -1 with *err set. */
int bindings_names_text(const char *s, size_t n, char **out, size_t *outlen, const char **err);

#endif
