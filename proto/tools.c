/*
 * tools.c - a request's tool declarations, validated and normalised for the
 * worker and indexed for the supervisor's check of each tool call.  See
 * tools.h.
 */
#include "proto/tools.h"

#include <stdio.h>
#include <string.h>

#include "proto/jsonrpc.h"      /* rpc_cstring, RPC_ID_MAX */
#include "proto/mutant.h"

/* Globals the sandbox defines and Lua's reserved words: a tool may not take
 * these names (it would replace part of the environment).  Keep in step with
 * worker/luaenv.c. */
static const char *const reserved[] = {
    "_G", "_ENV", "_VERSION", "assert", "collectgarbage", "error", "getmetatable", "ipairs",
    "load", "next", "pairs", "pcall", "print", "rawequal", "rawget", "rawlen", "rawset",
    "select", "setmetatable", "tonumber", "tostring", "type", "xpcall", "unpack", "parallel",
    "string", "table", "math", "utf8", "coroutine", "os",
    "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if",
    "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
    NULL,
};

static int is_identifier(const char *s)
{
    size_t i, n = strlen(s);

    if (n == 0 || n > TOOLS_MAX_NAME || (s[0] >= '0' && s[0] <= '9'))
        return 0;
    for (i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch >= '0' && ch <= '9') || ch == '_'))
            return 0;
    }
    return 1;
}

/* A function name becomes a field of its tool's table, so it need not be a
 * Lua identifier (Elixir's `valid?`, MCP's `get-sum`): any non-empty string
 * of at most TOOLS_MAX_NAME bytes without NUL (jansson has already checked
 * that it is UTF-8), except the table's own `__module`. */
static int is_function_name(const json_t *name)
{
    const char *s = rpc_cstring(name);
    size_t n = json_string_length(name);

    return s && n > 0 && n <= TOOLS_MAX_NAME && strcmp(s, "__module") != 0;
}

static int is_reserved(const char *s)
{
    for (size_t i = 0; reserved[i]; i++)
        if (strcmp(s, reserved[i]) == 0)
            return 1;
    return 0;
}

/* Normalise one entry of `functions`: its name (a string) when it has no
 * arities, else {"name": .., "arities": [..]}.  Returns a new reference or
 * NULL with err set. */
static json_t *norm_function(const char *tool, const json_t *f, char *err, size_t errlen)
{
    const json_t *jname, *ar = NULL, *a;
    const char *name;
    json_t *out;
    size_t i;

    if (json_is_string(f)) {
        jname = f;
    } else if (json_is_object(f) && json_is_string(json_object_get(f, "name"))) {
        jname = json_object_get(f, "name");
        ar = json_object_get(f, "arities");
    } else {
        snprintf(err, errlen, "tools[%s].functions: each entry must be a name or {\"name\": ..}", tool);
        return NULL;
    }
    name = json_string_value(jname);
    if (!is_function_name(jname)) {
        snprintf(err, errlen, "tool %s: function name '%.64s' must be 1 to %d bytes without NUL, "
                 "and not __module", tool, name, TOOLS_MAX_NAME);
        return NULL;
    }
    if (ar && !json_is_null(ar)) {
        if (!json_is_array(ar) || json_array_size(ar) == 0 ||
            json_array_size(ar) > TOOLS_MAX_ARITIES) {
            snprintf(err, errlen, "%s.%s: arities must be a non-empty array of integers", tool, name);
            return NULL;
        }
        json_array_foreach(ar, i, a) {
            if (!json_is_integer(a) || json_integer_value(a) < 0 ||
                json_integer_value(a) > TOOLS_MAX_ARITY) {
                snprintf(err, errlen, "%s.%s: arities must be integers from 0 to %d", tool, name,
                         TOOLS_MAX_ARITY);
                return NULL;
            }
        }
    }
    /* A plain name stays the client's own string (a reference, no copy):
     * this runs up to TOOLS_MAX x TOOLS_MAX_FUNCTIONS times per request. */
    if (!ar || json_is_null(ar))
        return json_incref((json_t *)jname);
    out = json_object();
    if (!out || json_object_set_nocheck(out, "name", (json_t *)jname) < 0 ||
        json_object_set_nocheck(out, "arities", (json_t *)ar) < 0) {
        json_decref(out);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    return out;
}

/* The name of a normalised tool or function entry. */
static const char *entry_name(const json_t *entry)
{
    return json_is_string(entry) ? json_string_value(entry)
                                 : json_string_value(json_object_get(entry, "name"));
}

/* Is key already in set?  Duplicate checks go through a jansson object,
 * a hash table (seeded per process), so a maximal list (TOOLS_MAX x
 * TOOLS_MAX_FUNCTIONS) costs linear time; a scan of the entries so far made
 * it quadratic and stalled every other client for a third of a second. */
static int seen(const json_t *set, const json_t *arr, const char *key)
{
    size_t k;
    json_t *g;

    if (MUTANT(TOOLS_LINEAR)) {         /* mutant: the quadratic scan */
        json_array_foreach(arr, k, g) {
            if (tools_probe)
                tools_probe();
            if (strcmp(entry_name(g), key) == 0)
                return 1;
        }
        return 0;
    }
    if (tools_probe)
        tools_probe();
    return json_object_get(set, key) != NULL;
}

json_t *tools_norm(const json_t *tools, json_t **index, char *err, size_t errlen)
{
    json_t *out = json_array(), *idx = json_object(), *t, *f, *fns;
    size_t i, j;

    if (!out || !idx)
        goto nomem;
    if (!tools || json_is_null(tools))
        goto done;
    if (!json_is_array(tools) || json_array_size(tools) > TOOLS_MAX) {
        snprintf(err, errlen, "tools must be an array of at most %d tools", TOOLS_MAX);
        goto fail;
    }
    json_array_foreach(tools, i, t) {
        const char *name = rpc_cstring(json_object_get(t, "name"));
        const json_t *module = json_object_get(t, "module");
        const json_t *functions = json_object_get(t, "functions");
        json_t *tool, *entry, *fset;

        if (!json_is_object(t) || !name) {
            snprintf(err, errlen, "tools[%zu] must be an object with a string \"name\" "
                     "(without NUL)", i);
            goto fail;
        }
        if (!is_identifier(name) || is_reserved(name)) {
            snprintf(err, errlen, "tool name '%.64s' is not a free Lua identifier", name);
            goto fail;
        }
        if (module && !json_is_null(module) &&
            (!rpc_cstring(module) || json_string_length(module) > RPC_ID_MAX)) {
            snprintf(err, errlen, "tool %s: module must be a string of at most %d bytes "
                     "without NUL", name, RPC_ID_MAX);
            goto fail;
        }
        if (functions && !json_is_null(functions) &&
            (!json_is_array(functions) || json_array_size(functions) > TOOLS_MAX_FUNCTIONS)) {
            snprintf(err, errlen, "tool %s: functions must be an array of at most %d entries",
                     name, TOOLS_MAX_FUNCTIONS);
            goto fail;
        }
        if (seen(idx, out, name)) {
            snprintf(err, errlen, "tool %s is declared twice", name);
            goto fail;
        }
        fns = json_array();
        fset = json_object();
        tool = json_pack("{s:s,s:s,s:o}", "name", name, "module",
                         json_is_string(module) ? json_string_value(module) : name,
                         "functions", fns);
        entry = json_pack("{s:O,s:o}", "module", json_object_get(tool, "module"),
                          "functions", fset);
        if (!tool || !entry || json_array_append_new(out, tool) < 0 ||
            json_object_set_new(idx, name, entry) < 0) {
            json_decref(fns);
            goto nomem;
        }
        json_array_foreach(functions, j, f) {
            json_t *nf = norm_function(name, f, err, errlen);
            const char *fname;

            if (!nf)
                goto fail;
            fname = entry_name(nf);
            if (seen(fset, fns, fname)) {
                json_decref(nf);
                snprintf(err, errlen, "tool %s: function %s declared twice", name, fname);
                goto fail;
            }
            if (json_object_set(fset, fname, nf) < 0 || json_array_append_new(fns, nf) < 0)
                goto nomem;
        }
    }
done:
    *index = idx;
    return out;
nomem:
    snprintf(err, errlen, "out of memory");
fail:
    json_decref(out);
    json_decref(idx);
    return NULL;
}

/* Two hash lookups, whatever the size of the list. */
const json_t *tools_find(const json_t *index, const char *name, const char *fn,
                         const json_t **tool_out)
{
    const json_t *t = json_object_get(index, name);
    const json_t *f = json_object_get(json_object_get(t, "functions"), fn);

    if (f)
        *tool_out = t;
    return f;
}

int tools_arity_ok(const json_t *entry, size_t n)
{
    const json_t *ar = json_object_get(entry, "arities"), *a;
    size_t i;

    if (!ar)
        return 1;
    json_array_foreach(ar, i, a) {
        if (json_integer_value(a) == (json_int_t)n)
            return 1;
    }
    return 0;
}
