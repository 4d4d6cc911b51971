/*
 * test_tools.c - proto/tools.c: a request's tool declarations, normalised
 * for the job and indexed for the tool-call check; every refusal, each
 * bound at its edge, and the input left as it was.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "proto/jsonrpc.h"
#include "proto/tools.h"

static json_t *load(const char *text)
{
    json_error_t je;
    json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);

    if (!v)
        fail_msg("bad test JSON %s: %s", text, je.text);
    return v;
}

/* tools_norm on text; the result and *index checked against their
 * contract.  Returns the normalised array (caller frees) or NULL with err. */
static json_t *norm(const char *text, json_t **index, char *err, size_t errlen)
{
    json_t *in = text ? load(text) : NULL, *copy = in ? json_deep_copy(in) : NULL, *out;
    json_t *sentinel = json_string("untouched");

    *index = sentinel;
    memset(err, 'x', errlen);
    out = tools_norm(in, index, err, errlen);
    if (out) {
        assert_true(json_is_array(out));
        assert_true(json_is_object(*index));
        assert_int_equal(json_object_size(*index), json_array_size(out));
    } else {
        assert_ptr_equal(*index, sentinel);
        assert_non_null(memchr(err, '\0', errlen));
    }
    if (in)
        assert_true(json_equal(in, copy));      /* the input is never modified */
    json_decref(in);
    json_decref(copy);
    json_decref(sentinel);
    return out;
}

static void accepts(const char *text, const char *want)
{
    json_t *index, *out, *w = load(want);
    char err[256];

    out = norm(text, &index, err, sizeof err);
    if (!out)
        fail_msg("%s refused: %s", text, err);
    if (!json_equal(out, w)) {
        char *got = json_dumps(out, JSON_COMPACT);
        fail_msg("%s gave %s, want %s", text, got, want);
    }
    json_decref(out);
    json_decref(index);
    json_decref(w);
}

static void refuses(const char *text, const char *msg_part)
{
    json_t *index;
    char err[256];

    if (norm(text, &index, err, sizeof err))
        fail_msg("%s accepted", text);
    if (!strstr(err, msg_part))
        fail_msg("%s: message '%s' lacks '%s'", text, err, msg_part);
}

static void test_none(void **state)
{
    json_t *index, *out;
    char err[64];

    (void)state;
    out = norm(NULL, &index, err, sizeof err);
    assert_non_null(out);
    assert_int_equal(json_array_size(out), 0);
    json_decref(out);
    json_decref(index);
    accepts("null", "[]");
    accepts("[]", "[]");
}

static void test_normalised(void **state)
{
    (void)state;
    accepts("[{\"name\":\"Weather\"}]",
            "[{\"name\":\"Weather\",\"module\":\"Weather\",\"functions\":[]}]");
    accepts("[{\"name\":\"W\",\"module\":null,\"functions\":null}]",
            "[{\"name\":\"W\",\"module\":\"W\",\"functions\":[]}]");
    accepts("[{\"name\":\"W\",\"module\":\"MyApp.W\",\"functions\":[\"get\","
            "{\"name\":\"list\"},{\"name\":\"set\",\"arities\":null},"
            "{\"name\":\"put\",\"arities\":[1,2]}]}]",
            "[{\"name\":\"W\",\"module\":\"MyApp.W\",\"functions\":[\"get\",\"list\",\"set\","
            "{\"name\":\"put\",\"arities\":[1,2]}]}]");
    /* function names need not be identifiers; unknown members are dropped */
    accepts("[{\"name\":\"_x9\",\"functions\":[\"valid?\",\"get-sum\",\"\\u00e9\"],\"x\":1}]",
            "[{\"name\":\"_x9\",\"module\":\"_x9\",\"functions\":[\"valid?\",\"get-sum\","
            "\"\\u00e9\"]}]");
}

static void test_index(void **state)
{
    json_t *index, *out;
    const json_t *tool = NULL, *f;
    char err[256];

    (void)state;
    out = norm("[{\"name\":\"A\",\"module\":\"M\",\"functions\":[\"f\","
               "{\"name\":\"g\",\"arities\":[0,2]}]},{\"name\":\"B\"}]", &index, err, sizeof err);
    assert_non_null(out);
    f = tools_find(index, "A", "f", &tool);
    assert_non_null(f);
    assert_string_equal(json_string_value(json_object_get(tool, "module")), "M");
    assert_true(tools_arity_ok(f, 0));
    assert_true(tools_arity_ok(f, 250));
    tool = NULL;
    f = tools_find(index, "A", "g", &tool);
    assert_non_null(f);
    assert_non_null(tool);
    assert_true(tools_arity_ok(f, 0));
    assert_false(tools_arity_ok(f, 1));
    assert_true(tools_arity_ok(f, 2));
    assert_false(tools_arity_ok(f, 3));
    tool = NULL;
    assert_null(tools_find(index, "A", "h", &tool));
    assert_null(tool);                      /* untouched when not found */
    assert_null(tools_find(index, "B", "f", &tool));
    assert_null(tools_find(index, "C", "f", &tool));
    assert_null(tools_find(index, "A", "__module", &tool));
    json_decref(out);
    json_decref(index);
}

static void test_refused(void **state)
{
    (void)state;
    refuses("{}", "tools must be an array");
    refuses("\"Weather\"", "tools must be an array");
    refuses("[1]", "tools[0] must be an object");
    refuses("[{}]", "tools[0] must be an object");
    refuses("[{\"name\":1}]", "tools[0] must be an object");
    refuses("[{\"name\":\"A\\u0000B\"}]", "tools[0] must be an object");
    refuses("[{\"name\":\"\"}]", "not a free Lua identifier");
    refuses("[{\"name\":\"9a\"}]", "not a free Lua identifier");
    refuses("[{\"name\":\"a-b\"}]", "not a free Lua identifier");
    refuses("[{\"name\":\"string\"}]", "not a free Lua identifier");
    refuses("[{\"name\":\"print\"}]", "not a free Lua identifier");
    refuses("[{\"name\":\"parallel\"}]", "not a free Lua identifier");
    refuses("[{\"name\":\"while\"}]", "not a free Lua identifier");
    refuses("[{\"name\":\"_ENV\"}]", "not a free Lua identifier");
    refuses("[{\"name\":\"A\",\"module\":1}]", "module must be a string");
    refuses("[{\"name\":\"A\",\"module\":\"a\\u0000\"}]", "module must be a string");
    refuses("[{\"name\":\"A\",\"functions\":{}}]", "functions must be an array");
    refuses("[{\"name\":\"A\"},{\"name\":\"A\"}]", "tool A is declared twice");
    refuses("[{\"name\":\"A\",\"functions\":[1]}]", "each entry must be a name");
    refuses("[{\"name\":\"A\",\"functions\":[{\"arities\":[1]}]}]", "each entry must be a name");
    refuses("[{\"name\":\"A\",\"functions\":[\"\"]}]", "function name");
    refuses("[{\"name\":\"A\",\"functions\":[\"__module\"]}]", "function name");
    refuses("[{\"name\":\"A\",\"functions\":[\"a\\u0000b\"]}]", "function name");
    refuses("[{\"name\":\"A\",\"functions\":[\"f\",{\"name\":\"f\"}]}]", "function f declared twice");
    refuses("[{\"name\":\"A\",\"functions\":[{\"name\":\"f\",\"arities\":[]}]}]", "arities must be");
    refuses("[{\"name\":\"A\",\"functions\":[{\"name\":\"f\",\"arities\":1}]}]", "arities must be");
    refuses("[{\"name\":\"A\",\"functions\":[{\"name\":\"f\",\"arities\":[-1]}]}]",
            "arities must be integers from 0 to 250");
    refuses("[{\"name\":\"A\",\"functions\":[{\"name\":\"f\",\"arities\":[251]}]}]",
            "arities must be integers from 0 to 250");
    refuses("[{\"name\":\"A\",\"functions\":[{\"name\":\"f\",\"arities\":[1.0]}]}]",
            "arities must be integers");
}

/* A list of n entries made by item(i) for i in 0..n-1. */
static json_t *list_of(size_t n, json_t *(*item)(size_t))
{
    json_t *a = json_array();

    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, item(i));
    return a;
}

static json_t *tool_i(size_t i)
{
    char name[32];

    snprintf(name, sizeof name, "T%zu", i);
    return json_pack("{s:s}", "name", name);
}

static json_t *fn_i(size_t i)
{
    char name[32];

    snprintf(name, sizeof name, "f%zu", i);
    return json_string(name);
}

static json_t *arity_i(size_t i)
{
    return json_integer((json_int_t)i);
}

/* tools_norm of v (stolen): 1 accepted, 0 refused. */
static int accepted(json_t *v)
{
    json_t *index = NULL, *out;
    char err[256];

    out = tools_norm(v, &index, err, sizeof err);
    json_decref(v);
    json_decref(index);
    json_decref(out);
    return out != NULL;
}

static void test_bounds(void **state)
{
    char name[TOOLS_MAX_NAME + 2];

    (void)state;
    assert_true(accepted(list_of(TOOLS_MAX, tool_i)));
    assert_false(accepted(list_of(TOOLS_MAX + 1, tool_i)));
    assert_true(accepted(json_pack("[{s:s,s:o}]", "name", "A", "functions",
                                   list_of(TOOLS_MAX_FUNCTIONS, fn_i))));
    assert_false(accepted(json_pack("[{s:s,s:o}]", "name", "A", "functions",
                                    list_of(TOOLS_MAX_FUNCTIONS + 1, fn_i))));
    assert_true(accepted(json_pack("[{s:s,s:[{s:s,s:o}]}]", "name", "A", "functions",
                                   "name", "f", "arities", list_of(TOOLS_MAX_ARITIES, arity_i))));
    assert_false(accepted(json_pack("[{s:s,s:[{s:s,s:o}]}]", "name", "A", "functions",
                                    "name", "f", "arities",
                                    list_of(TOOLS_MAX_ARITIES + 1, arity_i))));
    assert_true(accepted(json_pack("[{s:s,s:[{s:s,s:[i]}]}]", "name", "A", "functions",
                                   "name", "f", "arities", TOOLS_MAX_ARITY)));

    memset(name, 'a', sizeof name);
    name[TOOLS_MAX_NAME] = '\0';
    assert_true(accepted(json_pack("[{s:s}]", "name", name)));
    assert_true(accepted(json_pack("[{s:s,s:[s]}]", "name", "A", "functions", name)));
    name[TOOLS_MAX_NAME] = 'a';
    name[TOOLS_MAX_NAME + 1] = '\0';
    assert_false(accepted(json_pack("[{s:s}]", "name", name)));
    assert_false(accepted(json_pack("[{s:s,s:[s]}]", "name", "A", "functions", name)));

    {
        char module[RPC_ID_MAX + 2];
        memset(module, 'm', sizeof module);
        module[RPC_ID_MAX] = '\0';
        assert_true(accepted(json_pack("[{s:s,s:s}]", "name", "A", "module", module)));
        module[RPC_ID_MAX] = 'm';
        module[RPC_ID_MAX + 1] = '\0';
        assert_false(accepted(json_pack("[{s:s,s:s}]", "name", "A", "module", module)));
    }
}

/* The entries the duplicate checks look at (tools.h: tools_probe). */
static unsigned long probes;

void tools_probe(void)
{
    probes++;
}

/* Every name is checked for a duplicate by one hash lookup: a maximal list
 * (TOOLS_MAX tools of TOOLS_MAX_FUNCTIONS functions) costs one probe per
 * name, 65792, where a scan of the entries so far costs 8388480.  Counted,
 * not timed, so a loaded machine cannot move it. */
static void test_duplicate_checks_are_linear(void **state)
{
    json_t *tools = json_array(), *index = NULL, *out, *fns;
    unsigned long names = TOOLS_MAX + TOOLS_MAX * TOOLS_MAX_FUNCTIONS;
    char err[256];
    size_t i;

    (void)state;
    for (i = 0; i < TOOLS_MAX; i++) {
        json_t *t = tool_i(i);
        json_object_set_new(t, "functions", list_of(TOOLS_MAX_FUNCTIONS, fn_i));
        json_array_append_new(tools, t);
    }
    probes = 0;
    out = tools_norm(tools, &index, err, sizeof err);
    assert_non_null(out);
    assert_int_equal(probes, names);
    json_decref(out);
    json_decref(index);

    /* refused by its very last name: every check ran, each once */
    fns = json_object_get(json_array_get(tools, TOOLS_MAX - 1), "functions");
    json_array_set_new(fns, TOOLS_MAX_FUNCTIONS - 1, json_string("f0"));
    probes = 0;
    assert_null(tools_norm(tools, &index, err, sizeof err));
    assert_non_null(strstr(err, "function f0 declared twice"));
    assert_int_equal(probes, names);
    json_decref(tools);
}

/* A message longer than the buffer is cut, still NUL-terminated. */
static void test_short_buffer(void **state)
{
    json_t *index, *in = load("[{\"name\":\"print\"}]");
    char err[8];

    (void)state;
    memset(err, 'x', sizeof err);
    assert_null(tools_norm(in, &index, err, sizeof err));
    assert_non_null(memchr(err, '\0', sizeof err));
    json_decref(in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_none),
        cmocka_unit_test(test_normalised),
        cmocka_unit_test(test_index),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_short_buffer),
        cmocka_unit_test(test_duplicate_checks_are_linear),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
