/*
 * test_jsonrpc.c - classification of every message shape, and the error
 * objects built for every kind of docs/protocol.md §7.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "proto/jsonrpc.h"

/* Type of one message given as a C string literal. */
static enum rpc_type type_of(const char *text)
{
    struct rpc_msg msg;
    enum rpc_type t;

    rpc_parse(text, strlen(text), &msg);
    t = msg.type;
    if (t == RPC_PARSE_ERROR || t == RPC_INVALID)
        assert_non_null(msg.why);
    rpc_msg_clear(&msg);
    return t;
}

static void test_parse_errors(void **state)
{
    static const char *const bad[] = {
        "", " ", "{", "}", "{\"jsonrpc\":\"2.0\"", "{\"a\":1} x", "{\"a\":1}{}",
        "{'a':1}", "{\"a\":NaN}", "{\"a\":01}", "{\"a\":\"\\x\"}",
        "{\"a\":\"\t\"}",           /* raw control character in a string */
        "{\"a\":\"\xff\"}",         /* invalid UTF-8 */
        "{\"a\":\"\xc0\xaf\"}",     /* overlong encoding of '/' */
        "{\"a\":\"\xed\xa0\x80\"}", /* UTF-16 surrogate as UTF-8 */
        "{\"a\":\"\\ud800\"}",      /* lone surrogate escape */
        "{\"id\":99999999999999999999,\"jsonrpc\":\"2.0\",\"method\":\"m\"}",
        "{\"id\":-99999999999999999999,\"jsonrpc\":\"2.0\",\"method\":\"m\"}",
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct rpc_msg msg;

        rpc_parse(bad[i], strlen(bad[i]), &msg);
        assert_int_equal(msg.type, RPC_PARSE_ERROR);
        assert_null(msg.root);
        assert_null(msg.id);
        assert_non_null(msg.why);
        rpc_msg_clear(&msg);
    }
}

/* A raw NUL byte is not JSON, even with JSON_ALLOW_NUL (which only admits
 * the escape \u0000); the length, not a terminator, bounds the input. */
static void test_raw_nul_is_parse_error(void **state)
{
    static const char text[] = "{\"jsonrpc\":\"2.0\",\"method\":\"m\0\"}";
    static const char after[] = "{\"jsonrpc\":\"2.0\",\"method\":\"m\"}\0";
    struct rpc_msg msg;

    (void)state;
    rpc_parse(text, sizeof text - 1, &msg);
    assert_int_equal(msg.type, RPC_PARSE_ERROR);
    rpc_msg_clear(&msg);
    rpc_parse(after, sizeof after - 1, &msg);
    assert_int_equal(msg.type, RPC_PARSE_ERROR);
    rpc_msg_clear(&msg);
}

static void test_deep_nesting(void **state)
{
    size_t n = 100000;
    char *text = malloc(2 * n + 1);
    struct rpc_msg msg;

    (void)state;
    assert_non_null(text);
    memset(text, '[', n);
    memset(text + n, ']', n);
    rpc_parse(text, 2 * n, &msg);
    assert_int_equal(msg.type, RPC_PARSE_ERROR);
    rpc_msg_clear(&msg);
    memset(text, '[', n);
    rpc_parse(text, n, &msg);       /* unterminated as well */
    assert_int_equal(msg.type, RPC_PARSE_ERROR);
    rpc_msg_clear(&msg);
    free(text);
}

static void test_batch_rejected(void **state)
{
    static const char *const batches[] = {
        "[]", "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", "[1,2]",
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof batches / sizeof batches[0]; i++) {
        struct rpc_msg msg;

        rpc_parse(batches[i], strlen(batches[i]), &msg);
        assert_int_equal(msg.type, RPC_INVALID);
        assert_string_equal(msg.why, "batch requests are not supported");
        assert_null(msg.id);
        rpc_msg_clear(&msg);
    }
}

static void test_non_object_invalid(void **state)
{
    (void)state;
    assert_int_equal(type_of("1"), RPC_INVALID);
    assert_int_equal(type_of("\"x\""), RPC_INVALID);
    assert_int_equal(type_of("null"), RPC_INVALID);
    assert_int_equal(type_of("true"), RPC_INVALID);
    assert_int_equal(type_of("1.5"), RPC_INVALID);
    assert_int_equal(type_of("{}"), RPC_INVALID);
}

static void test_version_checked(void **state)
{
    (void)state;
    assert_int_equal(type_of("{\"id\":1,\"method\":\"m\"}"), RPC_INVALID);
    assert_int_equal(type_of("{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"m\"}"), RPC_INVALID);
    assert_int_equal(type_of("{\"jsonrpc\":2.0,\"id\":1,\"method\":\"m\"}"), RPC_INVALID);
    assert_int_equal(type_of("{\"jsonrpc\":\"2.0 \",\"id\":1,\"method\":\"m\"}"), RPC_INVALID);
    assert_int_equal(type_of("{\"jsonrpc\":\"2\",\"id\":1,\"method\":\"m\"}"), RPC_INVALID);
    assert_int_equal(type_of("{\"jsonrpc\":\"2.0\\u0000\",\"id\":1,\"method\":\"m\"}"),
                     RPC_INVALID);
    assert_int_equal(type_of("{\"jsonrpc\":null,\"id\":1,\"method\":\"m\"}"), RPC_INVALID);
    assert_int_equal(type_of("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}"), RPC_REQUEST);
}

static void test_requests_and_notifications(void **state)
{
    struct rpc_msg msg;
    const char *t;

    (void)state;
    t = "{\"jsonrpc\":\"2.0\",\"id\":\"a-1\",\"method\":\"execute\",\"params\":{\"code\":\"x\"}}";
    rpc_parse(t, strlen(t), &msg);
    assert_int_equal(msg.type, RPC_REQUEST);
    assert_string_equal(msg.method, "execute");
    assert_string_equal(json_string_value(msg.id), "a-1");
    assert_true(json_is_object(msg.params));
    assert_null(msg.result);
    assert_null(msg.error);
    rpc_msg_clear(&msg);
    assert_null(msg.root);

    t = "{\"method\":\"ping\",\"id\":0,\"jsonrpc\":\"2.0\"}";
    rpc_parse(t, strlen(t), &msg);
    assert_int_equal(msg.type, RPC_REQUEST);
    assert_int_equal(json_integer_value(msg.id), 0);
    assert_null(msg.params);
    rpc_msg_clear(&msg);

    t = "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancelRequest\",\"params\":[1]}";
    rpc_parse(t, strlen(t), &msg);
    assert_int_equal(msg.type, RPC_NOTIFICATION);
    assert_null(msg.id);
    assert_true(json_is_array(msg.params));
    rpc_msg_clear(&msg);
}

/* Every JSON type as the id of a request: only strings and integers. */
static void test_request_id_types(void **state)
{
    static const struct { const char *id; enum rpc_type want; } cases[] = {
        { "\"x\"", RPC_REQUEST },
        { "\"\"", RPC_REQUEST },
        { "\"a\\u0000b\"", RPC_REQUEST },
        { "7", RPC_REQUEST },
        { "-7", RPC_REQUEST },
        { "9223372036854775807", RPC_REQUEST },
        { "-9223372036854775808", RPC_REQUEST },
        { "null", RPC_INVALID },
        { "1.0", RPC_INVALID },
        { "1e3", RPC_INVALID },
        { "true", RPC_INVALID },
        { "false", RPC_INVALID },
        { "{}", RPC_INVALID },
        { "[1]", RPC_INVALID },
    };
    char text[200];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct rpc_msg msg;

        snprintf(text, sizeof text, "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":%s}",
                 cases[i].id);
        rpc_parse(text, strlen(text), &msg);
        assert_int_equal(msg.type, cases[i].want);
        if (cases[i].want == RPC_REQUEST)
            assert_non_null(msg.id);
        else
            assert_null(msg.id);   /* unusable: the reply's id is null */
        rpc_msg_clear(&msg);
    }
}

static void test_string_id_with_nul_kept(void **state)
{
    static const char t[] = "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"id\":\"a\\u0000b\"}";
    struct rpc_msg msg;

    (void)state;
    rpc_parse(t, sizeof t - 1, &msg);
    assert_int_equal(msg.type, RPC_REQUEST);
    assert_int_equal(json_string_length(msg.id), 3);
    assert_memory_equal(json_string_value(msg.id), "a\0b", 3);
    rpc_msg_clear(&msg);
}

static void test_bad_method_and_params(void **state)
{
    (void)state;
    assert_int_equal(type_of("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":1}"), RPC_INVALID);
    assert_int_equal(type_of("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":null}"), RPC_INVALID);
    assert_int_equal(type_of("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":{}}"), RPC_INVALID);
    assert_int_equal(type_of("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"pi\\u0000ng\"}"),
                     RPC_INVALID);
    assert_int_equal(type_of("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":\"x\"}"),
                     RPC_INVALID);
    assert_int_equal(type_of("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":3}"),
                     RPC_INVALID);
    assert_int_equal(type_of("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":null}"),
                     RPC_INVALID);
    assert_int_equal(type_of("{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":true}"),
                     RPC_INVALID);
}

/* An invalid message still yields its id, when usable, for the reply. */
static void test_invalid_keeps_id(void **state)
{
    struct rpc_msg msg;
    const char *t;

    (void)state;
    t = "{\"jsonrpc\":\"2.0\",\"id\":\"q\",\"method\":\"m\",\"params\":5}";
    rpc_parse(t, strlen(t), &msg);
    assert_int_equal(msg.type, RPC_INVALID);
    assert_string_equal(json_string_value(msg.id), "q");
    assert_non_null(msg.root);
    rpc_msg_clear(&msg);

    t = "{\"jsonrpc\":\"1.0\",\"id\":42,\"method\":\"m\"}";
    rpc_parse(t, strlen(t), &msg);
    assert_int_equal(msg.type, RPC_INVALID);
    assert_int_equal(json_integer_value(msg.id), 42);
    rpc_msg_clear(&msg);

    t = "{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":1,\"error\":{}}";
    rpc_parse(t, strlen(t), &msg);
    assert_int_equal(msg.type, RPC_INVALID);
    assert_int_equal(json_integer_value(msg.id), 5);
    rpc_msg_clear(&msg);

    t = "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"m\"}";
    rpc_parse(t, strlen(t), &msg);
    assert_int_equal(msg.type, RPC_INVALID);
    assert_null(msg.id);
    rpc_msg_clear(&msg);
}

static void test_responses(void **state)
{
    struct rpc_msg msg;
    const char *t;

    (void)state;
    t = "{\"jsonrpc\":\"2.0\",\"id\":\"t1\",\"result\":{\"temp\":3}}";
    rpc_parse(t, strlen(t), &msg);
    assert_int_equal(msg.type, RPC_RESPONSE);
    assert_string_equal(json_string_value(msg.id), "t1");
    assert_true(json_is_object(msg.result));
    assert_null(msg.error);
    assert_null(msg.method);
    rpc_msg_clear(&msg);

    /* a null result is a result */
    t = "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":null}";
    rpc_parse(t, strlen(t), &msg);
    assert_int_equal(msg.type, RPC_RESPONSE);
    assert_true(json_is_null(msg.result));
    rpc_msg_clear(&msg);

    t = "{\"jsonrpc\":\"2.0\",\"id\":\"t2\",\"error\":{\"code\":-1,\"message\":\"no\","
        "\"data\":{\"abort\":true}}}";
    rpc_parse(t, strlen(t), &msg);
    assert_int_equal(msg.type, RPC_RESPONSE);
    assert_null(msg.result);
    assert_true(json_is_object(msg.error));
    assert_string_equal(json_string_value(json_object_get(msg.error, "message")), "no");
    rpc_msg_clear(&msg);
}

static void test_bad_responses(void **state)
{
    static const char *const bad[] = {
        "{\"jsonrpc\":\"2.0\",\"result\":1}",                       /* no id */
        "{\"jsonrpc\":\"2.0\",\"id\":null,\"result\":1}",
        "{\"jsonrpc\":\"2.0\",\"id\":1.0,\"result\":1}",
        "{\"jsonrpc\":\"2.0\",\"id\":true,\"result\":1}",
        "{\"jsonrpc\":\"2.0\",\"id\":[],\"result\":1}",
        "{\"jsonrpc\":\"2.0\",\"id\":1}",                           /* neither */
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":1,\"error\":{\"code\":1,\"message\":\"m\"}}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":\"boom\"}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":null}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"message\":\"m\"}}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":1}}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":1.0,\"message\":\"m\"}}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":\"1\",\"message\":\"m\"}}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":1,\"message\":7}}",
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(type_of(bad[i]), RPC_INVALID);
}

/* jansson keeps the last of duplicate keys; the message is accepted. */
static void test_duplicate_keys_last_wins(void **state)
{
    struct rpc_msg msg;
    const char *t;

    (void)state;
    t = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\",\"method\":\"b\",\"id\":\"z\"}";
    rpc_parse(t, strlen(t), &msg);
    assert_int_equal(msg.type, RPC_REQUEST);
    assert_string_equal(msg.method, "b");
    assert_string_equal(json_string_value(msg.id), "z");
    rpc_msg_clear(&msg);
    /* and the last one decides validity */
    assert_int_equal(type_of("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"id\":null}"),
                     RPC_INVALID);
    assert_int_equal(type_of("{\"jsonrpc\":\"1.0\",\"jsonrpc\":\"2.0\",\"method\":\"m\"}"),
                     RPC_NOTIFICATION);
}

static const struct { const char *kind; int code; } contract_kinds[] = {
    { "parse_error", -32700 }, { "invalid_request", -32600 },
    { "message_too_large", -32600 }, { "method_not_found", -32601 },
    { "invalid_params", -32602 }, { "limit_out_of_range", -32602 },
    { "internal_error", -32603 }, { "syntax_error", -32001 },
    { "runtime_error", -32002 }, { "timeout", -32003 },
    { "memory_limit", -32004 }, { "reductions_limit", -32005 },
    { "cpu_limit", -32006 }, { "crashed", -32007 },
    { "code_too_large", -32008 }, { "busy", -32009 },
    { "forbidden", -32010 }, { "tool_aborted", -32011 },
    { "bindings_too_large", -32012 }, { "session_not_found", -32013 },
    { "tool_call_limit", -32014 }, { "cancelled", -32800 },
};
#define N_KINDS (sizeof contract_kinds / sizeof contract_kinds[0])

static void test_kind_codes(void **state)
{
    size_t i;

    (void)state;
    for (i = 0; i < N_KINDS; i++) {
        assert_int_equal(rpc_kind_code(contract_kinds[i].kind), contract_kinds[i].code);
        assert_true(rpc_kind_known(contract_kinds[i].kind));
    }
    assert_int_equal(rpc_kind_code("nope"), 0);
    assert_int_equal(rpc_kind_code(""), 0);
    assert_int_equal(rpc_kind_code("Timeout"), 0);
    assert_int_equal(rpc_kind_code(NULL), 0);
    assert_false(rpc_kind_known("timeout "));
    /* the enum and the table agree, and every kind is named once */
    assert_int_equal(RPC_E_COUNT, N_KINDS);
    for (i = 0; i < N_KINDS; i++) {
        enum rpc_kind k;

        assert_true(rpc_kind_parse(rpc_kind_name((enum rpc_kind)i), &k));
        assert_int_equal(k, (int)i);
    }
    assert_string_equal(rpc_kind_name((enum rpc_kind)RPC_E_COUNT), "internal_error");
}

/* Check the shape {"jsonrpc","id","error":{code,message,data{kind}}}. */
static json_t *check_error(json_t *reply, json_t *id, const char *kind, int code,
                           const char *message)
{
    json_t *error, *data;

    assert_non_null(reply);
    assert_string_equal(json_string_value(json_object_get(reply, "jsonrpc")), "2.0");
    if (id)
        assert_true(json_equal(json_object_get(reply, "id"), id));
    else
        assert_true(json_is_null(json_object_get(reply, "id")));
    assert_null(json_object_get(reply, "result"));
    error = json_object_get(reply, "error");
    assert_true(json_is_object(error));
    assert_int_equal(json_object_size(error), 3);
    assert_true(json_is_integer(json_object_get(error, "code")));
    assert_int_equal(json_integer_value(json_object_get(error, "code")), code);
    assert_string_equal(json_string_value(json_object_get(error, "message")), message);
    data = json_object_get(error, "data");
    assert_true(json_is_object(data));
    assert_string_equal(json_string_value(json_object_get(data, "kind")), kind);
    return data;
}

static void test_error_every_kind(void **state)
{
    json_t *id = json_integer(9);
    size_t i;

    (void)state;
    for (i = 0; i < N_KINDS; i++) {
        enum rpc_kind k;
        json_t *reply;

        assert_true(rpc_kind_parse(contract_kinds[i].kind, &k));
        assert_string_equal(rpc_kind_name(k), contract_kinds[i].kind);
        reply = rpc_error_new(id, k, "msg", NULL);
        json_t *data = check_error(reply, id, contract_kinds[i].kind,
                                   contract_kinds[i].code, "msg");

        assert_int_equal(json_object_size(data), 1);
        json_decref(reply);
    }
    json_decref(id);
}

static void test_error_data_handling(void **state)
{
    json_t *reply, *data, *shared, *id;

    (void)state;
    /* object data keeps its members and gains kind, overriding a stale one */
    reply = rpc_error_new(NULL, RPC_E_TIMEOUT, "too slow",
                          json_pack("{s:s,s:i,s:s}", "output", "hi", "line", 3, "kind", "old"));
    data = check_error(reply, NULL, "timeout", -32003, "too slow");
    assert_string_equal(json_string_value(json_object_get(data, "output")), "hi");
    assert_int_equal(json_integer_value(json_object_get(data, "line")), 3);
    json_decref(reply);

    /* a shared object is not modified behind its other holder */
    shared = json_pack("{s:i}", "x", 1);
    reply = rpc_error_new(NULL, RPC_E_CRASHED, "dead", json_incref(shared));
    check_error(reply, NULL, "crashed", -32007, "dead");
    assert_null(json_object_get(shared, "kind"));
    json_decref(reply);
    json_decref(shared);

    /* non-object data is kept under "value" */
    reply = rpc_error_new(NULL, RPC_E_BUSY, "full", json_string("later"));
    data = check_error(reply, NULL, "busy", -32009, "full");
    assert_string_equal(json_string_value(json_object_get(data, "value")), "later");
    json_decref(reply);
    reply = rpc_error_new(NULL, RPC_E_BUSY, "full", json_null());
    data = check_error(reply, NULL, "busy", -32009, "full");
    assert_true(json_is_null(json_object_get(data, "value")));
    json_decref(reply);

    /* a kind out of range: internal_error, never an unlisted kind on the wire */
    reply = rpc_error_new(NULL, (enum rpc_kind)RPC_E_COUNT, "oops", NULL);
    check_error(reply, NULL, "internal_error", -32603, "oops");
    json_decref(reply);

    /* message NULL: the kind's name; a string id is echoed */
    id = json_string("req-1");
    reply = rpc_error_new(id, RPC_E_FORBIDDEN, NULL, NULL);
    check_error(reply, id, "forbidden", -32010, "forbidden");
    json_decref(reply);
    json_decref(id);

    /* a message that is not UTF-8 still gives valid JSON */
    reply = rpc_error_new(NULL, RPC_E_RUNTIME_ERROR, "bad \xff\xfe byte", NULL);
    check_error(reply, NULL, "runtime_error", -32002, "bad ?? byte");
    json_decref(reply);
}

static void test_errorf(void **state)
{
    json_t *reply;

    (void)state;
    reply = rpc_errorf_new(NULL, RPC_E_CODE_TOO_LARGE, NULL, "code is %zu bytes, limit %d",
                           (size_t)70000, 65536);
    check_error(reply, NULL, "code_too_large", -32008, "code is 70000 bytes, limit 65536");
    json_decref(reply);
}

static void test_result_and_request(void **state)
{
    json_t *id = json_string("x"), *m;

    (void)state;
    m = rpc_result_new(id, json_pack("{s:i}", "v", 2));
    assert_non_null(m);
    assert_string_equal(json_string_value(json_object_get(m, "jsonrpc")), "2.0");
    assert_true(json_equal(json_object_get(m, "id"), id));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(m, "result"), "v")), 2);
    assert_null(json_object_get(m, "error"));
    json_decref(m);

    m = rpc_result_new(NULL, json_object());
    assert_true(json_is_null(json_object_get(m, "id")));
    json_decref(m);
    assert_null(rpc_result_new(id, NULL));

    m = rpc_request_new(id, "tool/call", json_pack("{s:s}", "tool", "W"));
    assert_string_equal(json_string_value(json_object_get(m, "method")), "tool/call");
    assert_true(json_equal(json_object_get(m, "id"), id));
    assert_true(json_is_object(json_object_get(m, "params")));
    json_decref(m);

    m = rpc_request_new(NULL, "note", NULL);
    assert_null(json_object_get(m, "id"));      /* a notification */
    assert_null(json_object_get(m, "params"));
    assert_int_equal(json_object_size(m), 2);
    json_decref(m);
    json_decref(id);
}

/* Dumped lines are one line, end in '\n', and parse back to the same. */
static void test_dump_line_round_trip(void **state)
{
    json_t *id = json_integer(3), *m;
    char *line;
    size_t len = 0;
    struct rpc_msg msg;

    (void)state;
    m = rpc_result_new(id, json_string("a\nb\r\xc3\xa9"));
    json_decref(id);                            /* borrowed by the reply */
    line = rpc_dump_line(m, &len);
    assert_non_null(line);
    assert_int_equal(len, strlen(line));
    assert_true(len > 1);
    assert_int_equal(line[len - 1], '\n');
    assert_null(memchr(line, '\n', len - 1));
    assert_null(strchr(line, ' '));             /* compact */
    rpc_parse(line, len - 1, &msg);
    assert_int_equal(msg.type, RPC_RESPONSE);
    assert_true(json_equal(msg.root, m));
    rpc_msg_clear(&msg);
    free(line);
    json_decref(m);
}

/* A line above RPC_PASS_MIN is validated whole; its envelope is built and
 * params.bindings / result kept as text. */
static char *big_line(const char *head, const char *elem, size_t n, const char *tail, size_t *len)
{
    size_t hl = strlen(head), el = strlen(elem), tl = strlen(tail);
    char *s = malloc(hl + n * (el + 1) + tl + 1), *p = s;

    memcpy(p, head, hl);
    p += hl;
    for (size_t i = 0; i < n; i++) {
        if (i)
            *p++ = ',';
        memcpy(p, elem, el);
        p += el;
    }
    memcpy(p, tail, tl);
    p += tl;
    *p = '\0';
    *len = (size_t)(p - s);
    return s;
}

static void test_large_lines_pass_through(void **state)
{
    struct rpc_msg m;
    size_t len;
    char *s;
    (void)state;
    s = big_line("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"execute\",\"params\":{\"code\":\"x\","
                 "\"bindings\":[", "[\"a\",1]", 20000, "]}}", &len);
    assert_true(len > RPC_PASS_MIN);
    rpc_parse(s, len, &m);
    assert_int_equal(m.type, RPC_REQUEST);
    assert_string_equal(m.method, "execute");
    assert_string_equal(json_string_value(json_object_get(m.params, "code")), "x");
    assert_true(json_is_array(json_object_get(m.params, "bindings")));
    assert_non_null(m.raw_bindings.p);
    assert_int_equal(m.raw_bindings.p[0], '[');
    assert_int_equal(m.raw_bindings.p[m.raw_bindings.n - 1], ']');
    rpc_msg_clear(&m);
    s[len - 3] = ',';                      /* "...],}}": invalid */
    rpc_parse(s, len, &m);
    assert_int_equal(m.type, RPC_PARSE_ERROR);
    rpc_msg_clear(&m);
    free(s);
    /* a response: result kept as text */
    s = big_line("{\"jsonrpc\":\"2.0\",\"id\":\"t1\",\"result\":[", "[]", 40000, "]}", &len);
    rpc_parse(s, len, &m);
    assert_int_equal(m.type, RPC_RESPONSE);
    assert_non_null(m.raw_result.p);
    assert_int_equal(m.raw_result.n, len - strlen("{\"jsonrpc\":\"2.0\",\"id\":\"t1\",\"result\":}"));
    rpc_msg_clear(&m);
    free(s);
    /* a batch: refused without a tree */
    s = big_line("[", "{}", 40000, "]", &len);
    rpc_parse(s, len, &m);
    assert_int_equal(m.type, RPC_INVALID);
    assert_string_equal(m.why, "batch requests are not supported");
    rpc_msg_clear(&m);
    free(s);
    /* dense values elsewhere: over the tree budget */
    s = big_line("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":[", "[]",
                 3000000, "]}}", &len);
    rpc_parse(s, len, &m);
    assert_int_equal(m.type, RPC_PARSE_ERROR);
    assert_true(m.too_dense);
    rpc_msg_clear(&m);
    free(s);
}

/* The floor of a text's tree (containers, numbers, string values) refuses
 * what cannot fit its budget, and never what can: keys, true, false and
 * null count nothing (a repeated key reuses its entry), and neither does
 * anything inside a string. */
static void test_tree_floor(void **state)
{
    static const struct { const char *elem; size_t n; int dense; } cases[] = {
        { "1", 3000000, 1 },            /* 72 MB at least, budget 40 MB */
        { "-0.5", 1500000, 1 },
        { "\"\"", 2000000, 1 },         /* 66 MB at least, budget 40 MB */
        { "1", 100000, 0 },             /* 2.4 MB: within its budget */
        { "true", 2000000, 0 },         /* shared: only the array's table */
        { "\"[1,1,1,1,1,1,1,1,1]\"", 300000, 0 },     /* one long string's worth */
        { "\"k\" :1", 1000000, 0 },    /* one key a million times: 26 MB of 40 */
    };
    struct rpc_msg m;
    size_t len;
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int obj = strchr(cases[i].elem, ':') != NULL;   /* members of one object */
        char *s = big_line(obj ? "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":{"
                               : "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":[",
                           cases[i].elem, cases[i].n, obj ? "}}}" : "]}}", &len);
        rpc_parse(s, len, &m);
        if (m.too_dense != cases[i].dense || m.type != (cases[i].dense ? RPC_PARSE_ERROR : RPC_REQUEST))
            fail_msg("%zu x %s: type %d, too_dense %d", cases[i].n, cases[i].elem, (int)m.type,
                     m.too_dense);
        rpc_msg_clear(&m);
        free(s);
    }
}

/* The id of a refused line: the last "id" member of the top-level object
 * read whole, when it is a string or an integer; nothing else. */
static void test_scan_id(void **state)
{
    static const struct { const char *line; const char *want; } cases[] = {
        { "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":", "1" },
        { "{\"id\":\"a\\u0000b\",\"x\":}", "\"a\\u0000b\"" },
        { " { \"x\" : [1,{\"id\":2},\"]}\\\"\"] , \"id\" : -7 , \"y\":", "-7" },
        { "{\"id\":1,\"id\":\"two\",\"p\":[[[", "\"two\"" },
        { "{\"\\u0069\\u0064\":3,", "3" },
        { "{\"params\":{\"id\":4},\"z\":}", NULL },      /* not a top-level member */
        { "{\"id\":1.5,\"x\":}", NULL },                  /* not an id's type */
        { "{\"id\":1,\"id\":1.5,\"x\":}", NULL },         /* the last one wins */
        { "{\"id\":1,\"id\":{\"a\":", NULL },
        { "{\"id\":true}", NULL },
        { "{\"id\":{\"a\":1}}", NULL },
        { "{\"id\":12", NULL },                             /* cut: maybe 123 */
        { "{\"id\":\"abc", NULL },                         /* cut inside */
        { "{\"id\\u0000\":5,", NULL },
        { "{\"idx\":5,\"x\":}", NULL },
        { "[{\"id\":5}]", NULL },
        { "\"id\":5", NULL },
        { "{\"a\":1 \"id\":5}", NULL },                    /* a missing comma ends the scan */
        { "", NULL },
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *id = rpc_scan_id(cases[i].line, strlen(cases[i].line)), *want = NULL;
        json_error_t je;

        if (cases[i].want)
            want = json_loads(cases[i].want, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        if (!(id == NULL ? want == NULL : want != NULL && json_equal(id, want)))
            fail_msg("%s: scanned %s", cases[i].line, id ? "an id" : "nothing");
        json_decref(id);
        json_decref(want);
    }
    {
        /* one NUL after a bare token is dropped, as jansson drops it: the
         * later id still wins */
        static const char nul[] = "{\"id\":1\0,\"id\":2,\"x\":}";
        json_t *id = rpc_scan_id(nul, sizeof nul - 1);
        assert_true(json_is_integer(id) && json_integer_value(id) == 2);
        json_decref(id);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_raw_nul_is_parse_error),
        cmocka_unit_test(test_deep_nesting),
        cmocka_unit_test(test_batch_rejected),
        cmocka_unit_test(test_non_object_invalid),
        cmocka_unit_test(test_version_checked),
        cmocka_unit_test(test_requests_and_notifications),
        cmocka_unit_test(test_request_id_types),
        cmocka_unit_test(test_string_id_with_nul_kept),
        cmocka_unit_test(test_bad_method_and_params),
        cmocka_unit_test(test_invalid_keeps_id),
        cmocka_unit_test(test_responses),
        cmocka_unit_test(test_bad_responses),
        cmocka_unit_test(test_duplicate_keys_last_wins),
        cmocka_unit_test(test_kind_codes),
        cmocka_unit_test(test_error_every_kind),
        cmocka_unit_test(test_error_data_handling),
        cmocka_unit_test(test_errorf),
        cmocka_unit_test(test_result_and_request),
        cmocka_unit_test(test_dump_line_round_trip),
        cmocka_unit_test(test_large_lines_pass_through),
        cmocka_unit_test(test_tree_floor),
        cmocka_unit_test(test_scan_id),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
