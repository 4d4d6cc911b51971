/*
 * fuzz_ndjson_rpc.c - the client-facing parsers: proto/ndjson (framing) and
 * proto/jsonrpc (classification), driven the way daemon/conn.c drives them.
 *
 * Input layout:
 *   byte 0   bits 0-2: how chunk sizes are drawn (fuzz_util.h);
 *            bits 3-5: max_line of the main reader (4096 ... 0)
 *   byte 1   seed for the split points; also picks the tiny max_line
 *   rest     the byte stream a client sends
 *
 * The stream is fed twice: to a reader with the chosen max_line, in chunks,
 * and to a reader with a tiny max_line (0..16), in other chunks.  Both are
 * drained with ndjson_next() after every feed.  Checks:
 *  - every event equals what a straightforward reference model of the
 *    contract in ndjson.h predicts for the whole stream (so the result does
 *    not depend on how the bytes were split);
 *  - a LINE is at most max_line bytes, holds no '\n', is not blank;
 *  - after each drain, ndjson_pending() <= max_line + 1, and at the end it is
 *    exactly the unfinished line (0 if that is too long);
 *  - the buffer never grows beyond what one maximal line plus one read needs.
 * This build sets RPC_PASS_MIN low (build.sh), so lines above it take the
 * pass-through path (validated without a tree, bindings and result kept as
 * text): its verdict must be jansson's, and the raw members must parse to
 * the members jansson builds.
 * rpc_scan_id() on every line gives a string or an integer or nothing, and
 * on a line that parses as an object, exactly its usable id.
 * Every line of the main reader goes through rpc_parse(); the fields of the
 * result are checked against jsonrpc.h, and the replies the daemon would
 * build from it (rpc_error_new / rpc_errorf_new / rpc_result_new /
 * rpc_request_new) are serialised with rpc_dump_line() and must read back
 * equal, as exactly one NDJSON line.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "proto/jsonrpc.h"
#include "proto/ndjson.h"
#include "tests/fuzz/fuzz_util.h"

#define INBUF_MIN_CAP 256   /* proto/inbuf.c's first allocation */

/* ----------------------------------------------------------- reference */

enum { EV_LINE = 1, EV_TOO_LONG = 2 };

struct event {
    int kind;
    const char *p;
    size_t len;
};

struct model {
    struct event *ev;
    size_t n, cap;
    size_t pending;     /* expected ndjson_pending() at the end */
};

static void model_add(struct model *m, int kind, const char *p, size_t len)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 64;
        m->ev = realloc(m->ev, m->cap * sizeof *m->ev);
        if (m->ev == NULL)
            abort();
    }
    m->ev[m->n].kind = kind;
    m->ev[m->n].p = p;
    m->ev[m->n].len = len;
    m->n++;
}

static int blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t')
            return 0;
    return 1;
}

/* The events of the whole stream, straight from the contract's wording. */
static void model_build(struct model *m, const char *d, size_t n, size_t max_line)
{
    size_t start = 0;

    m->n = 0;
    for (;;) {
        const char *nl = memchr(d + start, '\n', n - start);
        size_t len;

        if (nl == NULL)
            break;
        len = (size_t)(nl - (d + start));
        if (len > 0 && d[start + len - 1] == '\r')
            len--;
        if (len > max_line)
            model_add(m, EV_TOO_LONG, NULL, 0);
        else if (!blank(d + start, len))
            model_add(m, EV_LINE, d + start, len);
        start = (size_t)(nl - d) + 1;
    }
    /* The unfinished line: known too long once it holds more than
     * max_line + 1 bytes, or max_line + 1 bytes whose last is not '\r'. */
    {
        size_t t = n - start;

        if (t > max_line + 1 || (t == max_line + 1 && d[n - 1] != '\r')) {
            model_add(m, EV_TOO_LONG, NULL, 0);
            m->pending = 0;
        } else {
            m->pending = t;
        }
    }
}

/* ------------------------------------------------------------- JSON-RPC */

static int id_usable(const json_t *id)
{
    return json_is_string(id) || json_is_integer(id);
}

static int string_is_2_0(const json_t *r)
{
    const json_t *v = json_object_get(r, "jsonrpc");

    return json_is_string(v) && json_string_length(v) == 3
        && memcmp(json_string_value(v), "2.0", 3) == 0;
}

/* Serialise a reply as the daemon does and read it back. */
static void check_reply(json_t *reply)
{
    size_t len = 0;
    char *text;
    json_t *back, *err;
    json_error_t je;

    CHECK(reply != NULL, "reply constructor returned NULL");
    CHECK(string_is_2_0(reply), "reply without jsonrpc 2.0");
    text = rpc_dump_line(reply, &len);
    CHECK(text != NULL, "rpc_dump_line failed");
    CHECK(len >= 2 && text[len - 1] == '\n' && text[len] == '\0', "line not terminated");
    CHECK(memchr(text, '\n', len - 1) == NULL, "raw newline inside a reply line");
    CHECK(memchr(text, '\0', len) == NULL, "NUL inside a reply line");
    back = json_loadb(text, len - 1, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    CHECK(back != NULL, "reply does not parse back: %s: %.200s", je.text, text);
    CHECK(json_equal(back, reply), "reply changed in a round trip: %.200s", text);
    err = json_object_get(reply, "error");
    if (err != NULL) {
        json_t *data = json_object_get(err, "data");
        const char *kind = json_string_value(json_object_get(data, "kind"));

        CHECK(json_is_object(data) && kind != NULL, "error without data.kind");
        CHECK(rpc_kind_known(kind), "unknown kind %s", kind);
        CHECK(json_integer_value(json_object_get(err, "code")) == rpc_kind_code(kind),
              "code does not match kind %s", kind);
        CHECK(json_is_string(json_object_get(err, "message")), "message not a string");
    }
    json_decref(back);
    free(text);
    json_decref(reply);
}

/* A kind from fuzzed text: the one it names, else one out of range (which
 * rpc_error_new must turn into internal_error). */
static enum rpc_kind kind_of(const char *name)
{
    enum rpc_kind k;

    return rpc_kind_parse(name, &k) ? k : (enum rpc_kind)RPC_E_COUNT;
}

/* rpc_error_new() with data shared with the parsed message: the message's
 * own object must not change (data is copied shallowly before "kind"). */
static void check_error_shared(json_t *id, enum rpc_kind kind, const char *message, json_t *data)
{
    json_t *kind_before = json_is_object(data) ? json_object_get(data, "kind") : NULL;
    size_t size_before = json_is_object(data) ? json_object_size(data) : 0;

    check_reply(rpc_error_new(id, kind, message, data ? json_incref(data) : NULL));
    if (json_is_object(data)) {
        CHECK(json_object_get(data, "kind") == kind_before, "shared data object changed");
        CHECK(json_object_size(data) == size_before, "shared data object grew");
    }
}

static void rpc_line(const char *line, size_t len)
{
    struct rpc_msg m;
    char *cstr;
    json_t *id;

    rpc_parse(line, len, &m);
    id = m.root && json_is_object(m.root) ? json_object_get(m.root, "id") : NULL;
    {
        /* the id a refusal would carry: for a line that parses, the one
         * the parse found (a string or an integer) */
        json_t *scanned = rpc_scan_id(line, len);
        CHECK(scanned == NULL || json_is_string(scanned) || json_is_integer(scanned),
              "scanned id of another type");
        if (m.root && json_is_object(m.root) && !m.raw_bindings.p && !m.raw_result.p)
            CHECK(id_usable(id) ? scanned && json_equal(scanned, id) : scanned == NULL,
                  "scanned id differs from the parsed one");
        json_decref(scanned);
    }
    if (len > RPC_PASS_MIN) {   /* the pass-through path: same verdict, same bytes */
        json_error_t je;
        json_t *ref = json_loadb(line, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je), *rb;
        CHECK((m.type == RPC_PARSE_ERROR) == (ref == NULL) || m.too_dense,
              "large line: verdict differs from jansson");
        if (ref && m.raw_bindings.p) {
            rb = json_loadb(m.raw_bindings.p, m.raw_bindings.n, JSON_DECODE_ANY | JSON_ALLOW_NUL,
                            &je);
            CHECK(rb && json_equal(rb, json_object_get(json_object_get(ref, "params"), "bindings")),
                  "raw bindings differ from the parsed member");
            json_decref(rb);
        }
        if (ref && m.raw_result.p && m.type == RPC_RESPONSE) {
            rb = json_loadb(m.raw_result.p, m.raw_result.n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
            CHECK(rb && json_equal(rb, json_object_get(ref, "result")),
                  "raw result differs from the parsed member");
            json_decref(rb);
        }
        json_decref(ref);
    }
    switch (m.type) {
    case RPC_PARSE_ERROR:
        CHECK(m.root == NULL && m.why != NULL, "PARSE_ERROR fields");
        CHECK(m.id == NULL && m.method == NULL, "PARSE_ERROR fields");
        check_reply(rpc_errorf_new(NULL, RPC_E_PARSE_ERROR, NULL, "parse error: %s", m.why));
        break;
    case RPC_INVALID:
        CHECK(m.root != NULL && m.why != NULL, "INVALID fields");
        CHECK(m.id == NULL || (m.id == id && id_usable(m.id)), "INVALID id");
        if (json_is_object(m.root) && id_usable(id))
            CHECK(m.id == id, "INVALID lost a usable id");
        check_reply(rpc_errorf_new(m.id, RPC_E_INVALID_REQUEST, NULL, "invalid request: %s", m.why));
        break;
    case RPC_REQUEST:
    case RPC_NOTIFICATION:
        CHECK(json_is_object(m.root) && string_is_2_0(m.root), "call without jsonrpc 2.0");
        CHECK(m.method != NULL, "call without method");
        CHECK(json_is_string(json_object_get(m.root, "method")) &&
              strlen(m.method) == json_string_length(json_object_get(m.root, "method")),
              "method with NUL accepted");
        CHECK(m.params == NULL || json_is_object(m.params) || json_is_array(m.params),
              "params type");
        CHECK(m.params == json_object_get(m.root, "params"), "params not the member");
        if (m.type == RPC_REQUEST) {
            CHECK(id != NULL && id_usable(id) && m.id == id, "REQUEST id");
            check_reply(rpc_result_new(m.id, m.params ? json_incref(m.params) : json_null()));
            /* the line itself as an error message: not necessarily UTF-8 */
            cstr = strndup(line, len);
            if (cstr == NULL)
                abort();
            check_error_shared(m.id, kind_of(m.method), cstr, m.params);
            free(cstr);
        } else {
            CHECK(id == NULL && m.id == NULL, "NOTIFICATION with id");
            check_reply(rpc_request_new(NULL, m.method, m.params ? json_incref(m.params) : NULL));
        }
        break;
    case RPC_RESPONSE:
        CHECK(json_is_object(m.root) && string_is_2_0(m.root), "response without jsonrpc 2.0");
        CHECK(json_object_get(m.root, "method") == NULL, "response with method");
        CHECK(m.id != NULL && m.id == id && id_usable(m.id), "RESPONSE id");
        CHECK((m.result == NULL) != (m.error == NULL), "RESPONSE result/error");
        if (m.error != NULL)
            CHECK(json_is_object(m.error) &&
                  json_is_integer(json_object_get(m.error, "code")) &&
                  json_is_string(json_object_get(m.error, "message")), "RESPONSE error shape");
        check_error_shared(m.id, RPC_E_TOOL_ABORTED, NULL, m.error ? m.error : m.result);
        break;
    default:
        CHECK(0, "unknown rpc type %d", (int)m.type);
    }
    rpc_msg_clear(&m);
    CHECK(m.root == NULL, "rpc_msg_clear left root");
}

/* ------------------------------------------------------------- framing */

static void run_reader(const char *d, size_t n, size_t max_line, struct splitter *sp,
                       int parse, struct model *m)
{
    struct ndjson_reader rd;
    size_t off = 0, k = 0, max_chunk = 0;

    model_build(m, d, n, max_line);
    ndjson_init(&rd, max_line);
    while (off < n) {
        size_t chunk = splitter_next(sp, n - off);
        size_t bound;
        enum ndjson_status st;
        const char *line;
        size_t len;

        CHECK(ndjson_feed(&rd, d + off, chunk) == 0, "ndjson_feed failed");
        off += chunk;
        /* the buffer never shrinks: bound it by the largest read so far */
        max_chunk = chunk > max_chunk ? chunk : max_chunk;
        bound = 2 * (max_line + 2 + max_chunk);
        CHECK(rd.in.cap <= (bound > INBUF_MIN_CAP ? bound : INBUF_MIN_CAP),
              "buffer cap %zu for max_line %zu, chunk %zu", rd.in.cap, max_line, chunk);
        CHECK(ndjson_pending(&rd) <= max_line + 2 + chunk,
              "held %zu after one feed", ndjson_pending(&rd));
        while ((st = ndjson_next(&rd, &line, &len)) != NDJSON_AGAIN) {
            CHECK(k < m->n, "extra event %d (max_line %zu)", (int)st, max_line);
            if (st == NDJSON_LINE) {
                CHECK(line != NULL, "LINE with NULL");
                CHECK(len <= max_line, "line of %zu > max_line %zu", len, max_line);
                CHECK(memchr(line, '\n', len) == NULL, "newline inside a line");
                CHECK(!blank(line, len), "blank line delivered");
                CHECK(m->ev[k].kind == EV_LINE && m->ev[k].len == len &&
                      memcmp(m->ev[k].p, line, len) == 0,
                      "event %zu: got LINE of %zu, model kind %d len %zu", k, len,
                      m->ev[k].kind, m->ev[k].len);
                if (parse)
                    rpc_line(line, len);
            } else {
                CHECK(st == NDJSON_TOO_LONG, "bad status %d", (int)st);
                CHECK(line == NULL && len == 0, "TOO_LONG with a line");
                CHECK(m->ev[k].kind == EV_TOO_LONG, "event %zu: got TOO_LONG, model LINE", k);
            }
            k++;
        }
        CHECK(line == NULL && len == 0, "AGAIN with a line");
        CHECK(ndjson_pending(&rd) <= max_line + 1,
              "unfinished line of %zu held, max_line %zu", ndjson_pending(&rd), max_line);
    }
    CHECK(k == m->n, "%zu events, model %zu (max_line %zu)", k, m->n, max_line);
    CHECK(ndjson_pending(&rd) == m->pending, "pending %zu, model %zu",
          ndjson_pending(&rd), m->pending);
    ndjson_free(&rd);
    CHECK(rd.in.buf == NULL && ndjson_pending(&rd) == 0, "ndjson_free left bytes");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const size_t max_lines[8] = {4096, 4096, 1024, 64, 16, 8, 1, 0};
    static struct model m;
    struct splitter sp;

    if (size < 2)
        return 0;
    splitter_init(&sp, data[0], data[1]);
    run_reader((const char *)data + 2, size - 2, max_lines[data[0] >> 3 & 7], &sp, 1, &m);
    /* a tiny reader with other split points */
    splitter_init(&sp, (uint8_t)(data[1] ^ 0x5a), (uint8_t)(data[0] + 1));
    run_reader((const char *)data + 2, size - 2, data[1] % 17, &sp, 0, &m);
    return 0;
}
