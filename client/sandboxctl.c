/* Runs in: sandboxctl */
/*
 * sandboxctl.c - command line, requests and results of the sandboxd client
 * (the full description is docs/sandboxctl.1).
 *
 * Flow: parse the whole command line (options may come before or after the
 * command; "--" ends them), read every input (code, params, bindings, tools
 * files) before connecting, send one request through a ctl_conn, and
 * turn the answer into output and an exit status.  Nothing is sent when the
 * command line or an input is wrong (exit 2).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/ctl.h"
#include "client/repl.h"
#include "client/connection.h"
#include "client/tools.h"
#include "proto/jsonrpc.h"

static const char usage_text[] =
"Usage: sandboxctl [OPTIONS] COMMAND [ARGS]\n"
"\n"
"A client for sandboxd, which runs untrusted Lua 5.3 for AI agents.\n"
"\n"
"Commands:\n"
"  call METHOD [PARAMS | @FILE | -]   send one JSON-RPC request (params as JSON\n"
"                                     text, from FILE, or from stdin) and print\n"
"                                     its result; tool calls are served\n"
"  exec [-e CODE | FILE | -]          run Lua code (stdin when nothing is given\n"
"                                     and stdin is not a terminal); captured\n"
"                                     output goes to stderr, the value as JSON to\n"
"                                     stdout\n"
"  check [-e CODE | FILE | -]         compile the code without running it\n"
"  describe                           the daemon's version, methods and limits\n"
"  ping                               check that the daemon answers\n"
"  health [--timeout MS]              for probes: exit 0 when the daemon answers\n"
"                                     and can start workers, else 1 and one line\n"
"                                     saying why (default: no answer in 5000 ms)\n"
"  metrics                            the daemon's metrics, as Prometheus text\n"
"  session                            an interactive session: each line (or\n"
"                                     block) of stdin is a chunk run in one\n"
"                                     Lua state that persists; output shows as\n"
"                                     it is printed, values as JSON on stdout\n"
"\n"
"Options:\n"
"  -s, --socket PATH     the daemon's socket (default: $SANDBOXD_SOCKET, else\n"
"                        " CTL_DEFAULT_SOCKET ")\n"
"  -v, --verbose         show every frame sent (\"> \") and received (\"< \"), and\n"
"                        what the client does (\"* \"), on stderr\n"
"      --json=MODE       pretty or compact JSON (default: pretty on a terminal,\n"
"                        compact otherwise)\n"
"      --raw             print the response object exactly as received, on\n"
"                        stdout, and nothing else (the exit status is the same)\n"
"  -h, --help            this text\n"
"      --version         the version\n"
"\n"
"exec options:\n"
"  -e, --eval CODE       the code to run\n"
"      --timeout MS      wall clock limit in milliseconds, or \"infinity\"\n"
"      --limit KEY=VALUE a limit: max_heap, max_reductions, cpu_ms, priority,\n"
"                        max_output_bytes, max_bindings_bytes; VALUE is an\n"
"                        integer, \"infinity\", or a word (priority); repeatable\n"
"      --bindings FILE   restore the state saved by --save-bindings\n"
"      --save-bindings FILE\n"
"                        save the state the code leaves, for a later --bindings\n"
"      --stream          show the output while the code runs (stream_output)\n"
"  session takes --timeout, --limit and --bindings too (for every chunk).\n"
"\n"
"Tools (exec, check, call):\n"
"      --tool NAME.FUNC=COMMAND\n"
"                        declare NAME.FUNC and answer its calls by running\n"
"                        COMMAND with /bin/sh -c: the args JSON array on stdin,\n"
"                        SANDBOXCTL_TOOL and SANDBOXCTL_FUNCTION in the\n"
"                        environment; stdout (one JSON value) is the result; a\n"
"                        non-zero exit is an error carrying stderr; exit 99\n"
"                        aborts the whole execution (tool_aborted)\n"
"      --tool-reply NAME.FUNC=JSON\n"
"                        declare NAME.FUNC and answer every call with JSON\n"
"      --tools FILE      declare the tools of FILE, a JSON array as the execute\n"
"                        method takes it (modules, arities, reference-only tools)\n"
"  With call, the request is sent as given: --tool and --tool-reply only answer\n"
"  the calls, and the tools must be declared in PARAMS.\n"
"\n"
"Ctrl-C cancels the request ($/cancelRequest) and waits for the daemon to\n"
"answer; a second Ctrl-C quits at once.\n"
"\n"
"Exit status:\n"
"    0  success\n"
"    1  syntax_error, runtime_error\n"
"    2  usage error, unreadable input; invalid_params, limit_out_of_range,\n"
"       method_not_found, code_too_large, message_too_large,\n"
"       session_not_found\n"
"    3  timeout, memory_limit, reductions_limit, cpu_limit, crashed,\n"
"       bindings_too_large, tool_call_limit\n"
"    4  cancelled, tool_aborted\n"
"   69  cannot connect to the socket\n"
"   70  internal failure of sandboxctl (out of memory)\n"
"   74  cannot write stdout or the --save-bindings file\n"
"   75  busy\n"
"   76  protocol error: the daemon sent something invalid or closed the\n"
"       connection; parse_error, invalid_request, internal_error, or an error\n"
"       kind the contract does not know\n"
"   77  forbidden\n"
"  130  interrupted by a second Ctrl-C\n"
"  health exits 0 or 1 only (2 for a usage error), as a container health\n"
"  check expects.\n"
"\n"
"Examples:\n"
"  sandboxctl exec -e 'return 1 + 1'\n"
"  echo 'print(\"hi\") return {a = 1}' | sandboxctl exec -\n"
"  sandboxctl exec script.lua --timeout 2000 --limit max_heap=67108864\n"
"  sandboxctl exec -e 'n = 41' --save-bindings state.json\n"
"  sandboxctl exec -e 'return n + 1' --bindings state.json\n"
"  sandboxctl exec -e 'return Weather.get(\"Oslo\")' \\\n"
"      --tool 'Weather.get=jq -c \"{city: .[0], temp: 21}\"'\n"
"  sandboxctl exec -e 'return Clock.now()' --tool-reply 'Clock.now=1700000000'\n"
"  sandboxctl call execute '{\"code\": \"return Kv.get(1)\", \"tools\":\n"
"      [{\"name\": \"Kv\", \"functions\": [\"get\"]}]}' --tool-reply 'Kv.get=\"x\"'\n"
"  sandboxctl -v call describe\n"
"  sandboxctl call prompt_info | jq -r .constraints\n"
"\n"
"See sandboxctl(1).\n";

enum cmd { CMD_NONE, CMD_CALL, CMD_EXEC, CMD_CHECK, CMD_DESCRIBE, CMD_PING, CMD_METRICS,
           CMD_SESSION, CMD_HEALTH };

/* health: how long it waits for the daemon's answer unless --timeout says. */
#define HEALTH_TIMEOUT_MS 5000

/* Which commands an option applies to. */
enum scope {
    SC_ALL   = 0,
    SC_CODE  = 1 << 0,  /* exec, check */
    SC_EXEC  = 1 << 1,  /* exec */
    SC_TOOLS = 1 << 2,  /* exec, check, call */
    SC_WAIT  = 1 << 3,  /* exec, session, health */
};
#define N_SCOPES 4

enum opt_id {
    O_SOCKET, O_VERBOSE, O_JSON, O_RAW, O_HELP, O_VERSION, O_EVAL, O_TIMEOUT, O_LIMIT,
    O_BINDINGS, O_SAVE, O_TOOL, O_TOOL_REPLY, O_TOOLS, O_STREAM,
};

static const struct optdef {
    const char *name;   /* long name */
    char short_name;    /* or 0 */
    int has_arg;
    enum opt_id id;
    unsigned scope;
} optdefs[] = {
    {"socket", 's', 1, O_SOCKET, SC_ALL},
    {"verbose", 'v', 0, O_VERBOSE, SC_ALL},
    {"json", 0, 1, O_JSON, SC_ALL},
    {"raw", 0, 0, O_RAW, SC_ALL},
    {"help", 'h', 0, O_HELP, SC_ALL},
    {"version", 0, 0, O_VERSION, SC_ALL},
    {"eval", 'e', 1, O_EVAL, SC_CODE},
    {"timeout", 0, 1, O_TIMEOUT, SC_WAIT},
    {"limit", 0, 1, O_LIMIT, SC_EXEC},
    {"bindings", 0, 1, O_BINDINGS, SC_EXEC},
    {"save-bindings", 0, 1, O_SAVE, SC_EXEC},
    {"tool", 0, 1, O_TOOL, SC_TOOLS},
    {"tool-reply", 0, 1, O_TOOL_REPLY, SC_TOOLS},
    {"tools", 0, 1, O_TOOLS, SC_TOOLS},
    {"stream", 0, 0, O_STREAM, SC_EXEC},
};

static const struct cmddef {
    const char *name;
    enum cmd cmd;
    unsigned scopes;    /* option scopes it accepts besides SC_ALL */
    size_t max_args;
} cmddefs[] = {
    {"call", CMD_CALL, SC_TOOLS, 2},
    {"exec", CMD_EXEC, SC_CODE | SC_EXEC | SC_TOOLS | SC_WAIT, 1},
    {"check", CMD_CHECK, SC_CODE | SC_TOOLS, 1},
    {"describe", CMD_DESCRIBE, 0, 0},
    {"ping", CMD_PING, 0, 0},
    {"metrics", CMD_METRICS, 0, 0},
    {"session", CMD_SESSION, SC_EXEC | SC_TOOLS | SC_WAIT, 0},
    {"health", CMD_HEALTH, SC_WAIT, 0},
};

/* The parsed command line.  Strings are borrowed from argv; limits and
 * tools are owned (opts_free). */
struct opts {
    const struct cmddef *cmd;
    const char *args[2];        /* positional arguments after the command */
    size_t nargs;
    const char *socket;
    int verbose, raw, stream;
    enum ctl_json_style style;
    const char *code;           /* -e */
    const char *timeout;
    json_t *limits;             /* object, or NULL */
    const char *bindings, *save_bindings;
    struct ctl_tools tools;
    int tools_stdin;            /* a --tools file was "-" */
    const char *scoped[N_SCOPES]; /* first option given of each scope, as typed */
};

/* Result of parsing when it does not continue to a request. */
enum { PARSE_OK = 0, PARSE_EXIT_OK = -1 };

static void opts_free(struct opts *o)
{
    json_decref(o->limits);
    ctl_tools_free(&o->tools);
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...)
{
    va_list ap;

    fputs("sandboxctl: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nTry 'sandboxctl --help' for more information.\n", stderr);
    return CTL_EXIT_USAGE;
}

/* --limit KEY=VALUE: VALUE an integer, else the string as given ("infinity",
 * a priority name; the daemon judges). */
static int add_limit(struct opts *o, const char *spec)
{
    const char *eq = strchr(spec, '=');
    json_int_t n;
    json_t *v;
    char *key;
    int rc;

    if (eq == NULL || eq == spec || eq[1] == '\0')
        return usage_error("--limit '%s': expected KEY=VALUE", spec);
    if (o->limits == NULL && (o->limits = json_object()) == NULL)
        goto oom;
    v = ctl_parse_int(eq + 1, &n) == 0 ? json_integer(n) : json_string(eq + 1);
    key = strndup(spec, (size_t)(eq - spec));
    if (v == NULL || key == NULL) {
        json_decref(v);
        free(key);
        goto oom;
    }
    rc = json_object_set_new(o->limits, key, v);
    free(key);
    if (rc < 0)
        goto oom;
    return 0;
oom:
    ctl_err("out of memory");
    return CTL_EXIT_SOFTWARE;
}

static int apply_option(struct opts *o, const struct optdef *d, const char *arg)
{
    json_int_t n;

    switch (d->id) {
    case O_SOCKET:
        if (*arg == '\0')
            return usage_error("--socket: the path is empty");
        o->socket = arg;
        return 0;
    case O_VERBOSE:
        o->verbose = 1;
        return 0;
    case O_JSON:
        if (strcmp(arg, "pretty") == 0)
            o->style = CTL_JSON_PRETTY;
        else if (strcmp(arg, "compact") == 0 || strcmp(arg, "short") == 0)
            o->style = CTL_JSON_COMPACT;
        else
            return usage_error("--json '%s': expected pretty or compact", arg);
        return 0;
    case O_RAW:
        o->raw = 1;
        return 0;
    case O_HELP:
        fputs(usage_text, stdout);
        return PARSE_EXIT_OK;
    case O_VERSION:
        printf("sandboxctl %s\n", SANDBOXCTL_VERSION);
        return PARSE_EXIT_OK;
    case O_EVAL:
        o->code = arg;
        return 0;
    case O_TIMEOUT:
        if (strcmp(arg, "infinity") != 0 && ctl_parse_int(arg, &n) < 0)
            return usage_error("--timeout '%s': expected milliseconds or infinity", arg);
        o->timeout = arg;
        return 0;
    case O_LIMIT:
        return add_limit(o, arg);
    case O_BINDINGS:
        o->bindings = arg;
        return 0;
    case O_SAVE:
        o->save_bindings = arg;
        return 0;
    case O_TOOL:
        return ctl_tools_add_command(&o->tools, arg) < 0 ? CTL_EXIT_USAGE : 0;
    case O_TOOL_REPLY:
        return ctl_tools_add_reply(&o->tools, arg) < 0 ? CTL_EXIT_USAGE : 0;
    case O_TOOLS:
        o->tools_stdin |= strcmp(arg, "-") == 0;
        return ctl_tools_add_file(&o->tools, arg) < 0 ? CTL_EXIT_USAGE : 0;
    case O_STREAM:
        o->stream = 1;
        return 0;
    }
    return 0;
}

static void note_scope(struct opts *o, const struct optdef *d, const char *as_typed)
{
    int bit;

    for (bit = 0; bit < N_SCOPES; bit++)
        if ((d->scope & (1u << bit)) && o->scoped[bit] == NULL)
            o->scoped[bit] = as_typed;
}

/* "--name", "--name=value" or "--name value". */
static int parse_long(struct opts *o, int argc, char **argv, int *i)
{
    const char *typed = argv[*i], *a = typed + 2, *eq = strchr(a, '=');
    size_t len = eq ? (size_t)(eq - a) : strlen(a), k;
    const struct optdef *d = NULL;
    const char *arg = NULL;

    for (k = 0; k < sizeof optdefs / sizeof optdefs[0]; k++)
        if (strlen(optdefs[k].name) == len && strncmp(optdefs[k].name, a, len) == 0)
            d = &optdefs[k];
    if (d == NULL)
        return usage_error("unknown option '--%.*s'", (int)len, a);
    if (!d->has_arg && eq != NULL)
        return usage_error("option '--%s' takes no value", d->name);
    if (d->has_arg) {
        if (eq != NULL)
            arg = eq + 1;
        else if (*i + 1 < argc)
            arg = argv[++*i];
        else
            return usage_error("option '--%s' needs a value", d->name);
    }
    note_scope(o, d, typed);
    return apply_option(o, d, arg);
}

/* "-v", "-s PATH", "-sPATH", "-ve CODE". */
static int parse_short(struct opts *o, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    const struct optdef *d;
    const char *arg;
    size_t j, k;
    int rc;

    for (j = 1; a[j] != '\0'; j++) {
        d = NULL;
        for (k = 0; k < sizeof optdefs / sizeof optdefs[0]; k++)
            if (optdefs[k].short_name == a[j])
                d = &optdefs[k];
        if (d == NULL)
            return usage_error("unknown option '-%c'", a[j]);
        note_scope(o, d, a);
        arg = NULL;
        if (d->has_arg) {
            if (a[j + 1] != '\0')
                arg = a + j + 1;
            else if (*i + 1 < argc)
                arg = argv[++*i];
            else
                return usage_error("option '-%c' needs a value", a[j]);
        }
        rc = apply_option(o, d, arg);
        if (rc != 0 || d->has_arg)
            return rc;
    }
    return 0;
}

static int positional(struct opts *o, const char *a)
{
    size_t k;

    if (o->cmd == NULL) {
        for (k = 0; k < sizeof cmddefs / sizeof cmddefs[0]; k++)
            if (strcmp(cmddefs[k].name, a) == 0)
                o->cmd = &cmddefs[k];
        if (o->cmd == NULL)
            return usage_error("unknown command '%s'", a);
        return 0;
    }
    if (o->nargs >= o->cmd->max_args)
        return usage_error("'%s' takes %s; unexpected '%s'", o->cmd->name,
                           o->cmd->max_args == 0 ? "no arguments"
                           : o->cmd->max_args == 1 ? "at most one argument"
                                                   : "at most two arguments",
                           a);
    o->args[o->nargs++] = a;
    return 0;
}

/* Check what only makes sense once the whole line is known. */
static int check_opts(const struct opts *o)
{
    static const char *const scope_use[N_SCOPES] = {"exec and check", "exec",
                                                    "exec, check and call",
                                                    "exec, session and health"};
    int bit, stdin_users = 0;
    json_int_t n;

    if (o->cmd == NULL)
        return usage_error("no command given (call, exec, check, describe, ping, health, "
                           "metrics, session)");
    for (bit = 0; bit < N_SCOPES; bit++)
        if (o->scoped[bit] != NULL && !(o->cmd->scopes & (1u << bit)))
            return usage_error("option '%s' applies only to %s, not to '%s'", o->scoped[bit],
                               scope_use[bit], o->cmd->name);
    if (o->cmd->cmd == CMD_HEALTH && o->timeout != NULL && strcmp(o->timeout, "infinity") != 0 &&
        (ctl_parse_int(o->timeout, &n) < 0 || n < 1 || n > INT_MAX))
        return usage_error("health: --timeout '%s': expected 1 to %d milliseconds or infinity",
                           o->timeout, INT_MAX);
    if (o->cmd->cmd == CMD_CALL && o->nargs == 0)
        return usage_error("call: no METHOD given");
    if (o->code != NULL && o->nargs > 0)
        return usage_error("%s: give the code either with -e or as FILE, not both",
                           o->cmd->name);
    if (o->cmd->cmd == CMD_CALL && o->nargs == 2 && strcmp(o->args[1], "-") == 0)
        stdin_users++;
    if ((o->cmd->cmd == CMD_EXEC || o->cmd->cmd == CMD_CHECK) && o->code == NULL &&
        (o->nargs == 0 || strcmp(o->args[0], "-") == 0))
        stdin_users++;
    if (o->bindings != NULL && strcmp(o->bindings, "-") == 0)
        stdin_users++;
    stdin_users += o->tools_stdin;
    if (stdin_users > 1)
        return usage_error("stdin can feed only one input");
    return 0;
}

/* Returns PARSE_OK, PARSE_EXIT_OK (--help, --version), or an exit status. */
static int parse_args(struct opts *o, int argc, char **argv)
{
    int i, rc = 0, options_done = 0;
    const char *a;

    for (i = 1; i < argc && rc == 0; i++) {
        a = argv[i];
        if (!options_done && strcmp(a, "--") == 0)
            options_done = 1;
        else if (!options_done && a[0] == '-' && a[1] == '-')
            rc = parse_long(o, argc, argv, &i);
        else if (!options_done && a[0] == '-' && a[1] != '\0')
            rc = parse_short(o, argc, argv, &i);
        else
            rc = positional(o, a);
    }
    return rc != 0 ? rc : check_opts(o);
}

/* The code of exec/check as a JSON string, from -e, FILE or stdin.  A first
 * line starting with "#!" becomes a Lua comment, so scripts can start with
 * "#!/usr/bin/env -S sandboxctl exec"; line numbers stay the same. */
static json_t *load_code(const struct opts *o)
{
    const char *path = o->nargs > 0 ? o->args[0] : "-";
    const char *shown = strcmp(path, "-") == 0 ? "stdin" : path;
    json_t *code;
    char *text;
    size_t len;

    if (o->code != NULL) {
        code = json_string(o->code);
        if (code == NULL)
            ctl_err("-e: the code is not valid UTF-8");
        return code;
    }
    if (o->nargs == 0 && isatty(STDIN_FILENO)) {
        usage_error("%s: no code given: use -e CODE, a FILE, or - to read stdin",
                    o->cmd->name);
        return NULL;
    }
    if (ctl_read_file(path, &text, &len) < 0) {
        ctl_err("cannot read the code from %s: %s", shown, strerror(errno));
        return NULL;
    }
    if (len >= 2 && text[0] == '#' && text[1] == '!')
        text[0] = text[1] = '-';
    code = json_stringn(text, len);
    free(text);
    if (code == NULL)
        ctl_err("cannot send the code from %s: it is not valid UTF-8 text", shown);
    return code;
}

/* params for call: none, JSON text, @FILE, or - (stdin). */
static json_t *load_call_params(const struct opts *o, int *none)
{
    const char *arg = o->nargs > 1 ? o->args[1] : NULL;
    json_error_t jerr;
    json_t *v;

    *none = arg == NULL;
    if (arg == NULL)
        return NULL;
    if (strcmp(arg, "-") == 0)
        return ctl_load_json_file("-", "params from");
    if (arg[0] == '@')
        return ctl_load_json_file(arg + 1, "params file");
    v = json_loads(arg, JSON_DECODE_ANY, &jerr);
    if (v == NULL)
        ctl_err("PARAMS is not valid JSON: %s (column %d)", jerr.text, jerr.column);
    return v;
}

/* Build the params of exec/check.  NULL after printing why. */
static json_t *code_params(const struct opts *o)
{
    json_t *p = json_object(), *v;
    json_int_t n;

    if (p == NULL)
        goto oom;
    if (o->cmd->cmd != CMD_SESSION) {
        if ((v = load_code(o)) == NULL)
            goto fail;
        if (json_object_set_new(p, "code", v) < 0)
            goto oom;
    }
    if (o->stream && json_object_set_new(p, "stream_output", json_true()) < 0)
        goto oom;
    if (!ctl_tools_empty(&o->tools) &&
        json_object_set_new(p, "tools", ctl_tools_declare(&o->tools)) < 0)
        goto oom;
    if (o->cmd->cmd == CMD_CHECK)
        return p;
    if (o->bindings != NULL) {
        if ((v = ctl_load_json_file(o->bindings, "bindings file")) == NULL)
            goto fail;
        if (json_object_set_new(p, "bindings", v) < 0)
            goto oom;
    }
    if (o->timeout != NULL) {
        v = ctl_parse_int(o->timeout, &n) == 0 ? json_integer(n) : json_string(o->timeout);
        if (json_object_set_new(p, "timeout_ms", v) < 0)
            goto oom;
    }
    if (o->limits != NULL && json_object_set(p, "limits", o->limits) < 0)
        goto oom;
    return p;
oom:
    ctl_err("out of memory");
fail:
    json_decref(p);
    return NULL;
}

static int print_stdout(const struct opts *o, const json_t *v)
{
    if (ctl_print_json(stdout, v, o->style) < 0) {
        ctl_err("cannot write to stdout: %s", strerror(errno));
        return CTL_EXIT_IOERR;
    }
    return 0;
}

/* Print an error answer (after data.output, for exec and check) and choose the exit
 * status. */
static int report_error(const struct opts *o, const json_t *error, int streamed)
{
    const char *kind = json_string_value(json_object_get(json_object_get(error, "data"), "kind"));
    const json_t *output = json_object_get(json_object_get(error, "data"), "output");
    json_t *shown = NULL;

    if (!json_is_object(error)) {
        ctl_err("protocol error: the daemon's error is not an object");
        return CTL_EXIT_PROTOCOL;
    }
    if (!o->raw) {
        shown = json_deep_copy(error);
        /* exec and check show the output as text, first, as exec does on
         * success: one shape for both commands' errors. */
        if ((o->cmd->cmd == CMD_EXEC || o->cmd->cmd == CMD_CHECK) && json_is_string(output)) {
            if (!streamed)      /* --stream showed it already */
                fwrite(json_string_value(output), 1, json_string_length(output), stderr);
            json_object_del(json_object_get(shown, "data"), "output");
        }
        if (shown == NULL || ctl_print_json(stderr, shown, o->style) < 0)
            ctl_err("cannot print the error");
        json_decref(shown);
    }
    if (kind == NULL || !rpc_kind_known(kind))
        ctl_err("protocol error: the error's data.kind is %s%s%s, not one of the contract's",
                kind ? "'" : "", kind ? kind : "missing", kind ? "'" : "");
    return ctl_exit_for_error(error);
}

static int save_bindings(const char *path, const json_t *bindings)
{
    char *text = json_dumps(bindings, JSON_ENCODE_ANY | JSON_COMPACT);
    size_t len;
    int rc = 0;

    if (text == NULL) {
        ctl_err("cannot encode the bindings");
        return CTL_EXIT_SOFTWARE;
    }
    /* json_dumps output ends with NUL; store a newline in its place. */
    len = strlen(text);
    text[len] = '\n';
    if (ctl_write_file(path, text, len + 1) < 0) {
        ctl_err("cannot save the bindings to %s: %s", path, strerror(errno));
        rc = CTL_EXIT_IOERR;
    }
    free(text);
    return rc;
}

static int report_exec(const struct opts *o, const json_t *result, int streamed)
{
    const json_t *output = json_object_get(result, "output");
    const json_t *value = json_object_get(result, "value");
    const json_t *bindings = json_object_get(result, "bindings");
    int rc = 0;

    if (!json_is_object(result) || value == NULL ||
        (o->save_bindings != NULL && bindings == NULL)) {
        ctl_err("protocol error: the execute result lacks %s",
                !json_is_object(result) ? "an object" : value == NULL ? "value" : "bindings");
        return CTL_EXIT_PROTOCOL;
    }
    if (!o->raw) {
        if (json_is_string(output) && !streamed)   /* --stream showed it already */
            fwrite(json_string_value(output), 1, json_string_length(output), stderr);
        if (json_is_true(json_object_get(result, "output_truncated")))
            ctl_err("the output was cut at max_output_bytes");
        rc = print_stdout(o, value);
    }
    if (o->save_bindings != NULL) {
        int brc = save_bindings(o->save_bindings, bindings);

        rc = rc != 0 ? rc : brc;
    }
    return rc;
}

/* metrics: the exposition text as it is, for a scraper or a textfile
 * collector (sandboxctl metrics > /var/lib/node_exporter/sandboxd.prom). */
static int report_metrics(const struct opts *o, const json_t *result)
{
    const json_t *text = json_object_get(result, "text");

    if (!json_is_string(text)) {
        ctl_err("protocol error: the metrics result lacks its text");
        return CTL_EXIT_PROTOCOL;
    }
    if (!o->raw && fwrite(json_string_value(text), 1, json_string_length(text), stdout) !=
                       json_string_length(text)) {
        ctl_err("cannot write to stdout: %s", strerror(errno));
        return CTL_EXIT_IOERR;
    }
    return 0;
}

/* health: describe's state says whether workers can be started.  Healthy:
 * one line on stdout.  Unhealthy: one line on stderr saying since when and
 * how many failures in a row; CTL_EXIT_UNHEALTHY. */
static int report_health(const struct opts *o, const json_t *result)
{
    const json_t *state = json_object_get(result, "state");
    const json_t *can = json_object_get(state, "can_start_workers");
    const char *since = json_string_value(json_object_get(state, "cannot_start_workers_since"));
    const json_t *ms = json_object_get(state, "cannot_start_workers_ms");
    const json_t *fails = json_object_get(state, "worker_start_failures");

    if (!json_is_boolean(can)) {
        ctl_err("unhealthy: the daemon's describe has no state.can_start_workers");
        return CTL_EXIT_UNHEALTHY;
    }
    if (json_is_false(can)) {
        ctl_err("unhealthy: the daemon cannot start workers since %s (for %" JSON_INTEGER_FORMAT
                " ms, %" JSON_INTEGER_FORMAT " failures in a row)",
                since ? since : "an unknown time", json_integer_value(ms),
                json_integer_value(fails));
        return CTL_EXIT_UNHEALTHY;
    }
    if (o->raw)
        return 0;
    if (printf("healthy: the daemon answers and can start workers (%" JSON_INTEGER_FORMAT
               " running or idle, %" JSON_INTEGER_FORMAT " queued)\n",
               json_integer_value(json_object_get(state, "workers")),
               json_integer_value(json_object_get(state, "queued"))) < 0) {
        ctl_err("cannot write to stdout: %s", strerror(errno));
        return CTL_EXIT_UNHEALTHY;
    }
    return 0;
}

static int report(const struct opts *o, const struct ctl_conn *s)
{
    const json_t *error = json_object_get(s->answer, "error");
    const json_t *result = json_object_get(s->answer, "result");

    if (o->raw) {
        fwrite(s->answer_line, 1, s->answer_len, stdout);
        fputc('\n', stdout);
    }
    if (error != NULL && o->cmd->cmd == CMD_HEALTH) {
        ctl_err("unhealthy: describe failed: %s",
                json_string_value(json_object_get(error, "message")) != NULL
                    ? json_string_value(json_object_get(error, "message")) : "(no message)");
        return CTL_EXIT_UNHEALTHY;
    }
    if (error != NULL)
        return report_error(o, error, s->streamed);
    if (o->cmd->cmd == CMD_HEALTH)
        return report_health(o, result);
    if (o->cmd->cmd == CMD_EXEC)
        return report_exec(o, result, s->streamed);
    if (o->cmd->cmd == CMD_METRICS)
        return report_metrics(o, result);
    return o->raw ? 0 : print_stdout(o, result);
}

/* Build the request from the command line; NULL (params) is valid for
 * call without PARAMS, ping and describe.  Returns 0 or an exit status. */
static int build_request(const struct opts *o, const char **method, json_t **params)
{
    int none = 1;

    *params = NULL;
    switch (o->cmd->cmd) {
    case CMD_CALL:
        *method = o->args[0];
        *params = load_call_params(o, &none);
        return *params == NULL && !none ? CTL_EXIT_USAGE : 0;
    case CMD_SESSION:
        *method = "session/open";
        *params = code_params(o);
        return *params == NULL ? CTL_EXIT_USAGE : 0;
    case CMD_EXEC:
    case CMD_CHECK:
        *method = o->cmd->cmd == CMD_EXEC ? "execute" : "check";
        *params = code_params(o);
        return *params == NULL ? CTL_EXIT_USAGE : 0;
    case CMD_DESCRIBE:
    case CMD_HEALTH:
        *method = "describe";
        return 0;
    case CMD_PING:
        *method = "ping";
        return 0;
    case CMD_METRICS:
        *method = "metrics";
        return 0;
    case CMD_NONE:
        break;
    }
    return CTL_EXIT_USAGE;
}

static const char *socket_path(const struct opts *o)
{
    const char *env = getenv(CTL_SOCKET_ENV);

    if (o->socket != NULL)
        return o->socket;
    return env != NULL && *env != '\0' ? env : CTL_DEFAULT_SOCKET;
}

/* fds 0-2 must be open: tool commands get pipes dup2'd onto them, and a
 * pipe that itself landed on 0-2 would be closed by that dance. */
static void ensure_std_fds(void)
{
    int fd;

    while ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0 && fd <= 2)
        fcntl(fd, F_SETFD, 0);
    if (fd > 2)
        close(fd);
}

int main(int argc, char **argv)
{
    struct opts o;
    struct ctl_conn s;
    const char *method = NULL;
    json_t *params = NULL;
    int rc, opened = 0;

    ensure_std_fds();
    memset(&o, 0, sizeof o);
    ctl_tools_init(&o.tools);
    o.style = CTL_JSON_AUTO;
    rc = parse_args(&o, argc, argv);
    if (rc == PARSE_EXIT_OK) {
        rc = fflush(stdout) == 0 ? CTL_EXIT_OK : CTL_EXIT_IOERR;
        goto out;
    }
    if (rc != 0)
        goto out;
    rc = build_request(&o, &method, &params);
    if (rc != 0)
        goto out;
    rc = ctl_conn_open(&s, socket_path(&o), o.verbose, &o.tools);
    opened = 1;
    if (rc != 0) {
        json_decref(params);
        goto out;
    }
    if (o.cmd->cmd == CMD_HEALTH)
        s.answer_within_ms = o.timeout == NULL ? HEALTH_TIMEOUT_MS
                             : strcmp(o.timeout, "infinity") == 0 ? 0 : atoi(o.timeout);
    if (o.cmd->cmd == CMD_SESSION) {
        rc = ctl_repl(&s, params, o.style);
    } else {
        s.stream_output = o.stream && !o.raw;
        rc = ctl_conn_call(&s, method, params);
        if (rc == 0)
            rc = report(&o, &s);
    }
    if (fflush(stdout) != 0 && rc == 0) {
        ctl_err("cannot write to stdout: %s", strerror(errno));
        rc = CTL_EXIT_IOERR;
    }
out:
    if (opened)
        ctl_conn_close(&s);
    opts_free(&o);
    /* a probe's two answers: healthy, or not (a usage error stays 2) */
    if (o.cmd != NULL && o.cmd->cmd == CMD_HEALTH && rc != CTL_EXIT_OK && rc != CTL_EXIT_USAGE)
        rc = CTL_EXIT_UNHEALTHY;
    return rc;
}
