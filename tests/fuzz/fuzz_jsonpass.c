/*
 * fuzz_jsonpass.c - proto/jsonpass: validation without a tree must accept
 * exactly what jansson accepts, whatever the chunk size; walking and
 * splicing a validated text must give back the same JSON, and so must
 * loading it with jb_load.
 *
 * Input layout:
 *   byte 0   the chunk size given to jp_validate (1 + byte % 64)
 *   rest     the text
 * Checks: jp_validate(text, chunk) == 0 exactly when json_loadb(text,
 * JSON_DECODE_ANY | JSON_ALLOW_NUL) succeeds.  For a valid container, its
 * members walked with jp_iter and put back with jp_dump_spliced (each member
 * value spliced raw) parse equal to the original, unless the text holds a
 * splice token itself (then the splice is refused, never wrong).  jb_load
 * of a valid text equals jansson's tree.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "worker/jsonbig.h"
#include "proto/jsonpass.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t je;
    json_t *ref, *rebuilt, *back, *loaded;
    const char *s = (const char *)data + 1;
    size_t n, chunk;
    struct jp_iter it;
    struct jp_span k, v;
    struct jp_splice sp[16];
    unsigned i = 0;
    char *out;
    size_t olen;

    if (size < 1)
        return 0;
    chunk = 1 + data[0] % 64;
    n = size - 1;
    ref = json_loadb(s, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if ((jp_validate(s, n, chunk) == 0) != (ref != NULL))
        abort();
    loaded = jb_load(s, n, chunk);          /* any text: stays within bounds */
    if (ref && (!loaded || !json_equal(loaded, ref)))
        abort();
    json_decref(loaded);
    if (!ref || jp_iter_init(&it, jp_trim(s, n)) < 0) {
        json_decref(ref);
        return 0;
    }
    rebuilt = json_is_object(ref) ? json_object() : json_array();
    while (i < 16 && jp_iter_next(&it, &k, &v)) {
        sp[i].raw = v;
        if (json_is_object(ref)) {
            json_t *key = jp_key(k);
            if (!json_is_string(key))
                abort();
            json_object_set_new(rebuilt, json_string_value(key), jp_token(i));
            json_decref(key);
        } else {
            json_array_append_new(rebuilt, jp_token(i));
        }
        i++;
    }
    if (i < 16 && (!json_is_object(ref) || json_object_size(rebuilt) == i)) {
        out = jp_dump_spliced(rebuilt, sp, i, &olen);
        if (!out) {             /* only when the text itself holds a token */
            if (!memmem(s, n, "sbx-splice-", 11))
                abort();
            json_decref(rebuilt);
            json_decref(ref);
            return 0;
        }
        back = json_loadb(out, olen, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        if (!back || !json_equal(back, ref))
            abort();
        json_decref(back);
        free(out);
    }
    json_decref(rebuilt);
    json_decref(ref);
    return 0;
}
