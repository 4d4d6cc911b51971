/*
 * test_worker.c - the real worker_run() in a forked child (no containment,
 * no seccomp) over a socketpair; the test plays the supervisor: it sends the
 * JOB, answers TOOL_CALLs, collects OUTPUT and checks the end frame.
 *
 * The environment is built once in the group setup, as the zygote does, and
 * every job runs in a fresh fork of it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <jansson.h>

#include "worker/luaenv.h"
#include "daemon/prompt.h"
#include "worker/worker.h"
#include "proto/chan.h"

/* A tool answer for one TOOL_CALL payload: a new TOOL_RESULT object. */
typedef json_t *(*tool_fn)(json_t *call, void *ud);

struct run {
    uint32_t end_type;      /* CHAN_RESULT, CHAN_ERROR, or 0: no end frame */
    json_t  *end;
    char     output[1 << 16];
    size_t   output_len;
    int      tool_calls;
    json_t  *last_call;
    int      status;        /* from waitpid */
};

struct job_opts {
    const char *op;         /* default "execute" */
    const char *tools;      /* JSON text, default [] */
    json_t     *bindings;   /* borrowed, default [] */
    const char *limits;     /* JSON text, default {} */
    tool_fn     tool;
    void       *tool_ud;
};

static void run_free(struct run *r)
{
    json_decref(r->end);
    json_decref(r->last_call);
    memset(r, 0, sizeof *r);
}

static json_t *parse(const char *text)
{
    json_error_t jerr;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);
    if (v == NULL)
        fail_msg("bad JSON in test: %s: %s", jerr.text, text);
    return v;
}

static void serve(int fd, const struct job_opts *o, struct run *r)
{
    uint32_t type;
    char *payload;
    size_t len;

    while (chan_recv(fd, &type, &payload, &len, (size_t)64 << 20) == 0) {
        if (type == CHAN_OUTPUT) {
            assert_true(r->output_len + len < sizeof r->output);
            memcpy(r->output + r->output_len, payload, len);
            r->output_len += len;
        } else if (type == CHAN_TOOL_CALL) {
            json_t *call = parse(payload), *res;
            char *text;
            assert_non_null(o->tool);
            r->tool_calls++;
            res = o->tool(call, o->tool_ud);
            /* answers name their call: calls are numbered 1, 2, ... as sent */
            json_object_set_new(res, "call", json_integer(r->tool_calls));
            json_decref(r->last_call);
            r->last_call = call;
            text = json_dumps(res, JSON_COMPACT);
            assert_int_equal(chan_send(fd, CHAN_TOOL_RESULT, text, strlen(text)), 0);
            free(text);
            json_decref(res);
        } else {
            assert_true(type == CHAN_RESULT || type == CHAN_ERROR);
            r->end_type = type;
            r->end = parse(payload);
            free(payload);
            return;
        }
        free(payload);
    }
}

static void run_job(void **state, const char *code, const struct job_opts *o, struct run *r)
{
    struct luaenv *env = *state;
    json_t *job;
    char *text;
    int sv[2];
    pid_t pid;

    memset(r, 0, sizeof *r);
    job = json_pack("{s:s, s:s, s:o, s:o, s:o}",
                    "op", o->op ? o->op : "execute", "code", code,
                    "tools", parse(o->tools ? o->tools : "[]"),
                    "bindings", o->bindings ? json_incref(o->bindings) : json_array(),
                    "limits", parse(o->limits ? o->limits : "{}"));
    assert_non_null(job);
    text = json_dumps(job, JSON_COMPACT);
    json_decref(job);

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        alarm(20);          /* a broken limit must not hang the suite */
        worker_run(env, sv[1]);
    }
    close(sv[1]);
    assert_int_equal(chan_send(sv[0], CHAN_JOB, text, strlen(text)), 0);
    free(text);
    serve(sv[0], o, r);
    close(sv[0]);
    assert_int_equal(waitpid(pid, &r->status, 0), pid);
    r->output[r->output_len] = '\0';
}

/* Run code; the end frame must be a RESULT; return its "value" (borrowed). */
static json_t *value_of(void **state, const char *code, const struct job_opts *o, struct run *r)
{
    run_job(state, code, o, r);
    if (r->end_type != CHAN_RESULT) {
        char *t = r->end ? json_dumps(r->end, 0) : NULL;
        fail_msg("expected RESULT for %s, got %u %s", code, r->end_type, t ? t : "(none)");
    }
    assert_true(WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0);
    return json_object_get(r->end, "value");
}

/* Run code; the end frame must be an ERROR of kind; return its message. */
static const char *error_of(void **state, const char *code, const struct job_opts *o,
                            const char *kind, struct run *r)
{
    run_job(state, code, o, r);
    if (r->end_type != CHAN_ERROR) {
        char *t = r->end ? json_dumps(r->end, 0) : NULL;
        fail_msg("expected ERROR %s for %s, got %u %s", kind, code, r->end_type, t ? t : "(none)");
    }
    assert_string_equal(json_string_value(json_object_get(r->end, "kind")), kind);
    assert_non_null(json_object_get(r->end, "stats"));
    assert_true(WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0);
    return json_string_value(json_object_get(r->end, "message"));
}

/* The value must equal the JSON text, with exact number types. */
static void assert_json(json_t *v, const char *expect)
{
    json_t *e = parse(expect);
    if (!json_equal(v, e)) {
        char *got = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        fail_msg("got %s, expected %s", got ? got : "NULL", expect);
    }
    json_decref(e);
}

static const struct job_opts plain = {0};

/* ---- results, output ---- */

static void test_return_values(void **state)
{
    struct run r;
    json_t *v;

    v = value_of(state, "x = 1", &plain, &r);     /* json_is_* evaluate twice */
    assert_true(json_is_null(v));
    run_free(&r);
    v = value_of(state, "return", &plain, &r);
    assert_true(json_is_null(v));
    run_free(&r);
    assert_json(value_of(state, "return 42", &plain, &r), "42");
    assert_true(json_is_object(json_object_get(r.end, "stats")));
    assert_true(json_is_false(json_object_get(r.end, "output_truncated")));
    run_free(&r);
    assert_json(value_of(state, "return 1, 'a', true, {x = {1, 2}}", &plain, &r),
                "[1, \"a\", true, {\"x\": [1, 2]}]");
    run_free(&r);
}

static void test_integer_float(void **state)
{
    struct run r;
    json_t *v = value_of(state, "return 1, 1.0, 3 // 2, 3 / 2, 2^2", &plain, &r);

    assert_true(json_is_integer(json_array_get(v, 0)));
    assert_true(json_is_real(json_array_get(v, 1)));
    assert_true(json_is_integer(json_array_get(v, 2)));
    assert_true(json_is_real(json_array_get(v, 3)));
    assert_true(json_is_real(json_array_get(v, 4)));
    assert_json(v, "[1, 1.0, 1, 1.5, 4.0]");
    run_free(&r);
}

static void test_print_capture(void **state)
{
    struct run r;

    value_of(state, "print('a', 1, nil, true, 2.5) print() print('b') return 1", &plain, &r);
    assert_string_equal(r.output, "a\t1\tnil\ttrue\t2.5\n\nb\n");
    assert_true(json_is_false(json_object_get(r.end, "output_truncated")));
    run_free(&r);
}

static void test_print_truncated(void **state)
{
    struct job_opts o = {.limits = "{\"max_output_bytes\": 10}"};
    struct run r;

    assert_json(value_of(state, "print('0123456789abc') print('x') return 7", &o, &r), "7");
    assert_string_equal(r.output, "0123456789");
    assert_true(json_is_true(json_object_get(r.end, "output_truncated")));
    run_free(&r);
    /* printed before a failure is kept */
    error_of(state, "print('before') error('x')", &plain, "runtime_error", &r);
    assert_string_equal(r.output, "before\n");
    run_free(&r);
}

/* ---- tools ---- */

static const char weather[] =
    "[{\"name\": \"Weather\", \"module\": \"MyApp.Tools.Weather\","
    "  \"functions\": [{\"name\": \"get\", \"arities\": [1, 2]}, {\"name\": \"three\", "
    "\"arities\": [1, 2, 3]}, {\"name\": \"any\"}]},"
    " {\"name\": \"Planner\", \"module\": \"MyApp.Planner\", \"functions\": []}]";

static json_t *weather_ok(json_t *call, void *ud)
{
    (void)ud;
    assert_string_equal(json_string_value(json_object_get(call, "tool")), "Weather");
    return parse("{\"ok\": true, \"value\": {\"temp\": 21.5, \"tags\": [\"a\", \"b\"]}}");
}

static json_t *weather_fail(json_t *call, void *ud)
{
    (void)call;
    (void)ud;
    return parse("{\"ok\": false, \"message\": \"tool exploded\"}");
}

static void test_tool_round_trip(void **state)
{
    struct job_opts o = {.tools = weather, .tool = weather_ok};
    struct run r;

    assert_json(value_of(state, "local r = Weather.get('Paris', {unit = 'C'})\n"
                                "return r.temp, r.tags[2], Weather.__module", &o, &r),
                "[21.5, \"b\", \"MyApp.Tools.Weather\"]");
    assert_int_equal(r.tool_calls, 1);
    assert_json(r.last_call, "{\"tool\": \"Weather\", \"function\": \"get\","
                             " \"args\": [\"Paris\", {\"unit\": \"C\"}]}");
    run_free(&r);
    /* exactly one value per call; a function without arities takes any count */
    assert_json(value_of(state, "return select('#', Weather.any()), Weather.any(1, 2, 3, 4).temp",
                         &o, &r), "[1, 21.5]");
    assert_int_equal(r.tool_calls, 2);
    run_free(&r);
    /* reference-only tool */
    o.tool = NULL;
    assert_json(value_of(state, "return Planner.__module, type(Planner.call)", &o, &r),
                "[\"MyApp.Planner\", \"nil\"]");
    run_free(&r);
}

static void test_tool_error(void **state)
{
    struct job_opts o = {.tools = weather, .tool = weather_fail};
    struct run r;

    assert_json(value_of(state, "return pcall(Weather.get, 'x')", &o, &r),
                "[false, \"Weather.get: tool exploded\"]");
    run_free(&r);
    assert_non_null(strstr(error_of(state, "Weather.get('x')", &o, "runtime_error", &r),
                           "Weather.get: tool exploded"));
    run_free(&r);
}

static void test_tool_arity(void **state)
{
    struct job_opts o = {.tools = weather, .tool = weather_ok};
    struct run r;

    assert_json(value_of(state, "return pcall(Weather.get, 1, 2, 3)", &o, &r),
                "[false, \"Weather.get takes 1 or 2 argument(s), got 3\"]");
    assert_int_equal(r.tool_calls, 0);
    run_free(&r);
    o.limits = "{\"max_result_bytes\": 1000}";
    assert_json(value_of(state, "return pcall(Weather.any, string.rep('x', 600), string.rep('y', 600))",
                         &o, &r), "[false, \"Weather.any: arguments larger than 1000 bytes\"]");
    assert_int_equal(r.tool_calls, 0);
    run_free(&r);
    o.limits = NULL;
    assert_json(value_of(state, "return pcall(Weather.three)", &o, &r),
                "[false, \"Weather.three takes 1, 2 or 3 argument(s), got 0\"]");
    assert_int_equal(r.tool_calls, 0);
    run_free(&r);
    /* an argument that cannot be encoded names the tool */
    assert_json(value_of(state, "local t = {} t.t = t\n"
                                "local ok, e = pcall(Weather.get, t)\n"
                                "return ok, e:find('Weather.get', 1, true) ~= nil", &o, &r),
                "[false, true]");
    assert_int_equal(r.tool_calls, 0);
    run_free(&r);
}

/* ---- bindings ---- */

static void test_bindings_round_trip(void **state)
{
    struct job_opts o = {0};
    struct run r1, r2;

    value_of(state, "x = 40; f = 1.5; s = '\\255bin'; t = {1, 2, {a = true}, [2.5] = 'k'}\n"
                    "local l = 5; fn = function() end", &plain, &r1);
    assert_json(json_object_get(r1.end, "binding_names"), "[\"f\", \"s\", \"t\", \"x\"]");
    o.bindings = json_object_get(r1.end, "bindings");
    assert_json(value_of(state, "return x + 2, math.type(f), s == '\\255bin', t[3].a, t[2.5], l, fn",
                         &o, &r2), "[42, \"float\", true, true, \"k\", null, null]");
    run_free(&r2);
    run_free(&r1);

    o.bindings = parse("[[\"x\"]]");
    error_of(state, "return 1", &o, "invalid_params", &r1);
    json_decref(o.bindings);
    run_free(&r1);
}

static void test_bindings_globals_table(void **state)
{
    struct run r;

    value_of(state, "_G = nil; x = 1", &plain, &r);
    assert_json(json_object_get(r.end, "binding_names"), "[\"x\"]");
    run_free(&r);
    value_of(state, "_G = {evil = 1}; y = 2", &plain, &r);
    assert_json(json_object_get(r.end, "binding_names"), "[\"y\"]");
    run_free(&r);
    value_of(state, "setmetatable(_G, {__index = function() while true do end end,"
                    " __pairs = function() error('no') end}); z = 3", &plain, &r);
    assert_json(json_object_get(r.end, "binding_names"), "[\"z\"]");
    run_free(&r);
}

static void test_bindings_baseline(void **state)
{
    struct job_opts o = {.tools = weather};
    struct run r;

    value_of(state, "string = 5; Weather = 1; print = nil; _VERSION = 'x'; z = 3", &o, &r);
    assert_json(json_object_get(r.end, "binding_names"), "[\"z\"]");
    run_free(&r);
    o.bindings = parse("[[\"Weather\", 1], [\"_VERSION\", 2], [\"string\", 5], [\"z\", 3]]");
    assert_json(value_of(state, "return type(string), type(Weather), _VERSION, z", &o, &r),
                "[\"table\", \"table\", \"Lua 5.3\", 3]");
    json_decref(o.bindings);
    run_free(&r);
}

/* ---- errors ---- */

static void test_syntax_error(void **state)
{
    struct job_opts check = {.op = "check"};
    struct run r;
    const char *m;

    m = error_of(state, "x = 1\nx", &plain, "syntax_error", &r);
    assert_non_null(strstr(m, "input:2:"));
    assert_non_null(strstr(m, "write `return <expression>`"));
    assert_int_equal(json_integer_value(json_object_get(r.end, "line")), 2);
    run_free(&r);
    m = error_of(state, "local x =;", &plain, "syntax_error", &r);
    assert_null(strstr(m, "return <expression>"));
    assert_int_equal(json_integer_value(json_object_get(r.end, "line")), 1);
    run_free(&r);
    /* check compiles only */
    run_job(state, "while true do end return 1", &check, &r);
    assert_int_equal(r.end_type, CHAN_RESULT);
    assert_json(r.end, "{}");
    run_free(&r);
    error_of(state, "return (", &check, "syntax_error", &r);
    run_free(&r);
}

/* The note about bare expressions only where `return ` in front of the chunk
 * or of one of its last lines makes it compile; never for a missing `end`, an
 * unfinished string or an unfinished expression. */
static void test_syntax_hint(void **state)
{
    static const char *const with[] = {
        "x", "42", "\"abc\"", "1 + 2", "{a = 1}", "x = 1\nx", "x = 1\nx\n\n",
        "local t = {}\nt.x", "local t = {}\nt.x\n-- done\n", "x\n-- done\n", "x = 1\r\nx\r\n",
    };
    static const char *const without[] = {
        "for i=1,3 do print(i)", "x = \"abc", "local x = 1 +", "local x =;", "if x then",
        "return (", "x = 1\nfor i = 1, 2 do\n", "f(\n", "local s = [[\nx",
    };
    struct job_opts check = {.op = "check"};
    struct run r;
    const char *m;
    size_t i;
    char *big;

    for (i = 0; i < sizeof with / sizeof with[0]; i++) {
        m = error_of(state, with[i], &plain, "syntax_error", &r);
        if (strstr(m, "\nNote: a bare expression is not a valid Lua statement") == NULL)
            fail_msg("no note for %s: %s", with[i], m);
        run_free(&r);
    }
    for (i = 0; i < sizeof without / sizeof without[0]; i++) {
        m = error_of(state, without[i], &plain, "syntax_error", &r);
        if (strstr(m, "bare expression") != NULL)
            fail_msg("a note for %s: %s", without[i], m);
        run_free(&r);
    }
    m = error_of(state, "x = 1\nx", &check, "syntax_error", &r);
    assert_non_null(strstr(m, "bare expression"));
    run_free(&r);
    /* Each trial compiles within HINT_HEAP in a state of its own: a chunk
     * whose trial needs more (100000 functions, about 15 MiB) gets no note
     * and still its syntax error; 20000 (about 3 MiB) get it. */
    big = malloc(100000 * 15 + 64);
    assert_non_null(big);
    for (i = 0; i < 2; i++) {
        size_t n = i == 0 ? 20000 : 100000, k, len = 0;
        len += (size_t)sprintf(big, "local t = {");
        for (k = 0; k < n; k++)
            len += (size_t)sprintf(big + len, "function() end,");
        sprintf(big + len, "}\nt");
        m = error_of(state, big, &plain, "syntax_error", &r);
        assert_non_null(strstr(m, "input:2:"));
        if ((strstr(m, "bare expression") != NULL) != (i == 0))
            fail_msg("%zu functions: %s", n, m);
        run_free(&r);
    }
    free(big);
}

static void test_runtime_error(void **state)
{
    struct run r;
    const char *m;

    m = error_of(state, "local a = 1\n\nlocal function f() error('boom') end\nf()", &plain,
                 "runtime_error", &r);
    assert_string_equal(m, "input:3: boom");
    assert_int_equal(json_integer_value(json_object_get(r.end, "line")), 3);
    assert_non_null(strstr(json_string_value(json_object_get(r.end, "traceback")),
                           "stack traceback"));
    run_free(&r);
    m = error_of(state, "error(setmetatable({}, {__tostring = function() while true do end end}))",
                 &plain, "runtime_error", &r);
    assert_string_equal(m, "(error object is a table value)");
    run_free(&r);
    m = error_of(state, "error(string.rep('e', 100000))", &plain, "runtime_error", &r);
    assert_true(strlen(m) <= 8192);
    run_free(&r);
    /* results that cannot be encoded */
    m = error_of(state, "local t = {} t[1] = t return t", &plain, "runtime_error", &r);
    assert_non_null(strstr(m, "cycle"));
    run_free(&r);
}

/* ---- limits ---- */

#define HOG "local function hog() local t = {} while true do t[#t + 1] = {} end end\n"

/* Each ends with memory_limit and never reaches a print: a wrapper that
 * swallowed the limit would let the script go on (there is no count hook
 * without a reductions budget, so only the wrappers stop it). */
static const char *const memory_escapes[] = {
    HOG "hog()",
    HOG "pcall(hog) print('escaped')",
    HOG "for i = 1, 3 do pcall(hog) print('escaped') end",
    HOG "xpcall(hog, function(e) print('handler') return e end) print('escaped')",
    HOG "local co = coroutine.create(hog) coroutine.resume(co) print('escaped')",
    HOG "pcall(coroutine.wrap(hog)) print('escaped')",
    HOG "local f = load(function() hog() end) print('escaped')",
    HOG "pcall(load, function() hog() end) print('escaped')",
    /* a refused luaL_Buffer ("not enough memory for buffer allocation") */
    "local a, b = string.rep('a', 1200000), string.rep('b', 1200000)\n"
    "local ok, e = pcall(string.rep, 'x', 1900000) print('escaped', e)",
    "local a, b = string.rep('a', 1200000), string.rep('b', 1200000)\n"
    "xpcall(string.rep, function(e) print('handler', e) end, 'x', 1900000) print('escaped')",
    "keep = {} for i = 1, 1000 do pcall(function() keep[#keep + 1] = ('%s'):format(string.rep("
    "'b', 200000)) end) end print('escaped')",
    /* a stack growth refused inside lua_checkstack, reported as an ordinary error */
#define FILL "local fill = {} for i = 1, 30 do fill[i] = string.rep('x', 100000) .. i end\n"
    FILL "local ok = pcall(table.unpack, {}, 1, 900000) print('escaped')",
    FILL "local ok = pcall(coroutine.wrap(function() return table.unpack({}, 1, 40000) end)) "
    "print('escaped')",
};

static void test_memory_limit_uncatchable(void **state)
{
    struct job_opts o = {.limits = "{\"max_heap\": 4000000}"};
    struct run r;
    size_t i;

    for (i = 0; i < sizeof memory_escapes / sizeof *memory_escapes; i++) {
        error_of(state, memory_escapes[i], &o, "memory_limit", &r);
        assert_string_equal(r.output, "");
        assert_true(json_integer_value(json_object_get(json_object_get(r.end, "stats"),
                                                       "heap_peak_bytes")) <= 4000000);
        run_free(&r);
    }
    /* below the state's own size: still bounded */
    o.limits = "{\"max_heap\": 4}";
    error_of(state, "return 1", &o, "memory_limit", &r);
    run_free(&r);
}

#define SPIN "local function spin() while true do end end\n"

static const char *const reduction_escapes[] = {
    SPIN "spin()",
    SPIN "pcall(spin) print('escaped')",
    SPIN "for i = 1, 3 do pcall(spin) end print('escaped')",
    SPIN "xpcall(spin, function(e) print('handler') return e end) print('escaped')",
    SPIN "xpcall(spin, function(e) while true do end end) print('escaped')",
    SPIN "local co = coroutine.create(spin) coroutine.resume(co) print('escaped')",
    SPIN "pcall(coroutine.wrap(spin)) print('escaped')",
    SPIN "local co = coroutine.wrap(function() pcall(spin) end) pcall(co) print('escaped')",
    SPIN "local f = load(function() spin() end) print('escaped')",
    SPIN "for i = 1, 1e9 do local ok = pcall(error, i) end print('escaped')",
    /* errors inside lua_load must not end the chunk's limits */
    SPIN "load(function() return {} end) spin()",
    SPIN "load(function() error('x') end) spin()",
    SPIN "load(string.rep('do local a end ', 40000)) spin()",
};

static void test_reductions_limit_uncatchable(void **state)
{
    struct job_opts o = {.limits = "{\"max_reductions\": 100000}"};
    struct run r;
    size_t i;

    for (i = 0; i < sizeof reduction_escapes / sizeof *reduction_escapes; i++) {
        const char *msg = error_of(state, reduction_escapes[i], &o, "reductions_limit", &r);
        json_int_t counted = json_integer_value(json_object_get(json_object_get(r.end, "stats"),
                                                                "reductions"));
        assert_string_equal(r.output, "");
        /* past the budget, or stopped before a library call that would be */
        if (strstr(msg, "a library call would have cost") != NULL)
            assert_true(counted <= 100000);
        else
            assert_true(counted > 100000);
        run_free(&r);
    }
    /* within budget: counted, not stopped */
    o.limits = "{\"max_reductions\": 1000000}";
    assert_json(value_of(state, "local s = 0 for i = 1, 1000 do s = s + i end return s", &o, &r),
                "500500");
    assert_true(json_integer_value(json_object_get(json_object_get(r.end, "stats"),
                                                   "reductions")) > 0);
    run_free(&r);
}

static void test_string_too_large(void **state)
{
    struct job_opts o = {.limits = "{\"max_heap\": 10000000}"};   /* string cap 5 MB */
    struct run r;
    json_t *v;

    v = value_of(state, "local ok, e = pcall(string.rep, 'x', 6000000)\n"
                        "local s = string.rep('x', 3000000)\n"
                        "local ok2, e2 = pcall(function() return s .. s end)\n"
                        "local t, p = {}, string.rep('y', 1000000)\n"
                        "for i = 1, 6 do t[i] = p end\n"
                        "local ok3, e3 = pcall(table.concat, t)\n"
                        "local ok4, e4 = pcall(string.rep, 'ab', math.maxinteger, ',')\n"
                        "return ok, e, ok2, e2, ok3, e3, ok4, e4, #table.concat(t, '', 1, 2)",
                 &o, &r);
    assert_true(json_is_false(json_array_get(v, 0)));
    assert_non_null(strstr(json_string_value(json_array_get(v, 1)), "resulting string too large"));
    assert_true(json_is_false(json_array_get(v, 2)));
    assert_string_equal(json_string_value(json_array_get(v, 3)), "resulting string too large");
    assert_true(json_is_false(json_array_get(v, 4)));
    assert_non_null(strstr(json_string_value(json_array_get(v, 5)), "resulting string too large"));
    assert_true(json_is_false(json_array_get(v, 6)));
    assert_non_null(strstr(json_string_value(json_array_get(v, 7)), "resulting string too large"));
    assert_int_equal(json_integer_value(json_array_get(v, 8)), 2000000);
    run_free(&r);
    /* uncaught, it is an ordinary runtime error, not memory_limit */
    assert_non_null(strstr(error_of(state, "local s = string.rep('x', 3000000) return s .. s", &o,
                                    "runtime_error", &r), "resulting string too large"));
    run_free(&r);
    /* the empty string repeated is "" at once */
    assert_json(value_of(state, "return #string.rep('', math.maxinteger),"
                                " #string.rep('', math.maxinteger, '')", &plain, &r), "[0, 0]");
    run_free(&r);
}

/* ---- the environment ---- */

static void test_gc_refused(void **state)
{
    struct run r;
    json_t *v;

    v = value_of(state, "local ok, e = pcall(setmetatable, {}, {__gc = function() end})\n"
                        "local t = setmetatable({}, {__index = {k = 1}})\n"
                        "return ok, e, t.k", &plain, &r);
    assert_true(json_is_false(json_array_get(v, 0)));
    assert_non_null(strstr(json_string_value(json_array_get(v, 1)), "__gc metamethods are not allowed"));
    assert_int_equal(json_integer_value(json_array_get(v, 2)), 1);
    run_free(&r);
}

static void test_load(void **state)
{
    struct run r;
    json_t *v;

    v = value_of(state, "local a, e1 = load(string.char(27) .. 'Lua')\n"
                        "local b, e2 = load(string.char(27) .. 'Lua', 'x', 'b')\n"
                        "local once = false\n"
                        "local c, e3 = load(function() if once then return nil end once = true"
                        " return string.char(27) .. 'LuaS' end)\n"
                        "y = 7\n"
                        "return a, e1, b, e2, c, e3, load('return x', 'c', 't', {x = 5})(),"
                        " load('return y')()", &plain, &r);
    assert_true(json_is_null(json_array_get(v, 0)));
    assert_non_null(strstr(json_string_value(json_array_get(v, 1)), "binary"));
    assert_true(json_is_null(json_array_get(v, 2)));
    assert_non_null(strstr(json_string_value(json_array_get(v, 3)), "binary"));
    assert_true(json_is_null(json_array_get(v, 4)));
    assert_non_null(strstr(json_string_value(json_array_get(v, 5)), "binary"));
    assert_int_equal(json_integer_value(json_array_get(v, 6)), 5);
    assert_int_equal(json_integer_value(json_array_get(v, 7)), 7);
    run_free(&r);
}

static void test_removed_functions(void **state)
{
    struct run r;

    assert_json(value_of(state, "return type(io), type(os.execute), type(os.getenv), type(os.exit),"
                                " type(os.remove), type(debug), type(require), type(package),"
                                " type(dofile), type(loadfile), type(string.dump), type(('').upper),"
                                " type(('').dump)", &plain, &r),
                "[\"nil\", \"nil\", \"nil\", \"nil\", \"nil\", \"nil\", \"nil\", \"nil\", \"nil\","
                " \"nil\", \"nil\", \"function\", \"nil\"]");
    run_free(&r);
    assert_json(value_of(state, "local ok, d = pcall(function() return getmetatable('').__index.dump end)\n"
                                "return type(getmetatable('')), ok and d ~= nil", &plain, &r),
                "[\"table\", false]");
    run_free(&r);
    assert_json(value_of(state, "return type(os.time), type(os.clock), type(os.date),"
                                " type(os.difftime), select('#', unpack({1, 2, 3})) == 3"
                                " and unpack ~= table.unpack, type(utf8.char),"
                                " type(coroutine.create), collectgarbage('count') > 0,"
                                " collectgarbage('collect'), collectgarbage('stop')", &plain, &r),
                "[\"function\", \"function\", \"function\", \"function\", true, \"function\","
                " \"function\", true, 0, 0]");
    run_free(&r);
}

static void test_coroutines_still_work(void **state)
{
    struct run r;

    assert_json(value_of(state, "local co = coroutine.wrap(function(a) local b = coroutine.yield(a + 1)"
                                " return b * 2 end)\n"
                                "local r1 = co(1) local r2 = co(10)\n"
                                "local c2 = coroutine.create(function() pcall(coroutine.yield, 5)"
                                " error('late') end)\n"
                                "local _, y = coroutine.resume(c2)\n"
                                "local ok, e = coroutine.resume(c2)\n"
                                "local ok3, e3 = pcall(coroutine.wrap(function() error('w') end))\n"
                                "return r1, r2, y, ok, e, ok3, e3", &plain, &r),
                "[2, 20, 5, false, \"input:3: late\", false, \"input:6: w\"]");
    run_free(&r);
}

static void test_prompt_info(void **state)
{
    json_t *p = prompt_info_new(0);
    const char *c = json_string_value(json_object_get(p, "constraints"));
    json_t *ps = prompt_info_new(1);
    const char *cs = json_string_value(json_object_get(ps, "constraints"));

    (void)state;
    assert_string_equal(json_string_value(json_object_get(p, "language")), "Lua 5.3");
    assert_non_null(c);
    assert_non_null(strstr(c, "return <expression>"));
    assert_non_null(strstr(c, "global"));
    assert_non_null(strstr(c, "resulting string too large"));
    assert_non_null(strstr(json_string_value(json_object_get(p, "tool_usage")), "Name.fn("));
    assert_non_null(strstr(c, "parallel("));
    assert_null(strstr(c, "This is a session"));
    /* session mode: what persists differs, the rest is the same */
    assert_non_null(cs);
    assert_non_null(strstr(cs, "This is a session"));
    assert_non_null(strstr(cs, "functions"));
    assert_non_null(strstr(cs, "parallel("));
    assert_null(strstr(cs, "define helper functions again"));
    json_decref(p);
    json_decref(ps);
}

static int group_setup(void **state)
{
    signal(SIGPIPE, SIG_IGN);
    *state = worker_env_new();
    return *state == NULL ? -1 : 0;
}

static int group_teardown(void **state)
{
    luaenv_free(*state);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_return_values),
        cmocka_unit_test(test_integer_float),
        cmocka_unit_test(test_print_capture),
        cmocka_unit_test(test_print_truncated),
        cmocka_unit_test(test_tool_round_trip),
        cmocka_unit_test(test_tool_error),
        cmocka_unit_test(test_tool_arity),
        cmocka_unit_test(test_bindings_round_trip),
        cmocka_unit_test(test_bindings_globals_table),
        cmocka_unit_test(test_bindings_baseline),
        cmocka_unit_test(test_syntax_error),
        cmocka_unit_test(test_syntax_hint),
        cmocka_unit_test(test_runtime_error),
        cmocka_unit_test(test_memory_limit_uncatchable),
        cmocka_unit_test(test_reductions_limit_uncatchable),
        cmocka_unit_test(test_string_too_large),
        cmocka_unit_test(test_gc_refused),
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_removed_functions),
        cmocka_unit_test(test_coroutines_still_work),
        cmocka_unit_test(test_prompt_info),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
