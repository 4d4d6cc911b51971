/* Runs in: supervisor, sandboxctl */
/*
 * jsonrpc.h - JSON-RPC 2.0 message classification and construction.
 *
 * Contract:
 *  - rpc_parse() takes one NDJSON line and classifies it without trusting it:
 *    invalid JSON is RPC_PARSE_ERROR, a batch (array) or anything that is not
 *    a well-formed 2.0 request, notification or response is RPC_INVALID.
 *    Ids are accepted only as strings or integers.
 *  - Error objects always have {code, message, data} with data.kind set; the
 *    code is derived from the kind by rpc_kind_code() (docs/protocol.md §7).
 *  - Ownership follows jansson: *_new functions return a new reference the
 *    caller owns; "steal" parameters are consumed even on failure; "borrow"
 *    parameters are not.
 */
#ifndef SANDBOXD_JSONRPC_H
#define SANDBOXD_JSONRPC_H

#include <jansson.h>
#include <stddef.h>

#include "proto/jsonpass.h"

#ifndef RPC_PASS_MIN                    /* the fuzz build lowers it to reach parse_large */
#define RPC_PASS_MIN ((size_t)64 << 10)
#endif

enum rpc_type {
    RPC_PARSE_ERROR,    /* not JSON */
    RPC_INVALID,        /* JSON, but not a JSON-RPC 2.0 message we accept */
    RPC_REQUEST,        /* method + id */
    RPC_NOTIFICATION,   /* method, no id */
    RPC_RESPONSE,       /* id + exactly one of result/error, no method */
};

struct rpc_msg {
    enum rpc_type type;
    json_t     *root;       /* owned: the whole message (NULL for PARSE_ERROR) */
    json_t     *id;         /* borrowed from root; NULL if absent/unusable */
    const char *method;     /* borrowed; requests and notifications */
    json_t     *params;     /* borrowed; NULL if absent */
    json_t     *result;     /* borrowed; responses */
    json_t     *error;      /* borrowed; error responses (an object) */
    const char *why;        /* static text: why INVALID / PARSE_ERROR */
    int         too_dense;  /* PARSE_ERROR because its tree would exceed the budget */
    /* Lines above RPC_PASS_MIN bytes: params.bindings (an array) and a
     * response's result are validated but not built; the tree holds a
     * placeholder ([] and null) and the raw text is here (p NULL: not
     * passed through).  They point into the line: valid while it is. */
    struct jp_span raw_bindings;
    struct jp_span raw_result;
};

/* The longest string id (in bytes) a request may carry, and the longest
 * client-chosen string the daemon echoes in general (a tool's module, a
 * session id named in params): every tool/call and execution/output of an
 * execution repeats its id, so an unbounded one would make a client's few
 * bytes cost the daemon many times over (an 8 MiB id and 40 tool calls:
 * 3.5 s of supervisor CPU).  Integer ids are always short.  A longer one is
 * refused with invalid_params (methods.c), that answer echoing it once. */
#define RPC_ID_MAX 1024

/* Parse one line.  Always fills *msg; release with rpc_msg_clear().
 * Rules, in order: not JSON (jansson, JSON_DECODE_ANY | JSON_ALLOW_NUL:
 * invalid UTF-8, nesting deeper than 2048, integers beyond json_int_t) is
 * PARSE_ERROR; an array is INVALID ("batch requests are not supported");
 * a non-object is INVALID; "jsonrpc" must be exactly "2.0".  With "method"
 * (a string without NUL): "id", if present, a string or integer; "params",
 * if present, an object or array.  Without "method": a string or integer
 * "id" and exactly one of "result" and "error", the latter an object with
 * an integer "code" and a string "message".  Other members are ignored;
 * with duplicate keys the last one wins (jansson).  For INVALID, msg->id is
 * still set when the id member was a string or integer, so the error reply
 * can carry it; root is kept for every type but PARSE_ERROR.  A line above
 * RPC_PASS_MIN bytes is validated whole (proto/jsonpass) and only its
 * envelope is built: a batch is then INVALID with an empty array as root,
 * and params.bindings / result pass through (raw_bindings, raw_result). */
void rpc_parse(const char *line, size_t len, struct rpc_msg *msg);

/* The memory a parsed message may take: RPC_TREE_FACTOR times its size plus
 * RPC_TREE_FLOOR.  jansson spends about 136 bytes on an empty array and 40
 * on a small integer, so a line of `[[],[],...]` would cost 45 times its
 * size; past the budget the parse is refused instead. */
#define RPC_TREE_FACTOR 4
#define RPC_TREE_FLOOR  ((size_t)16 << 20)

/* json_loadb() whose allocations are counted against the budget for len
 * bytes (see above).  NULL on any error; *too_dense is then 1 when the
 * budget was the reason (err says "out of memory").  rpc_parse() uses it;
 * so does the supervisor for worker frames.  Not reentrant (one parse at a
 * time: the supervisor is single-threaded); it installs jansson allocation
 * functions that call malloc and free. */
json_t *rpc_loadb_bounded(const char *buf, size_t len, size_t flags, json_error_t *err,
                          int *too_dense);
/* The budget for a text of len bytes, and a parse that draws on a budget
 * shared by several parses (*budget is what is left afterwards). */
size_t  rpc_tree_budget(size_t len);
json_t *rpc_loadb_budget(const char *buf, size_t len, size_t flags, json_error_t *err,
                         size_t *budget, int *too_dense);
void rpc_msg_clear(struct rpc_msg *msg);

/* The envelope of a large object: its members built into a new object one
 * by one under *budget (rpc_loadb_budget), except those named in keep[],
 * whose values are left as text.  For each member whose name a row names:
 *  - first 0, or the value begins with `first` ('[' or '{'): *out is set to
 *    the value's span and the tree holds a placeholder (null, or an empty
 *    array or object), unless drop, which leaves the member out;
 *  - otherwise *out is cleared and the value is built like any other.
 * Later duplicates win, as in a tree.  v must be a validated object
 * (jp_validate, proto/jsonpass.h).  A new object, or NULL when out of
 * memory or (*dense set) over the budget.  Both sides use it: rpc_parse()
 * for a client's large line, the supervisor for a worker's large frame. */
struct rpc_keep {
    const char     *name;
    char            first;
    int             drop;
    struct jp_span *out;
};
json_t *rpc_envelope_new(struct jp_span v, const struct rpc_keep *keep, size_t nkeep,
                         size_t *budget, int *dense);

/* The id of a line the daemon refuses before it can classify it (not JSON,
 * too dense to parse, longer than max_message_bytes: then the line's first
 * bytes), so the refusal can carry it: one pass over the members of the
 * top-level object, values skipped by bracket count, stopping at the first
 * byte that cannot continue the object.  Returns a new reference to the
 * value of the last "id" member read, when it was read whole and is a
 * string or an integer; else NULL (answer with null).  O(n); builds
 * nothing but that id. */
json_t *rpc_scan_id(const char *s, size_t n);

/* Exact string tests for text a peer sent, which may hold "\u0000": a C
 * string view would end at the first NUL and take "id\u0000junk" for "id".
 * rpc_string_is(): s is a JSON string equal to text[0..n), length included.
 * rpc_cstring(): the value of s when it is a string without NUL (so the C
 * string is the whole of it), else NULL. */
int rpc_string_is(const json_t *s, const char *text, size_t n);
const char *rpc_cstring(const json_t *s);

/* The error kinds of docs/protocol.md section 7: the daemon names a kind by
 * its enumerator, so a misspelt one does not compile; jsonrpc.c's one table
 * gives each its name and code (describe reports it: rpc_kinds_new). */
enum rpc_kind {
    RPC_E_PARSE_ERROR,
    RPC_E_INVALID_REQUEST,
    RPC_E_MESSAGE_TOO_LARGE,
    RPC_E_METHOD_NOT_FOUND,
    RPC_E_INVALID_PARAMS,
    RPC_E_LIMIT_OUT_OF_RANGE,
    RPC_E_INTERNAL_ERROR,
    RPC_E_SYNTAX_ERROR,
    RPC_E_RUNTIME_ERROR,
    RPC_E_TIMEOUT,
    RPC_E_MEMORY_LIMIT,
    RPC_E_REDUCTIONS_LIMIT,
    RPC_E_CPU_LIMIT,
    RPC_E_CRASHED,
    RPC_E_CODE_TOO_LARGE,
    RPC_E_BUSY,
    RPC_E_FORBIDDEN,
    RPC_E_TOOL_ABORTED,
    RPC_E_BINDINGS_TOO_LARGE,
    RPC_E_SESSION_NOT_FOUND,
    RPC_E_TOOL_CALL_LIMIT,
    RPC_E_CANCELLED,
    RPC_E_COUNT
};
/* A kind's name ("internal_error" for a value out of range). */
const char *rpc_kind_name(enum rpc_kind kind);
/* The kind a name names: 1 and *kind set, or 0 for an unknown name (NULL
 * included).  For kinds that arrive as text (a worker's end frame). */
int rpc_kind_parse(const char *name, enum rpc_kind *kind);
/* The code of the kind a name names, 0 for an unknown name. */
int rpc_kind_code(const char *name);
/* Nonzero if name names one of the contract's kinds. */
int rpc_kind_known(const char *name);
/* Every kind with its code, {"parse_error": -32700, ...}: a new reference,
 * or NULL when out of memory.  describe reports it, so that clients' tables
 * are checked against the daemon's (tests/integration/test_error_kinds.py). */
json_t *rpc_kinds_new(void);

/* {"jsonrpc":"2.0","id":id,"result":result}.  id borrowed (NULL -> null),
 * result stolen; a NULL result (a failed constructor) gives NULL. */
json_t *rpc_result_new(json_t *id, json_t *result);
/* {"jsonrpc":"2.0","id":id,"error":{code,message,data}}.  id borrowed
 * (NULL -> null); data stolen (NULL -> {}); data.kind is set to kind.
 * data is copied shallowly before "kind" is added, so an object shared with
 * others is not changed; a non-object data is kept as data.value.  An
 * unknown kind becomes "internal_error"; message NULL means the kind's
 * name; a message that is not UTF-8 has its bytes >= 0x80 replaced by '?'.
 * NULL on allocation failure. */
json_t *rpc_error_new(json_t *id, enum rpc_kind kind, const char *message, json_t *data);
/* printf-style message convenience, data stolen (also on failure). */
json_t *rpc_errorf_new(json_t *id, enum rpc_kind kind, json_t *data, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* {"jsonrpc":"2.0","id":id,"method":method,"params":params}; id borrowed
 * (NULL -> notification), params stolen (may be NULL). */
json_t *rpc_request_new(json_t *id, const char *method, json_t *params);

/* Serialise msg compactly followed by '\n'.  Returns a malloc'd buffer the
 * caller owns (free() it) and its length in *len, or NULL.  The buffer is
 * also NUL-terminated.  Never emits invalid UTF-8 (jansson guarantees it
 * for strings it accepted), and never a raw newline before the last byte.
 * msg must be an object or array. */
char *rpc_dump_line(const json_t *msg, size_t *len);

#endif
