/*
 * jsonrpc.c - JSON-RPC 2.0 classification and construction.
 *
 * rpc_parse() checks the shape of a message and nothing else: it never
 * looks at what a method means or whether its params fit.  Every rule it
 * applies is listed in the comments of classify() and its helpers.
 */
#include "proto/jsonrpc.h"
#include "proto/mutant.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * Parsing
 * --------------------------------------------------------------------- */

/* A usable id: a string or an integer (JSON reals, null, booleans, arrays
 * and objects are not). */
static int id_usable(const json_t *id)
{
    return json_is_string(id) || json_is_integer(id);
}

int rpc_string_is(const json_t *s, const char *text, size_t n)
{
    if (MUTANT(ID_EXACT))               /* mutant: compared as C strings */
        return json_is_string(s) && strcmp(json_string_value(s), text) == 0;
    return json_is_string(s) && json_string_length(s) == n
        && memcmp(json_string_value(s), text, n) == 0;
}

const char *rpc_cstring(const json_t *s)
{
    const char *v = json_string_value(s);

    return v && strlen(v) == json_string_length(s) ? v : NULL;
}

/* A string member equal to text, byte for byte (so "2.0\u0000" is not). */
static int string_is(const json_t *s, const char *text)
{
    return rpc_string_is(s, text, strlen(text));
}

static enum rpc_type invalid(struct rpc_msg *msg, const char *why)
{
    msg->why = why;
    return RPC_INVALID;
}

/* "method" present: a request (with id) or a notification (without). */
static enum rpc_type classify_call(struct rpc_msg *msg, json_t *method)
{
    json_t *id = json_object_get(msg->root, "id");
    json_t *params = json_object_get(msg->root, "params");

    if (!json_is_string(method))
        return invalid(msg, "method must be a string");
    /* A NUL inside would make the C string name a different method. */
    if (!rpc_cstring(method))
        return invalid(msg, "method must not contain NUL");
    if (id != NULL && !id_usable(id))
        return invalid(msg, "id must be a string or an integer");
    if (params != NULL && !json_is_object(params) && !json_is_array(params))
        return invalid(msg, "params must be an object or an array");
    msg->method = json_string_value(method);
    msg->params = params;
    return id ? RPC_REQUEST : RPC_NOTIFICATION;
}

/* "error" of a response: an object with an integer code and a string
 * message; any "data" is accepted. */
static int error_well_formed(const json_t *error)
{
    return json_is_object(error)
        && json_is_integer(json_object_get(error, "code"))
        && json_is_string(json_object_get(error, "message"));
}

/* No "method": a response to one of our requests. */
static enum rpc_type classify_response(struct rpc_msg *msg)
{
    json_t *id = json_object_get(msg->root, "id");
    json_t *result = json_object_get(msg->root, "result");
    json_t *error = json_object_get(msg->root, "error");

    if (!id_usable(id))
        return invalid(msg, id ? "id must be a string or an integer"
                               : "message has neither method nor id");
    if ((result == NULL) == (error == NULL))
        return invalid(msg, "response must have exactly one of result and error");
    if (error != NULL && !error_well_formed(error))
        return invalid(msg, "error must be an object with integer code and string message");
    msg->result = result;
    msg->error = error;
    return RPC_RESPONSE;
}

static enum rpc_type classify(struct rpc_msg *msg)
{
    json_t *root = msg->root, *id, *method;

    if (json_is_array(root))
        return invalid(msg, "batch requests are not supported");
    if (!json_is_object(root))
        return invalid(msg, "message must be a JSON object");
    /* Known early so that even an invalid message's reply carries it. */
    id = json_object_get(root, "id");
    if (id_usable(id))
        msg->id = id;
    if (!string_is(json_object_get(root, "jsonrpc"), "2.0"))
        return invalid(msg, "jsonrpc must be \"2.0\"");
    method = json_object_get(root, "method");
    if (method != NULL)
        return classify_call(msg, method);
    return classify_response(msg);
}

/*
 * jansson flags: JSON_DECODE_ANY so that valid JSON which is not an object
 * ("1", "null") is INVALID rather than PARSE_ERROR, as JSON-RPC asks;
 * JSON_ALLOW_NUL so "\u0000" inside strings is kept (ids are echoed back
 * exactly).  Nothing else is relaxed: trailing data, invalid UTF-8, nesting
 * deeper than jansson's limit (2048) and integers beyond json_int_t are
 * parse errors.  Duplicate keys are accepted and the last one wins
 * (jansson's json_object_set replaces).
 */
/* The parse budget: allocations made while budget_on are counted (frees
 * are not: a parse only grows), and one past the budget fails, which makes
 * jansson give up with "out of memory" and free what it built. */
static int    budget_on, budget_hit;
static size_t budget_left;

static void *budget_malloc(size_t n)
{
    if (budget_on) {
        if (n > budget_left) {
            budget_hit = 1;
            return NULL;
        }
        budget_left -= n;
    }
    return malloc(n);
}

size_t rpc_tree_budget(size_t len)
{
    return len > (SIZE_MAX - RPC_TREE_FLOOR) / RPC_TREE_FACTOR ? SIZE_MAX
         : len * RPC_TREE_FACTOR + RPC_TREE_FLOOR;
}

/* The least jansson's allocator is asked for to build a valid text, by
 * what it holds outside its strings (jansson 2.14 on LP64): a container at
 * least RPC_CONTAINER_MIN (a json_array is 40 bytes and a table of 8
 * entries, a json_object more), a number RPC_NUMBER_MIN (a json_integer or
 * json_real), a string value RPC_STRING_MIN (a json_string and its bytes,
 * the quote at least).  A key costs nothing certain (a repeated one reuses
 * its entry), nor do true, false and null (shared).  A text whose floor
 * exceeds the budget cannot be built within it: it is refused before
 * jansson builds any of it (an invalid one is refused as too large, not
 * as a parse error). */
#define RPC_CONTAINER_MIN 64
#define RPC_NUMBER_MIN    24
#define RPC_STRING_MIN    33

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The floor of s[0..n) as above, saturating at SIZE_MAX.  One pass: a
 * string is a key when a ':' follows it, a number starts at '-' or a
 * digit just after a separator. */
static size_t tree_floor(const char *s, size_t n)
{
    size_t k = 0, add;

    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '"') {
            size_t j;
            for (i++; i < n && s[i] != '"'; i++)
                if (s[i] == '\\')
                    i++;
            for (j = i + 1; j < n && is_blank(s[j]); j++)
                ;
            add = j < n && s[j] == ':' ? 0 : RPC_STRING_MIN;
        } else if (c == '[' || c == '{') {
            add = RPC_CONTAINER_MIN;
        } else if ((c == '-' || (c >= '0' && c <= '9')) &&
                   (i == 0 || s[i - 1] == ',' || s[i - 1] == ':' || s[i - 1] == '[' ||
                    is_blank(s[i - 1]))) {
            add = RPC_NUMBER_MIN;
        } else {
            continue;
        }
        if (MUTANT(DENSE_SCALARS) && c != '[' && c != '{')
            add = 0;                    /* mutant: only containers count */
        k = add > SIZE_MAX - k ? SIZE_MAX : k + add;
    }
    return k;
}

json_t *rpc_loadb_budget(const char *buf, size_t len, size_t flags, json_error_t *err,
                         size_t *budget, int *too_dense)
{
    static int installed;
    json_t *v;

    /* A large text that cannot fit is refused before jansson builds up to
     * the whole budget of it: the supervisor's peak stays near the text.
     * (The mutant builds up to the budget first.) */
    if (!MUTANT(DENSE_EARLY) && len > RPC_PASS_MIN && tree_floor(buf, len) > *budget) {
        *too_dense = 1;
        if (err)
            snprintf(err->text, sizeof err->text, "out of memory");
        return NULL;
    }
    if (!installed) {
        json_set_alloc_funcs(budget_malloc, free);
        installed = 1;
    }
    budget_left = *budget;
    if (!MUTANT(TREE_BUDGET))
        budget_on = 1;
    budget_hit = 0;
    v = json_loadb(buf, len, flags, err);
    budget_on = 0;
    *budget = budget_left;
    *too_dense = budget_hit;
    if (budget_hit) {
        json_decref(v);
        v = NULL;
    }
    return v;
}

json_t *rpc_loadb_bounded(const char *buf, size_t len, size_t flags, json_error_t *err,
                          int *too_dense)
{
    size_t budget = rpc_tree_budget(len);

    return rpc_loadb_budget(buf, len, flags, err, &budget, too_dense);
}

/* A placeholder for a member kept as text: its kind, so the tree still
 * says what it holds. */
static json_t *placeholder(char first)
{
    return first == '[' ? json_array() : first == '{' ? json_object() : json_null();
}

json_t *rpc_envelope_new(struct jp_span v, const struct rpc_keep *keep, size_t nkeep,
                         size_t *budget, int *dense)
{
    json_t *obj = json_object(), *key, *val;
    json_error_t err;
    struct jp_iter it;
    struct jp_span k, m;

    if (!obj || jp_iter_init(&it, v) < 0)
        goto fail;
    while (jp_iter_next(&it, &k, &m)) {
        const struct rpc_keep *row = NULL;

        if (!(key = jp_key(k)))
            goto fail;
        for (size_t i = 0; i < nkeep && !row; i++)
            if (strcmp(json_string_value(key), keep[i].name) == 0)
                row = &keep[i];
        if (row && (!row->first || m.p[0] == row->first)) {
            *row->out = m;
            if (row->drop) {
                json_decref(key);
                continue;
            }
            val = placeholder(row->first);
        } else {
            if (row)
                *row->out = (struct jp_span){ NULL, 0 };
            val = rpc_loadb_budget(m.p, m.n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err, budget,
                                   dense);
        }
        if (!val || json_object_set_new(obj, json_string_value(key), val) < 0) {
            json_decref(key);
            goto fail;
        }
        json_decref(key);
    }
    return obj;
fail:
    json_decref(obj);
    return NULL;
}

/* A line above RPC_PASS_MIN: validated without a tree, then the envelope
 * is built member by member under one budget, params.bindings and result
 * kept as text. */
static void parse_large(const char *line, size_t len, struct rpc_msg *msg)
{
    size_t budget = rpc_tree_budget(len);
    struct jp_span v = jp_trim(line, len), params = { NULL, 0 };
    const struct rpc_keep top[] = {
        { "params", '{', 0, &params },
        { "result", 0, 0, &msg->raw_result },
    };
    const struct rpc_keep in_params[] = { { "bindings", '[', 0, &msg->raw_bindings } };
    json_error_t err;
    int dense = 0;

    msg->type = RPC_PARSE_ERROR;
    msg->why = "message is not valid JSON";
    if (jp_validate(line, len, JP_CHUNK) < 0)
        return;
    if (v.p[0] == '[') {                /* a batch: refused without building it */
        msg->root = json_array();
        msg->type = msg->root ? RPC_INVALID : RPC_PARSE_ERROR;
        msg->why = "batch requests are not supported";
        return;
    }
    if (v.p[0] != '{') {
        msg->root = rpc_loadb_budget(v.p, v.n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err, &budget,
                                     &dense);
    } else if ((msg->root = rpc_envelope_new(v, top, 2, &budget, &dense)) && params.p) {
        json_t *p = rpc_envelope_new(params, in_params, 1, &budget, &dense);

        if (!p || json_object_set_new(msg->root, "params", p) < 0) {
            json_decref(msg->root);
            msg->root = NULL;
        }
    }
    if (!msg->root) {
        msg->raw_bindings = msg->raw_result = (struct jp_span){ NULL, 0 };
        msg->too_dense = dense;
        if (dense)
            msg->why = "message holds more values than the daemon parses for its size";
        return;
    }
    msg->type = classify(msg);
    if (!msg->result)
        msg->raw_result = (struct jp_span){ NULL, 0 };
}

void rpc_parse(const char *line, size_t len, struct rpc_msg *msg)
{
    json_error_t err;
    int dense;

    memset(msg, 0, sizeof *msg);
    if (!MUTANT(PASS_THROUGH) && len > RPC_PASS_MIN) {  /* the mutant: every line a tree */
        parse_large(line, len, msg);
        return;
    }
    msg->root = rpc_loadb_bounded(line, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err, &dense);
    if (msg->root == NULL) {
        msg->type = RPC_PARSE_ERROR;
        msg->too_dense = dense;
        msg->why = dense ? "message holds more values than the daemon parses for its size"
                         : "message is not valid JSON";
        return;
    }
    msg->type = classify(msg);
}

/* ------------------------------------------------------------------------
 * The id of a refused line
 * --------------------------------------------------------------------- */

/* Index after the string opening at s[i], or n when it does not close. */
static size_t scan_string(const char *s, size_t n, size_t i)
{
    for (i++; i < n; i++) {
        if (s[i] == '\\')
            i++;
        else if (s[i] == '"')
            return i + 1;
    }
    return n;
}

/* Index after the value starting at s[i] (a string, a container matched by
 * bracket count outside strings, or a bare token), or n. */
static size_t scan_value(const char *s, size_t n, size_t i)
{
    size_t depth = 0;

    if (i >= n)
        return n;
    if (s[i] == '"')
        return scan_string(s, n, i);
    if (s[i] != '[' && s[i] != '{') {
        while (i < n && !is_blank(s[i]) && s[i] != ',' && s[i] != '}' && s[i] != ']' &&
               s[i] != ':' && s[i] != '"' && s[i] != '[' && s[i] != '{' && s[i] != '\0')
            i++;
        /* one NUL right after a bare token is dropped, as jansson does */
        return i < n && s[i] == '\0' ? i + 1 : i;
    }
    for (; i < n; i++) {
        if (s[i] == '"')
            i = scan_string(s, n, i) - 1;
        else if (s[i] == '[' || s[i] == '{')
            depth++;
        else if ((s[i] == ']' || s[i] == '}') && --depth == 0)
            return i + 1;
    }
    return n;
}

static size_t scan_blanks(const char *s, size_t n, size_t i)
{
    while (i < n && is_blank(s[i]))
        i++;
    return i;
}

json_t *rpc_scan_id(const char *s, size_t n)
{
    json_t *id = NULL;
    size_t i = scan_blanks(s, n, 0);

    if (i >= n || s[i] != '{')
        return NULL;
    for (i = scan_blanks(s, n, i + 1); i < n && s[i] == '"';) {
        size_t k = i, ke = scan_string(s, n, i), ve;
        json_t *key = NULL, *v;
        json_error_t err;

        /* "id" takes at most 14 bytes written ("\u0069\u0064") */
        if (ke < n && ke - k <= 14)
            key = json_loadb(s + k, ke - k, JSON_DECODE_ANY, &err);
        i = scan_blanks(s, n, ke);
        if (i >= n || s[i] != ':') {
            json_decref(key);
            break;
        }
        i = scan_blanks(s, n, i + 1);
        ve = scan_value(s, n, i);
        if (rpc_string_is(key, "id", 2)) {
            /* the last one wins, as in a parse: one that is cut, or not a
             * string or an integer, leaves no id */
            v = ve < n ? json_loadb(s + i, ve - i, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err) : NULL;
            json_decref(id);
            id = v && id_usable(v) ? v : NULL;
            if (v && !id)
                json_decref(v);
        }
        json_decref(key);
        i = scan_blanks(s, n, ve);
        if (i >= n || s[i] != ',')
            break;
        i = scan_blanks(s, n, i + 1);
    }
    return id;
}

void rpc_msg_clear(struct rpc_msg *msg)
{
    json_decref(msg->root);
    memset(msg, 0, sizeof *msg);
}

/* ------------------------------------------------------------------------
 * Error kinds (docs/protocol.md §7)
 * --------------------------------------------------------------------- */

static const struct {
    const char *kind;
    int code;
} kinds[RPC_E_COUNT] = {
    [RPC_E_PARSE_ERROR] = { "parse_error",        -32700 },
    [RPC_E_INVALID_REQUEST] = { "invalid_request",    -32600 },
    [RPC_E_MESSAGE_TOO_LARGE] = { "message_too_large",  -32600 },
    [RPC_E_METHOD_NOT_FOUND] = { "method_not_found",   -32601 },
    [RPC_E_INVALID_PARAMS] = { "invalid_params",     -32602 },
    [RPC_E_LIMIT_OUT_OF_RANGE] = { "limit_out_of_range", -32602 },
    [RPC_E_INTERNAL_ERROR] = { "internal_error",     -32603 },
    [RPC_E_SYNTAX_ERROR] = { "syntax_error",       -32001 },
    [RPC_E_RUNTIME_ERROR] = { "runtime_error",      -32002 },
    [RPC_E_TIMEOUT] = { "timeout",            -32003 },
    [RPC_E_MEMORY_LIMIT] = { "memory_limit",       -32004 },
    [RPC_E_REDUCTIONS_LIMIT] = { "reductions_limit",   -32005 },
    [RPC_E_CPU_LIMIT] = { "cpu_limit",          -32006 },
    [RPC_E_CRASHED] = { "crashed",            -32007 },
    [RPC_E_CODE_TOO_LARGE] = { "code_too_large",     -32008 },
    [RPC_E_BUSY] = { "busy",               -32009 },
    [RPC_E_FORBIDDEN] = { "forbidden",          -32010 },
    [RPC_E_TOOL_ABORTED] = { "tool_aborted",       -32011 },
    [RPC_E_BINDINGS_TOO_LARGE] = { "bindings_too_large", -32012 },
    [RPC_E_SESSION_NOT_FOUND] = { "session_not_found",  -32013 },
    [RPC_E_TOOL_CALL_LIMIT] = { "tool_call_limit",    -32014 },
    [RPC_E_CANCELLED] = { "cancelled",          -32800 },
};

const char *rpc_kind_name(enum rpc_kind kind)
{
    return (unsigned)kind < RPC_E_COUNT ? kinds[kind].kind : kinds[RPC_E_INTERNAL_ERROR].kind;
}

int rpc_kind_parse(const char *name, enum rpc_kind *kind)
{
    for (unsigned i = 0; name && i < RPC_E_COUNT; i++)
        if (strcmp(kinds[i].kind, name) == 0) {
            *kind = (enum rpc_kind)i;
            return 1;
        }
    return 0;
}

int rpc_kind_code(const char *name)
{
    enum rpc_kind k;

    return rpc_kind_parse(name, &k) ? kinds[k].code : 0;
}

int rpc_kind_known(const char *name)
{
    enum rpc_kind k;

    return rpc_kind_parse(name, &k);
}

json_t *rpc_kinds_new(void)
{
    json_t *o = json_object();

    for (size_t i = 0; o && i < sizeof kinds / sizeof kinds[0]; i++)
        if (json_object_set_new(o, kinds[i].kind, json_integer(kinds[i].code)) < 0) {
            json_decref(o);
            return NULL;
        }
    return o;
}

/* ------------------------------------------------------------------------
 * Construction
 * --------------------------------------------------------------------- */

/* {"jsonrpc":"2.0"} plus "id" when id is given (borrowed). */
static json_t *envelope(json_t *id)
{
    json_t *msg = json_object();

    if (msg == NULL)
        return NULL;
    if (json_object_set_new(msg, "jsonrpc", json_string("2.0")) < 0)
        goto fail;
    if (id != NULL && json_object_set(msg, "id", id) < 0)
        goto fail;
    return msg;
fail:
    json_decref(msg);
    return NULL;
}

json_t *rpc_result_new(json_t *id, json_t *result)
{
    json_t *msg;

    if (result == NULL)
        return NULL;    /* a failed constructor upstream: propagate */
    msg = envelope(id ? id : json_null());
    if (msg == NULL) {
        json_decref(result);
        return NULL;
    }
    if (json_object_set_new(msg, "result", result) < 0) {   /* consumes */
        json_decref(msg);
        return NULL;
    }
    return msg;
}

/* A JSON string for message, which is UTF-8 in the normal case.  If it is
 * not (text from a peer or from Lua), every byte >= 0x80 becomes '?' so
 * the reply is still valid UTF-8. */
static json_t *message_string(const char *message)
{
    json_t *s;
    char *copy, *p;

    s = json_string(message);
    if (s != NULL)
        return s;
    copy = strdup(message);
    if (copy == NULL)
        return NULL;
    for (p = copy; *p; p++)
        if ((unsigned char)*p >= 0x80)
            *p = '?';
    s = json_string(copy);
    free(copy);
    return s;
}

/* Make data (stolen; NULL allowed) an object we alone own, with "kind".
 * A shared object is copied shallowly rather than changed under its other
 * holders; a non-object is kept under "value". */
static json_t *error_data(json_t *data, const char *kind)
{
    json_t *obj;

    if (json_is_object(data)) {
        obj = json_copy(data);
        json_decref(data);
    } else {
        obj = json_object();
        if (obj != NULL && data != NULL && json_object_set(obj, "value", data) < 0) {
            json_decref(obj);
            obj = NULL;
        }
        json_decref(data);
    }
    if (obj == NULL)
        return NULL;
    if (json_object_set_new(obj, "kind", json_string(kind)) < 0) {
        json_decref(obj);
        return NULL;
    }
    return obj;
}

/*
 * A kind out of range (a bug in the caller) becomes internal_error, so no
 * reply ever carries a kind or code outside section 5.  message NULL means
 * the kind's name.
 */
json_t *rpc_error_new(json_t *id, enum rpc_kind k, const char *message, json_t *data)
{
    json_t *msg = NULL, *error = NULL;
    const char *kind;

    if ((unsigned)k >= RPC_E_COUNT)
        k = RPC_E_INTERNAL_ERROR;
    kind = kinds[k].kind;
    data = error_data(data, kind);      /* data is ours from here on */
    if (data == NULL)
        return NULL;
    error = json_object();
    if (error == NULL)
        goto fail;
    if (json_object_set_new(error, "code", json_integer(kinds[k].code)) < 0
        || json_object_set_new(error, "message", message_string(message ? message : kind)) < 0)
        goto fail;
    if (json_object_set_new(error, "data", data) < 0) {
        data = NULL;    /* consumed even on failure */
        goto fail;
    }
    data = NULL;
    msg = envelope(id ? id : json_null());
    if (msg == NULL)
        goto fail;
    if (json_object_set_new(msg, "error", error) < 0) {
        error = NULL;
        goto fail;
    }
    return msg;
fail:
    json_decref(data);
    json_decref(error);
    json_decref(msg);
    return NULL;
}

json_t *rpc_errorf_new(json_t *id, enum rpc_kind kind, json_t *data, const char *fmt, ...)
{
    va_list ap;
    char *message;
    json_t *msg;
    int n;

    va_start(ap, fmt);
    n = vasprintf(&message, fmt, ap);
    va_end(ap);
    if (n < 0) {
        json_decref(data);
        return NULL;
    }
    msg = rpc_error_new(id, kind, message, data);
    free(message);
    return msg;
}

json_t *rpc_request_new(json_t *id, const char *method, json_t *params)
{
    json_t *msg = envelope(id);

    if (msg == NULL)
        goto fail;
    if (json_object_set_new(msg, "method", json_string(method)) < 0)
        goto fail;
    if (params != NULL) {
        json_t *p = params;

        params = NULL;
        if (json_object_set_new(msg, "params", p) < 0)     /* consumes */
            goto fail;
    }
    return msg;
fail:
    json_decref(params);
    json_decref(msg);
    return NULL;
}

/*
 * The buffer comes from json_dumps(), i.e. from malloc unless the process
 * installs other allocators with json_set_alloc_funcs() (sandboxd does
 * not), and is grown with realloc to hold the '\n'.  The caller frees it
 * with free().  JSON_COMPACT output never contains a raw newline: newlines
 * inside strings are escaped, so the result is exactly one NDJSON line.
 */
char *rpc_dump_line(const json_t *msg, size_t *len)
{
    char *text, *line;
    size_t n;

    text = json_dumps(msg, JSON_COMPACT);
    if (text == NULL)
        return NULL;
    n = strlen(text);
    line = realloc(text, n + 2);
    if (line == NULL) {
        free(text);
        return NULL;
    }
    line[n] = '\n';
    line[n + 1] = '\0';
    *len = n + 1;
    return line;
}
