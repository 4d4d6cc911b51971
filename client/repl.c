/*
 * repl.c - `sandboxctl session` (contract: repl.h).
 */
#include "client/repl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

/* How one chunk went. */
enum chunk_end { CH_VALUE, CH_ERROR, CH_INCOMPLETE, CH_SYNTAX, CH_CLOSED };

/* How code compiles here: the user's own input, parsed by this process's
 * Lua 5.3 (the daemon's language) and never run, so that the daemon is sent
 * only the chunks to run.  LUA_ERRMEM and the like count as "compiles": the
 * daemon, which has the last word, is asked. */
enum parse { PARSE_OK, PARSE_INCOMPLETE, PARSE_ERROR };

static enum parse parse(const char *code, size_t len)
{
    lua_State *L = luaL_newstate();
    enum parse r = PARSE_OK;
    int st;

    if (L == NULL)
        return PARSE_OK;
    st = luaL_loadbufferx(L, code, len, "=input", "t");
    if (st == LUA_ERRSYNTAX) {
        size_t n;
        const char *msg = lua_tolstring(L, -1, &n);
        /* as lua.c: an error at the end of the text means more may come */
        r = msg && n >= 5 && strcmp(msg + n - 5, "<eof>") == 0 ? PARSE_INCOMPLETE : PARSE_ERROR;
    }
    lua_close(L);
    return r;
}

static void show_error(const json_t *error)
{
    const json_t *data = json_object_get(error, "data");
    const char *kind = json_string_value(json_object_get(data, "kind"));
    const char *msg = json_string_value(json_object_get(error, "message"));

    fprintf(stderr, "%s: %s\n", kind ? kind : "error", msg ? msg : "(no message)");
}

/* Run code in the session.  *rc gets an exit status when the call itself
 * failed (a protocol error, a lost connection). */
static enum chunk_end run(struct ctl_conn *s, const char *sid, const char *code,
                          enum ctl_json_style style, int *rc)
{
    json_t *params = json_pack("{s:s,s:s,s:b}", "session", sid, "code", code,
                               "stream_output", 1);
    const json_t *error, *result, *data;
    const char *kind;

    *rc = 0;
    if (params == NULL) {
        ctl_err("out of memory");
        *rc = CTL_EXIT_SOFTWARE;
        return CH_CLOSED;
    }
    if ((*rc = ctl_conn_call(s, "execute", params)) != 0)
        return CH_CLOSED;
    error = json_object_get(s->answer, "error");
    result = json_object_get(s->answer, "result");
    if (error == NULL) {
        const json_t *value = json_object_get(result, "value");
        if (!s->streamed && json_is_string(json_object_get(result, "output")))
            fputs(json_string_value(json_object_get(result, "output")), stderr);
        if (value != NULL && !json_is_null(value) && ctl_print_json(stdout, value, style) < 0)
            ctl_err("cannot write to stdout");
        fflush(stdout);
        return CH_VALUE;
    }
    data = json_object_get(error, "data");
    kind = json_string_value(json_object_get(data, "kind"));
    show_error(error);
    if (json_is_true(json_object_get(data, "session_closed")) || kind == NULL ||
        (strcmp(kind, "syntax_error") != 0 && strcmp(kind, "runtime_error") != 0)) {
        *rc = ctl_exit_for_error(error);
        return CH_CLOSED;
    }
    return CH_ERROR;
}

int ctl_repl(struct ctl_conn *s, json_t *open_params, enum ctl_json_style style)
{
    char *line = NULL, *buf = NULL, *sid = NULL, *ret = NULL;
    size_t cap = 0, len = 0, lines = 0;
    int tty = isatty(STDIN_FILENO), rc;
    const json_t *error;
    ssize_t n;

    if ((rc = ctl_conn_call(s, "session/open", open_params)) != 0)
        return rc;
    if ((error = json_object_get(s->answer, "error")) != NULL) {
        show_error(error);
        return ctl_exit_for_error(error);
    }
    sid = strdup(json_string_value(json_object_get(json_object_get(s->answer, "result"),
                                                   "session")) ?: "");
    if (sid == NULL || *sid == '\0') {
        ctl_err("protocol error: session/open answered no session id");
        free(sid);
        return CTL_EXIT_PROTOCOL;
    }
    s->stream_output = 1;
    for (;;) {
        enum chunk_end end = CH_SYNTAX;
        char *nb;

        if (tty)
            fputs(lines ? "...> " : "> ", stderr);
        if ((n = getline(&line, &cap, stdin)) < 0)
            break;
        if ((nb = realloc(buf, len + (size_t)n + 1)) == NULL) {
            ctl_err("out of memory");
            rc = CTL_EXIT_SOFTWARE;
            goto out;
        }
        buf = nb;
        memcpy(buf + len, line, (size_t)n + 1);
        len += (size_t)n;
        lines++;
        if (strspn(buf, " \t\r\n") == len) {        /* blank: nothing to run */
            len = lines = 0;
            continue;
        }
        if (lines == 1) {           /* an expression? as the Lua REPL: `return <line>` */
            free(ret);
            if ((ret = malloc(len + 8)) == NULL) {
                ctl_err("out of memory");
                rc = CTL_EXIT_SOFTWARE;
                goto out;
            }
            memcpy(ret, "return ", 7);
            memcpy(ret + 7, buf, len + 1);
            if (parse(ret, len + 7) == PARSE_OK)
                end = run(s, sid, ret, style, &rc);
        }
        /* a block that is not complete yet waits for its next line; a real
         * syntax error is sent, for the daemon's message (and hint) */
        if (end == CH_SYNTAX)
            end = parse(buf, len) == PARSE_INCOMPLETE ? CH_INCOMPLETE
                                                      : run(s, sid, buf, style, &rc);
        if (end == CH_CLOSED)
            goto out;
        if (end != CH_INCOMPLETE)
            len = lines = 0;
    }
    if (tty)
        fputc('\n', stderr);
    if ((rc = ctl_conn_call(s, "session/close", json_pack("{s:s}", "session", sid))) == 0 &&
        (error = json_object_get(s->answer, "error")) != NULL) {
        show_error(error);
        rc = ctl_exit_for_error(error);
    }
out:
    free(line);
    free(buf);
    free(ret);
    free(sid);
    return rc;
}
