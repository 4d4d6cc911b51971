/*
 * fuzz_tools.c - proto/tools.c: the tool declarations of a request
 * (params.tools of execute and session/open), which the supervisor
 * validates before any worker sees them.
 *
 * Input: JSON text, parsed as rpc_parse() parses request params
 * (JSON_DECODE_ANY | JSON_ALLOW_NUL).  Checks (proto/tools.h):
 *  - the input is never modified;
 *  - a refusal returns NULL with a NUL-terminated message and *index
 *    untouched, also with a short message buffer;
 *  - an acceptance gives an array of tools {name, module, functions} with
 *    every field of the normal form (name a free identifier of at most
 *    TOOLS_MAX_NAME bytes, module a string without NUL, each function a
 *    name string or {name, arities}) and unique names, and an index with
 *    one entry per tool; tools_find() finds each declared function with
 *    its own tool's module, and nothing that was not declared;
 *    tools_arity_ok() allows exactly the declared arities;
 *  - the normal form is a fixed point: normalising it again gives the same
 *    array.
 */
#include <stdint.h>
#include <string.h>

#include <jansson.h>

#include "proto/jsonrpc.h"
#include "proto/tools.h"
#include "tests/fuzz/fuzz_util.h"

static const char *entry_name(const json_t *entry)
{
    return json_is_string(entry) ? json_string_value(entry)
                                 : json_string_value(json_object_get(entry, "name"));
}

static int listed(const json_t *arities, json_int_t n)
{
    size_t i;
    json_t *a;

    json_array_foreach(arities, i, a)
        if (json_integer_value(a) == n)
            return 1;
    return 0;
}

static void check_function(const json_t *index, const char *tool, const json_t *module,
                           const json_t *f)
{
    const char *name = entry_name(f);
    const json_t *found, *tool_out = NULL, *ar = json_object_get(f, "arities");

    CHECK(json_is_string(f) || (json_is_object(f) && json_object_size(f) == 2 &&
                                json_is_array(ar)), "function entry not normal");
    CHECK(rpc_cstring(json_is_string(f) ? f : json_object_get(f, "name")) != NULL &&
          strlen(name) > 0 && strlen(name) <= TOOLS_MAX_NAME && strcmp(name, "__module") != 0,
          "function name %s", name);
    found = tools_find(index, tool, name, &tool_out);
    CHECK(found != NULL && json_equal(found, f), "%s.%s not found as declared", tool, name);
    CHECK(json_equal(json_object_get(tool_out, "module"), module), "%s: module", tool);
    for (json_int_t n = 0; n <= TOOLS_MAX_ARITY + 1; n++)
        CHECK(tools_arity_ok(found, (size_t)n) == (!ar || listed(ar, n)),
              "%s.%s arity %lld", tool, name, (long long)n);
    if (ar)
        CHECK(json_array_size(ar) >= 1 && json_array_size(ar) <= TOOLS_MAX_ARITIES,
              "arities count");
}

static void check_accepted(const json_t *out, const json_t *index)
{
    size_t i, j;
    json_t *t, *f;

    CHECK(json_is_array(out) && json_array_size(out) <= TOOLS_MAX, "not an array");
    CHECK(json_is_object(index) && json_object_size(index) == json_array_size(out),
          "index size %zu for %zu tools", json_object_size(index), json_array_size(out));
    json_array_foreach(out, i, t) {
        const char *name = rpc_cstring(json_object_get(t, "name"));
        const json_t *module = json_object_get(t, "module");
        const json_t *fns = json_object_get(t, "functions");
        const json_t *tool_out = NULL;

        CHECK(json_object_size(t) == 3 && name && rpc_cstring(module) &&
              json_is_array(fns) && json_array_size(fns) <= TOOLS_MAX_FUNCTIONS,
              "tool %zu not normal", i);
        CHECK(strlen(name) >= 1 && strlen(name) <= TOOLS_MAX_NAME &&
              strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") ==
              strlen(name) && !(name[0] >= '0' && name[0] <= '9'), "tool name %s", name);
        CHECK(json_object_size(json_object_get(json_object_get(index, name), "functions")) ==
              json_array_size(fns), "%s: duplicate functions accepted", name);
        json_array_foreach(fns, j, f)
            check_function(index, name, module, f);
        CHECK(tools_find(index, name, "__module", &tool_out) == NULL, "__module found");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t je;
    json_t *in = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    json_t *copy, *out, *again, *index, *index2, *sentinel;
    char err[256], small[5];

    if (in == NULL)
        return 0;
    sentinel = json_object();
    copy = json_deep_copy(in);
    index = sentinel;
    memset(err, 'x', sizeof err);
    out = tools_norm(in, &index, err, sizeof err);
    CHECK(json_equal(in, copy), "the input was modified");
    if (out == NULL) {
        CHECK(index == sentinel, "*index written on failure");
        CHECK(memchr(err, '\0', sizeof err) != NULL, "message not terminated");
        memset(small, 'x', sizeof small);
        CHECK(tools_norm(in, &index, small, sizeof small) == NULL, "accepted the second time");
        CHECK(memchr(small, '\0', sizeof small) != NULL, "short message not terminated");
    } else {
        check_accepted(out, index);
        index2 = NULL;
        again = tools_norm(out, &index2, err, sizeof err);
        CHECK(again != NULL && json_equal(again, out), "normal form refused or changed: %s",
              again ? "changed" : err);
        CHECK(json_equal(index2, index), "index of the normal form differs");
        json_decref(again);
        json_decref(index2);
        json_decref(index);
    }
    json_decref(out);
    json_decref(copy);
    json_decref(in);
    json_decref(sentinel);
    return 0;
}
