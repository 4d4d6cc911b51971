/*
 * tools.c - tool declarations and handlers from the command line.
 * Contracts in tools.h.
 */
#include "client/tools.h"

#include <stdlib.h>
#include <string.h>

#include "client/ctl.h"

void ctl_tools_init(struct ctl_tools *t)
{
    t->h = NULL;
    t->n = 0;
    t->files = NULL;
}

void ctl_tools_free(struct ctl_tools *t)
{
    size_t i;

    for (i = 0; i < t->n; i++) {
        free(t->h[i].tool);
        free(t->h[i].func);
        free(t->h[i].command);
        json_decref(t->h[i].reply);
    }
    free(t->h);
    json_decref(t->files);
    ctl_tools_init(t);
}

int ctl_tools_empty(const struct ctl_tools *t)
{
    return t->n == 0 && json_array_size(t->files) == 0;
}

const struct ctl_handler *ctl_tools_find(const struct ctl_tools *t, const char *tool,
                                         const char *func)
{
    size_t i;

    for (i = 0; i < t->n; i++)
        if (strcmp(t->h[i].tool, tool) == 0 && strcmp(t->h[i].func, func) == 0)
            return &t->h[i];
    return NULL;
}

/*
 * Split "NAME.FUNC=VALUE" of option `opt` into a new handler slot (tool and
 * func filled, the rest zero) and return VALUE, borrowed from spec.  NULL
 * after printing why.
 */
static const char *split_spec(struct ctl_tools *t, const char *opt, const char *spec,
                              struct ctl_handler **slot)
{
    const char *eq = strchr(spec, '='), *dot = strchr(spec, '.');
    struct ctl_handler *nh, *h;

    if (eq == NULL || dot == NULL || dot > eq || dot == spec || dot + 1 == eq ||
        memchr(dot + 1, '.', (size_t)(eq - dot - 1)) != NULL) {
        ctl_err("%s '%s': expected NAME.FUNC=%s", opt, spec,
                strcmp(opt, "--tool") == 0 ? "COMMAND" : "JSON");
        return NULL;
    }
    nh = realloc(t->h, (t->n + 1) * sizeof *nh);
    if (nh == NULL)
        goto oom;
    t->h = nh;
    h = &t->h[t->n];
    memset(h, 0, sizeof *h);
    h->tool = strndup(spec, (size_t)(dot - spec));
    h->func = strndup(dot + 1, (size_t)(eq - dot - 1));
    if (h->tool == NULL || h->func == NULL) {
        free(h->tool);
        free(h->func);
        goto oom;
    }
    if (ctl_tools_find(t, h->tool, h->func) != NULL) {
        ctl_err("%s: a handler for %s.%s is already given", opt, h->tool, h->func);
        free(h->tool);
        free(h->func);
        return NULL;
    }
    *slot = h;
    return eq + 1;
oom:
    ctl_err("out of memory");
    return NULL;
}

int ctl_tools_add_command(struct ctl_tools *t, const char *spec)
{
    struct ctl_handler *h;
    const char *cmd = split_spec(t, "--tool", spec, &h);

    if (cmd == NULL)
        return -1;
    if (*cmd == '\0') {
        ctl_err("--tool %s.%s: the command is empty", h->tool, h->func);
        goto fail;
    }
    h->kind = CTL_HANDLER_COMMAND;
    h->command = strdup(cmd);
    if (h->command == NULL) {
        ctl_err("out of memory");
        goto fail;
    }
    t->n++;
    return 0;
fail:
    free(h->tool);
    free(h->func);
    return -1;
}

int ctl_tools_add_reply(struct ctl_tools *t, const char *spec)
{
    struct ctl_handler *h;
    const char *text = split_spec(t, "--tool-reply", spec, &h);
    json_error_t jerr;

    if (text == NULL)
        return -1;
    h->kind = CTL_HANDLER_REPLY;
    h->reply = json_loads(text, JSON_DECODE_ANY, &jerr);
    if (h->reply == NULL) {
        ctl_err("--tool-reply %s.%s: the reply is not valid JSON: %s", h->tool, h->func,
                jerr.text);
        free(h->tool);
        free(h->func);
        return -1;
    }
    t->n++;
    return 0;
}

int ctl_tools_add_file(struct ctl_tools *t, const char *path)
{
    json_t *v = ctl_load_json_file(path, "tools file"), *el;
    size_t i;
    int rc = -1;

    if (v == NULL)
        return -1;
    if (!json_is_array(v)) {
        ctl_err("tools file %s: expected a JSON array of tools", path);
        goto out;
    }
    json_array_foreach(v, i, el) {
        if (!json_is_string(json_object_get(el, "name"))) {
            ctl_err("tools file %s: element %zu is not an object with a string \"name\"",
                    path, i);
            goto out;
        }
    }
    if (t->files == NULL && (t->files = json_array()) == NULL)
        goto oom;
    if (json_array_extend(t->files, v) < 0)
        goto oom;
    rc = 0;
    goto out;
oom:
    ctl_err("out of memory");
out:
    json_decref(v);
    return rc;
}

/* Nonzero if the functions array fns (borrowed) names func, as a string or
 * as an object's "name". */
static int declares(const json_t *fns, const char *func)
{
    const json_t *f;
    const char *name;
    size_t i;

    json_array_foreach(fns, i, f) {
        name = json_is_string(f) ? json_string_value(f)
                                 : json_string_value(json_object_get(f, "name"));
        if (name != NULL && strcmp(name, func) == 0)
            return 1;
    }
    return 0;
}

/* The declaration named `name` in decl (borrowed), created when missing. */
static json_t *tool_decl(json_t *decl, const char *name)
{
    json_t *d, *nd;
    const char *dn;
    size_t i;

    json_array_foreach(decl, i, d) {
        dn = json_string_value(json_object_get(d, "name"));
        if (dn != NULL && strcmp(dn, name) == 0)
            return d;
    }
    nd = json_pack("{s:s}", "name", name);
    if (nd == NULL || json_array_append_new(decl, nd) < 0)
        return NULL;
    return nd;
}

json_t *ctl_tools_declare(const struct ctl_tools *t)
{
    json_t *decl = t->files ? json_deep_copy(t->files) : json_array();
    json_t *d, *fns;
    size_t i;

    if (decl == NULL)
        return NULL;
    for (i = 0; i < t->n; i++) {
        d = tool_decl(decl, t->h[i].tool);
        if (d == NULL)
            goto fail;
        fns = json_object_get(d, "functions");
        if (fns == NULL) {
            fns = json_array();
            if (json_object_set_new(d, "functions", fns) < 0)
                goto fail;
        }
        /* A "functions" that is not an array is left for the daemon to
         * refuse: sandboxctl sends declarations, it does not judge them. */
        if (json_is_array(fns) && !declares(fns, t->h[i].func) &&
            json_array_append_new(fns, json_string(t->h[i].func)) < 0)
            goto fail;
    }
    return decl;
fail:
    json_decref(decl);
    return NULL;
}
