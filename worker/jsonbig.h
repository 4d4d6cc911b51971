/* Runs in: worker */
/*
 * jsonbig.h - trees of JSON that holds long strings: loaded and dumped with
 * each long string handled in one pass.
 *
 * jansson reads a string a byte at a time into a growing buffer and copies
 * it again into the string, and writes one out piece by piece; for a value
 * or a binding of megabytes that is most of a worker's time.  These two
 * functions give the same trees and the same JSON as json_loadb and
 * json_dumps, and hand every part that is not a long string to jansson.
 *
 * Ownership: jb_load returns a new reference; jb_dump a malloc'd buffer.
 */
#ifndef SANDBOXD_JSONBIG_H
#define SANDBOXD_JSONBIG_H

#include <jansson.h>
#include <stddef.h>

/* The tree of s[0..n), text that jp_validate() accepted (the supervisor
 * validates everything it sends a worker), equal to what
 * json_loadb(JSON_DECODE_ANY | JSON_ALLOW_NUL) gives: containers larger
 * than `chunk` are walked here (their runs of small members parsed by
 * jansson together), string values larger than `chunk` are decoded with
 * memcpy between the escapes.  NULL when out of memory.  Text that
 * jp_validate() would refuse gives NULL or some tree, and is never read
 * outside s[0..n). */
json_t *jb_load(const char *s, size_t n, size_t chunk);

/* Serialise the object or array v compactly, as json_dumps(JSON_COMPACT)
 * would in value, but with up to 16 string values longer than `big` bytes
 * quoted by jp_quote and spliced in.  v is unchanged afterwards.  A
 * malloc'd buffer of *len bytes, or NULL when out of memory. */
char *jb_dump(json_t *v, size_t big, size_t *len);

#endif
