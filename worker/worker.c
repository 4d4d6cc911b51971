/*
 * worker.c - one job, or one session's jobs, in one process (contract:
 * worker.h; payloads: docs/architecture.md, "Channel").
 *
 * Shape: worker_run() reads and parses the JOB in C, applies the limits,
 * then runs job_main() (a session: session_open_main(), then
 * session_chunk_main() for each later job) under lua_pcall: tool tables,
 * baseline, bindings, compile, the chunk (a nested lua_pcall with a C
 * message handler), and the conversion of results and bindings.  The job
 * function leaves the end frame in struct job; anything that escapes it (a
 * memory error while building tool tables or restoring bindings) is
 * classified by run_job().  Then one frame is sent; the process _exits, or,
 * in a session whose state is still whole, reads its next job.  No stdio:
 * after containment only read/write (and a zero-timeout poll) on the
 * channel, memory, clock and rlimit-lowering syscalls are allowed.
 */
#include "worker/worker.h"

#include <jansson.h>
#include <lauxlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/trace.h"
#include "worker/bindings_lua.h"
#include "worker/calls.h"
#include "worker/codec.h"
#include "worker/hint.h"
#include "worker/look.h"
#include "worker/luaenv.h"
#include "proto/bindings.h"
#include "proto/chan.h"
#include "worker/jsonbig.h"
#include "proto/jsonpass.h"
#include "proto/mutant.h"
#include "proto/utf8.h"

#define JOB_MAX_BYTES       CHAN_JOB_MAX
#define TEXT_MAX            8192            /* messages and tracebacks */
#define DEFAULT_OUTPUT      ((size_t)1 << 20)
#define DEFAULT_RESULT      ((size_t)16 << 20)
#define DEFAULT_BINDINGS    ((size_t)10000000)

#define SYNTAX_HINT "Note: a bare expression is not a valid Lua statement - " \
                    "to produce a value, write `return <expression>`."

struct job {
    struct luaenv *env;
    int            fd;
    json_t        *spec;            /* the JOB payload (owned) */
    int            check;           /* op "check" */
    size_t         max_result, max_bindings;
    struct calls   calls;           /* tool calls and parallel() */
    struct look    chunks;          /* a session's look for its next job (look.h) */
    /* sessions: op "session", then "chunk" jobs until the worker is killed */
    int            session;
    int            return_bindings; /* this chunk returns its bindings */
    int            snapshot;        /* this job is session/snapshot */
    int            base_ref;        /* registry ref of the baseline table */
    uint64_t       cpu_start;       /* CPU time when the job began */
    /* the end frame, built by job_main() */
    uint32_t       end_type;        /* 0 until decided */
    json_t        *end;             /* owned */
    /* the message handler's record of the error that ended the chunk */
    int            line;            /* innermost "input" frame shown, 0 unknown */
    int            have_tb;
    size_t         tb_len;
    char           tb[TEXT_MAX + 1];
};

static uint64_t cpu_us(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- end frames ---- */

static void end_error(struct job *job, const char *kind, const char *msg, size_t len)
{
    if (job->end != NULL)
        json_decref(job->end);
    job->end_type = CHAN_ERROR;
    job->end = json_object();
    if (job->end == NULL)
        return;
    json_object_set_new(job->end, "kind", json_string(kind));
    json_object_set_new(job->end, "message", utf8_string_new(msg, len < TEXT_MAX ? len : TEXT_MAX));
}

static void end_errorf(struct job *job, const char *kind, const char *msg)
{
    end_error(job, kind, msg, strlen(msg));
}

static void end_fatal(struct job *job)
{
    struct luaenv_stats st;
    char buf[256];

    luaenv_stats(job->env, &st);
    switch (luaenv_fatal(job->env)) {
    case LUAENV_FATAL_REDUCTIONS:
        if (st.refused != 0)            /* a library call stopped before its work */
            snprintf(buf, sizeof buf, "evaluation exceeded the reduction (CPU) limit after ~%llu "
                     "reductions and was killed: a library call would have cost %s%llu more "
                     "(max_reductions %llu)", (unsigned long long)st.reductions,
                     st.refused > INT64_MAX ? "over " : "",
                     (unsigned long long)(st.refused > INT64_MAX ? INT64_MAX : st.refused),
                     (unsigned long long)st.max_reductions);
        else
            snprintf(buf, sizeof buf, "evaluation exceeded the reduction (CPU) limit after ~%llu "
                     "reductions and was killed", (unsigned long long)st.reductions);
        end_errorf(job, "reductions_limit", buf);
        break;
    case LUAENV_FATAL_CPU:
        end_errorf(job, "cpu_limit", "evaluation exceeded the CPU time limit and was killed");
        break;
    default:
        end_errorf(job, "memory_limit", "evaluation exceeded the memory limit and was killed");
        break;
    }
}

/* The error value at idx as text, without metamethods. */
static const char *error_text(lua_State *L, int idx, size_t *len)
{
    int t = lua_type(L, idx);

    idx = lua_absindex(L, idx);
    if (MUTANT(TOLSTRING_ERRORS)) {
        luaL_tolstring(L, idx, NULL);   /* mutant: __tostring runs in the host */
        lua_replace(L, idx);
        return lua_tolstring(L, idx, len);
    }
    if (t == LUA_TSTRING || t == LUA_TNUMBER)
        return lua_tolstring(L, idx, len);
    lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, idx));
    lua_replace(L, idx);
    return lua_tolstring(L, idx, len);
}

/* ---- tools ---- */

/* One flat global table per tool: __module plus one closure per function.
 * The supervisor has normalised the list (module present, each function a
 * name or an object with "name" and "arities"); anything else is skipped. */
static void make_tools(lua_State *L, struct job *job, int g)
{
    json_t *tools = json_object_get(job->spec, "tools"), *t, *f, *ar, *a;
    size_t i, j, k;

    json_array_foreach(tools, i, t) {
        const char *name = json_string_value(json_object_get(t, "name"));
        const char *module = json_string_value(json_object_get(t, "module"));
        json_t *fns = json_object_get(t, "functions");

        if (name == NULL)
            continue;
        lua_createtable(L, 0, (int)json_array_size(fns) + 1);
        lua_pushstring(L, module != NULL ? module : name);
        lua_setfield(L, -2, "__module");
        json_array_foreach(fns, j, f) {
            const char *fname = json_is_string(f) ? json_string_value(f)
                                                  : json_string_value(json_object_get(f, "name"));
            if (fname == NULL)
                continue;
            lua_pushstring(L, name);
            lua_pushstring(L, fname);
            ar = json_object_get(f, "arities");
            if (json_is_array(ar) && json_array_size(ar) > 0) {
                lua_createtable(L, (int)json_array_size(ar), 0);
                json_array_foreach(ar, k, a) {
                    lua_pushinteger(L, (lua_Integer)json_integer_value(a));
                    lua_rawseti(L, -2, (lua_Integer)k + 1);
                }
            } else {
                lua_pushnil(L);
            }
            calls_push_tool(L, &job->calls);
            lua_setfield(L, -2, fname);
        }
        lua_setfield(L, g, name);
    }
}

/* The baseline: every global name that exists before user data arrives,
 * plus _ENV (not a global, but never a binding either). */
static void make_baseline(lua_State *L, int g)
{
    lua_newtable(L);
    lua_pushnil(L);
    while (lua_next(L, g) != 0) {
        lua_pop(L, 1);
        lua_pushvalue(L, -1);
        lua_pushboolean(L, 1);
        lua_rawset(L, -4);
    }
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "_ENV");
}

/* ---- compile, run ---- */

static void end_syntax(struct job *job, lua_State *L)
{
    json_t *code = json_object_get(job->spec, "code");
    size_t len;
    const char *msg = error_text(L, -1, &len);
    const char *p = strncmp(msg, "input:", 6) == 0 ? msg + 6 : NULL;
    long line = p != NULL ? strtol(p, NULL, 10) : 0;

    if (hint_bare_expression(json_string_value(code), json_string_length(code), line)) {
        lua_pushliteral(L, "\n" SYNTAX_HINT);
        lua_concat(L, 2);
        msg = lua_tolstring(L, -1, &len);
    }
    end_error(job, "syntax_error", msg, len);
    if (line > 0 && job->end != NULL)
        json_object_set_new(job->end, "line", json_integer(line));
}

/*
 * The chunk's traceback.  The message handler runs before the stack unwinds,
 * under the job's limits (they are lifted only once lua_pcall has returned),
 * so it allocates nothing in the Lua state and does bounded work: the text
 * goes to job->tb (TEXT_MAX bytes), names are cut at TB_NAME bytes (no
 * global-name search, which would walk the loaded tables), and a stack of
 * more than TB_DEPTH levels is not measured (lua_getstack costs O(level), so
 * finding the bottom of a deep stack would be quadratic): only its top
 * TB_TOP levels are shown, and only those are searched for the chunk line.
 */
#define TB_TOP      10      /* levels shown from the top */
#define TB_BOTTOM   11      /* levels shown from the bottom of a measured stack */
#define TB_DEPTH    1000    /* deeper stacks are not measured */
#define TB_NAME     64      /* bytes of a function name shown */

static void tb_printf(struct job *job, const char *fmt, ...)
{
    size_t room = sizeof job->tb - job->tb_len;
    va_list ap;
    int n;

    if (room <= 1)
        return;
    va_start(ap, fmt);
    n = vsnprintf(job->tb + job->tb_len, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        job->tb_len += (size_t)n < room ? (size_t)n : room - 1;
}

/* The error value at idx as traceback text, without allocating. */
static void tb_message(struct job *job, lua_State *L, int idx)
{
    size_t len;
    const char *s;

    switch (lua_type(L, idx)) {
    case LUA_TSTRING:
        s = lua_tolstring(L, idx, &len);
        tb_printf(job, "%.*s", (int)(len < TEXT_MAX ? len : TEXT_MAX), s);
        break;
    case LUA_TNUMBER:       /* lua_tolstring would convert it in place */
        if (lua_isinteger(L, idx))
            tb_printf(job, LUA_INTEGER_FMT, (LUAI_UACINT)lua_tointeger(L, idx));
        else
            tb_printf(job, LUA_NUMBER_FMT, (LUAI_UACNUMBER)lua_tonumber(L, idx));
        break;
    default:
        tb_printf(job, "(error object is a %s value)", luaL_typename(L, idx));
        break;
    }
}

static void tb_level(struct job *job, lua_Debug *ar)
{
    tb_printf(job, "\n\t%s:", ar->short_src);
    if (ar->currentline > 0)
        tb_printf(job, "%d:", ar->currentline);
    if (*ar->namewhat != '\0')
        tb_printf(job, " in %s '%.*s'", ar->namewhat, TB_NAME, ar->name);
    else if (*ar->what == 'm')
        tb_printf(job, " in main chunk");
    else if (*ar->what != 'C')
        tb_printf(job, " in function <%s:%d>", ar->short_src, ar->linedefined);
    else
        tb_printf(job, " in ?");
    if (ar->istailcall)
        tb_printf(job, "\n\t(...tail calls...)");
}

/* The number of levels above level 0, or -1 if more than TB_DEPTH. */
static int tb_depth(lua_State *L)
{
    lua_Debug ar;
    int lo = 0, hi = TB_DEPTH + 1;

    if (lua_getstack(L, TB_DEPTH + 1, &ar))
        return -1;
    while (lo + 1 < hi) {       /* level lo exists, level hi does not */
        int mid = lo + (hi - lo) / 2;
        if (lua_getstack(L, mid, &ar))
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* Level `level`: shown in the traceback, and the innermost chunk line. */
static void tb_visit(struct job *job, lua_State *L, int level, int show)
{
    lua_Debug ar;

    if (!lua_getstack(L, level, &ar) || !lua_getinfo(L, "Slnt", &ar))
        return;
    if (job->line == 0 && strcmp(ar.source, "=input") == 0 && ar.currentline > 0)
        job->line = ar.currentline;
    if (show)
        tb_level(job, &ar);
}

static void record_traceback(struct job *job, lua_State *L)
{
    int level, depth = tb_depth(L);
    int top = depth < 0 || depth > TB_TOP + TB_BOTTOM ? TB_TOP : depth;

    job->line = 0;
    job->tb_len = 0;
    tb_message(job, L, 1);
    tb_printf(job, "\nstack traceback:");
    for (level = 1; level <= top; level++)
        tb_visit(job, L, level, 1);
    if (top == depth)
        return;
    tb_printf(job, "\n\t...");
    if (depth < 0) {
        tb_printf(job, "\t(more than %d levels)", TB_DEPTH);
        return;
    }
    for (level = top + 1; job->line == 0 && level <= depth - TB_BOTTOM; level++)
        tb_visit(job, L, level, 0);         /* for the line only */
    for (level = depth - TB_BOTTOM + 1; level <= depth; level++)
        tb_visit(job, L, level, 1);
}

/*
 * Message handler of the chunk.  Every protected boundary the chunk can
 * reach (pcall, xpcall, coroutines) has its own handler or none, and load
 * (which runs under this one, as in stock Lua) says so (luaenv_in_load), so
 * this records only an error that ends the chunk; it still runs under the
 * limits and allocates nothing (record_traceback).
 */
static int msgh(lua_State *L)
{
    struct job *job = lua_touserdata(L, lua_upvalueindex(1));

    if (luaenv_is_fatal_error(L, 1) || luaenv_in_load(L))
        return 1;           /* classified by the flag, or load's: nothing to build */
    if (MUTANT(TRACEBACK_BOUND)) {      /* mutant: the stock traceback with the limits lifted */
        lua_Debug ar;
        size_t len;
        const char *tb;
        luaenv_finish(job->env);
        luaL_traceback(L, L, lua_tostring(L, 1), 1);
        tb = lua_tolstring(L, -1, &len);
        job->tb_len = len < sizeof job->tb - 1 ? len : sizeof job->tb - 1;
        memcpy(job->tb, tb, job->tb_len);
        lua_pop(L, 1);
        for (len = 1; job->line == 0 && lua_getstack(L, (int)len, &ar); len++)
            if (lua_getinfo(L, "Sl", &ar) && strcmp(ar.source, "=input") == 0)
                job->line = ar.currentline;
    } else {
        record_traceback(job, L);
    }
    job->tb[job->tb_len] = '\0';
    job->have_tb = 1;
    return 1;
}

static void end_runtime(struct job *job, lua_State *L)
{
    size_t len;
    const char *msg = error_text(L, -1, &len);

    end_error(job, "runtime_error", msg, len);
    if (job->end == NULL)
        return;
    if (job->line > 0)
        json_object_set_new(job->end, "line", json_integer(job->line));
    if (job->have_tb)
        json_object_set_new(job->end, "traceback", utf8_string_new(job->tb, job->tb_len));
}

/* The values first..top as the result value: none -> null, one -> it,
 * several -> array.  NULL with *err on an encoding error. */
static json_t *encode_results(lua_State *L, int first, size_t max, const char **err)
{
    int i, top = lua_gettop(L);
    json_t *arr, *v;
    size_t size;

    if (first > top)
        return json_null();
    if (first == top) {
        if (codec_to_json(L, first, max, &v, err) != 0)
            return NULL;
        return v;
    }
    arr = json_array();
    if (arr == NULL)
        goto nomem;
    for (i = first; i <= top; i++) {
        if (codec_to_json(L, i, max, &v, err) != 0)
            goto fail;
        if (json_array_append_new(arr, v) != 0)
            goto nomem;
    }
    size = json_dumpb(arr, NULL, 0, JSON_COMPACT);
    if (max != 0 && size > max) {
        *err = CODEC_ERR_TOO_LARGE;
        goto fail;
    }
    return arr;
nomem:
    *err = "out of memory";
fail:
    json_decref(arr);
    return NULL;
}

/* The globals above the baseline as bindings into *out (new reference), or
 * -1 with the end frame set. */
static int export_bindings(struct job *job, lua_State *L, int g, int base, json_t **out)
{
    const char *err;
    size_t size;
    char buf[160];
    int rc;

    /* bindings_export reads a bound of 0 as "unbounded"; here 0 means that no
     * global at all may be left behind. */
    rc = bindings_export(L, g, base, job->max_bindings, out, &size, &err);
    if (rc == 0 && job->max_bindings == 0 && json_array_size(*out) > 0) {
        json_decref(*out);
        rc = -1;
        err = "bindings too large";
    }
    if (rc == 0)
        return 0;
    if (strcmp(err, "bindings too large") == 0) {
        snprintf(buf, sizeof buf, "the global variables left behind exceed max_bindings_bytes "
                 "(%zu bytes)", job->max_bindings);
        end_errorf(job, "bindings_too_large", buf);
    } else {
        end_errorf(job, "internal_error", err);
    }
    return -1;
}

static void end_result(struct job *job, lua_State *L, int g, int base, int first)
{
    const char *err;
    json_t *value, *b, *names;
    char buf[160];

    value = encode_results(L, first, job->max_result, &err);
    if (value == NULL) {
        if (strcmp(err, CODEC_ERR_TOO_LARGE) == 0)
            snprintf(buf, sizeof buf, "cannot return the value: larger than %zu bytes", job->max_result);
        else
            snprintf(buf, sizeof buf, "cannot return the value: %s", err);
        end_errorf(job, "runtime_error", buf);
        return;
    }
    if (job->session && !job->return_bindings) {   /* a session chunk, no bindings asked */
        job->end_type = CHAN_RESULT;
        job->end = json_pack("{s:o}", "value", value);
        return;
    }
    if (export_bindings(job, L, g, base, &b) != 0) {
        json_decref(value);
        return;
    }
    names = bindings_names(b, &err);
    job->end_type = CHAN_RESULT;
    job->end = json_pack("{s:o, s:o, s:o}", "value", value, "bindings", b,
                         "binding_names", names ? names : json_array());
}

/* Tool tables, parallel(), the baseline (pushed: the returned index) and
 * the job's bindings in the globals at g.  0, or -1 with the end frame set. */
static int setup_globals(struct job *job, lua_State *L, int g, int *base)
{
    json_t *bindings = json_object_get(job->spec, "bindings");
    const char *err;

    make_tools(L, job, g);
    calls_push_parallel(L, &job->calls);
    lua_setfield(L, g, "parallel");
    make_baseline(L, g);
    *base = lua_gettop(L);
    if (bindings != NULL && !json_is_null(bindings)
        && bindings_restore(L, g, *base, bindings, &err) != 0) {
        end_errorf(job, "invalid_params", err);
        return -1;
    }
    return 0;
}

static int run_code(struct job *job, lua_State *L, int g, int base);

/* Runs under lua_pcall; argument 1 is the job. */
static int job_main(lua_State *L)
{
    struct job *job = lua_touserdata(L, 1);
    int g, base = 0;

    lua_settop(L, 0);
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);   /* the real globals */
    g = lua_gettop(L);
    if (!job->check && setup_globals(job, L, g, &base) != 0)
        return 0;
    return run_code(job, L, g, base);
}

/* Compile and run the job's code; the end frame is left in job. */
static int run_code(struct job *job, lua_State *L, int g, int base)
{
    const char *code = json_string_value(json_object_get(job->spec, "code"));
    size_t code_len = json_string_length(json_object_get(job->spec, "code"));
    int chunk, status;

    status = luaL_loadbufferx(L, code, code_len, "=input", "t");
    if (status != LUA_OK) {
        if (luaenv_catch_end(L, status) == LUAENV_CAUGHT_FATAL)
            end_fatal(job);
        else if (status == LUA_ERRSYNTAX)
            end_syntax(job, L);
        else
            end_runtime(job, L);
        return 0;
    }
    if (job->check) {
        job->end_type = CHAN_RESULT;
        job->end = json_object();
        return 0;
    }
    chunk = lua_gettop(L);
    lua_pushlightuserdata(L, job);
    lua_pushcclosure(L, msgh, 1);
    lua_insert(L, chunk);       /* handler below the chunk */
    luaenv_start(job->env);
    status = lua_pcall(L, 0, LUA_MULTRET, chunk);
    if (status != LUA_OK) {
        enum luaenv_caught c = luaenv_catch_end(L, status);
        luaenv_finish(job->env);
        if (c == LUAENV_CAUGHT_FATAL)
            end_fatal(job);
        else
            end_runtime(job, L);
        return 0;
    }
    luaenv_finish(job->env);    /* no Lua runs from here on */
    if (luaenv_fatal(job->env) != LUAENV_FATAL_NONE) {
        end_fatal(job);
        return 0;
    }
    end_result(job, L, g, base, chunk + 1);
    return 0;
}

/* ---- sessions: one state, chunk after chunk ---- */

/* session/open, under lua_pcall (argument 1 the job): the globals are set
 * up once; the baseline is kept in the registry for every later chunk. */
static int session_open_main(lua_State *L)
{
    struct job *job = lua_touserdata(L, 1);
    int g, base;

    lua_settop(L, 0);
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
    g = lua_gettop(L);
    if (setup_globals(job, L, g, &base) != 0)
        return 0;
    lua_pushvalue(L, base);
    job->base_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    job->end_type = CHAN_RESULT;
    job->end = json_object();
    return 0;
}

/* One chunk of a session, under lua_pcall. */
static int session_chunk_main(lua_State *L)
{
    struct job *job = lua_touserdata(L, 1);
    int g;

    lua_settop(L, 0);
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
    g = lua_gettop(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, job->base_ref);
    if (job->snapshot) {
        json_t *b, *names;
        const char *err;
        luaenv_finish(job->env);    /* no Lua runs: the globals are read raw */
        if (export_bindings(job, L, g, g + 1, &b) != 0)
            return 0;
        names = bindings_names(b, &err);
        job->end_type = CHAN_RESULT;
        job->end = json_pack("{s:o, s:o}", "bindings", b, "binding_names",
                             names ? names : json_array());
        return 0;
    }
    return run_code(job, L, g, g + 1);
}

/* ---- the job frame ---- */

/* A limit: a non-negative integer, or null/absent for dflt. */
static size_t limit_of(json_t *limits, const char *key, size_t dflt)
{
    json_t *v = json_object_get(limits, key);
    json_int_t n;

    if (!json_is_integer(v))
        return dflt;
    n = json_integer_value(v);
    return n < 0 ? dflt : (size_t)n;
}

/* Read the next JOB frame.  first: the worker's one job, or a session's
 * open ("execute", "check", "session"); else a session's next job
 * ("chunk", "snapshot").  Anything else ends the process. */
static void read_job(struct job *job, int first)
{
    json_t *op, *code, *limits;
    const char *o;
    char *payload;
    size_t len;
    uint32_t type;
    /* an agent that runs chunk after chunk sends the next one soon */
    uint64_t t0 = first ? 0 : look_begin(&job->chunks, job->fd);

    if (chan_recv(job->fd, &type, &payload, &len, JOB_MAX_BYTES) != 0 || type != CHAN_JOB)
        _exit(WORKER_EXIT_PROTO);
    TRACE(TR_W_JOB);
    look_end(&job->chunks, t0);
    json_decref(job->spec);
    job->spec = jb_load(payload, len, JP_CHUNK);    /* long bindings in one pass */
    free(payload);
    op = json_object_get(job->spec, "op");
    code = json_object_get(job->spec, "code");
    limits = json_object_get(job->spec, "limits");
    o = json_string_value(op);
    if (o == NULL || (limits != NULL && !json_is_object(limits)))
        _exit(WORKER_EXIT_PROTO);
    job->snapshot = !first && strcmp(o, "snapshot") == 0;
    job->return_bindings = json_is_true(json_object_get(job->spec, "return_bindings"));
    if (first && strcmp(o, "session") == 0)
        job->session = 1;
    else if (first && strcmp(o, "check") == 0)
        job->check = 1;
    else if (!(first && strcmp(o, "execute") == 0) && !(!first && strcmp(o, "chunk") == 0) &&
             !job->snapshot)
        _exit(WORKER_EXIT_PROTO);
    if (!json_is_string(code) && !job->session && !job->snapshot)
        _exit(WORKER_EXIT_PROTO);
}

/* The supervisor sizes the kernel backstops; the worker lowers its own
 * limits (always permitted, and allowed by the seccomp filter only for these
 * two resources of this process).  A failure leaves the looser limits set
 * by contain_worker in place.  So with the job's priority: any process may
 * raise its own nice value (the filter allows only that, on itself, from
 * the daemon's value to 19); lowering it, from a pool's 19, fails here
 * (EACCES) and is the supervisor's, which then holds CAP_SYS_NICE
 * (wproc_apply_limits). */
static void apply_rlimits(struct job *job, json_t *limits)
{
    json_t *as = json_object_get(limits, "rlimit_as");
    json_t *cpu = json_object_get(limits, "rlimit_cpu");
    json_t *nice = json_object_get(limits, "nice");
    struct rlimit r;

    if (json_is_integer(nice) && !MUTANT(WORKER_NICE))     /* the mutant: left to the supervisor */
        (void)setpriority(PRIO_PROCESS, 0, (int)json_integer_value(nice));

    if (job->session) {
        /* RLIMIT_AS bounds the whole state: set once, at the open.  The CPU
         * backstop is per chunk: counted from the CPU time already used, and
         * the hard limit is left where it is so the next chunk can move the
         * soft one (no chunk dies of the session's history). */
        if (job->base_ref == 0 && json_is_integer(as) && json_integer_value(as) > 0) {
            r.rlim_cur = r.rlim_max = (rlim_t)json_integer_value(as);
            (void)setrlimit(RLIMIT_AS, &r);
        }
        r.rlim_max = RLIM_INFINITY;
        r.rlim_cur = RLIM_INFINITY;
        if (json_is_integer(cpu) && json_integer_value(cpu) > 0) {
            r.rlim_cur = (rlim_t)json_integer_value(cpu);
            if (!MUTANT(SESSION_CPU_BASE))  /* the mutant: counted from 0, not from now */
                r.rlim_cur += (rlim_t)(cpu_us() / 1000000u);
        }
        (void)setrlimit(RLIMIT_CPU, &r);
        return;
    }
    if (json_is_integer(as) && json_integer_value(as) > 0) {
        r.rlim_cur = r.rlim_max = (rlim_t)json_integer_value(as);
        (void)setrlimit(RLIMIT_AS, &r);
    }
    if (json_is_integer(cpu) && json_integer_value(cpu) > 0) {
        r.rlim_cur = (rlim_t)json_integer_value(cpu);
        r.rlim_max = r.rlim_cur + 1;
        (void)setrlimit(RLIMIT_CPU, &r);
    }
}

/* The job's limits; the first job of the worker also sets up the tool
 * calls (their numbering runs on across a session's chunks), a later one
 * only bounds their look at the channel. */
static void apply_limits(struct job *job, int first)
{
    json_t *limits = json_object_get(job->spec, "limits");
    struct luaenv_limits lim;

    /* 0 means "no limit" to luaenv; a job's explicit 0 means "nothing". */
    lim.max_heap = limit_of(limits, "max_heap", 0);
    if (json_is_integer(json_object_get(limits, "max_heap")) && lim.max_heap == 0)
        lim.max_heap = 1;
    lim.max_reductions = limit_of(limits, "max_reductions", 0);
    if (json_is_integer(json_object_get(limits, "max_reductions")) && lim.max_reductions == 0)
        lim.max_reductions = 1;
    lim.cpu_us = (uint64_t)limit_of(limits, "cpu_ms", 0) * 1000u;  /* optional extension */
    lim.max_output_bytes = limit_of(limits, "max_output_bytes", DEFAULT_OUTPUT);
    apply_rlimits(job, limits);
    lim.output_fd = job->check ? -1 : job->fd;
    job->max_result = limit_of(limits, "max_result_bytes", DEFAULT_RESULT);
    job->max_bindings = limit_of(limits, "max_bindings_bytes", DEFAULT_BINDINGS);
    if (first) {
        calls_init(&job->calls, job->fd, job->max_result,
                   (unsigned)limit_of(limits, "max_parallel_calls", 1),
                   (unsigned)limit_of(limits, "tool_spin_us", 0));
        look_init(&job->chunks, (unsigned)limit_of(limits, "tool_spin_us", 0));
    } else if (!MUTANT(SPIN_CHUNK)) {
        calls_set_spin(&job->calls, (unsigned)limit_of(limits, "tool_spin_us", 0));
        look_bound(&job->chunks, (long long)limit_of(limits, "tool_spin_us", 0));
    }
    job->cpu_start = cpu_us();
    luaenv_apply(job->env, &lim);
}

static void send_end(struct job *job)
{
    struct luaenv_stats st;
    char *text;
    size_t len;

    if (job->end == NULL)
        _exit(WORKER_EXIT_PROTO);   /* out of memory building it: nothing to send */
    if (!(job->check && job->end_type == CHAN_RESULT)) {
        luaenv_stats(job->env, &st);
        json_object_set_new(job->end, "output_truncated", json_boolean(st.output_truncated));
        json_object_set_new(job->end, "stats", json_pack("{s:I, s:I, s:I}",
                            "reductions", (json_int_t)st.reductions,
                            "heap_peak_bytes", (json_int_t)st.heap_peak_bytes,
                            "cpu_us", (json_int_t)(cpu_us() - job->cpu_start)));
#if SANDBOXD_BENCH_TRACE
        TRACE(TR_W_END);
        json_t *tr = json_array();
        for (int i = TR_SUP_N; i < TR_N; i++)
            json_array_append_new(tr, json_integer((json_int_t)trace_t[i]));
        json_object_set_new(json_object_get(job->end, "stats"), "trace", tr);
#endif
    }
    /* a long string (a binding, the value) is quoted in one pass */
    text = jb_dump(job->end, JP_CHUNK, &len);
    if (text == NULL || chan_send(job->fd, job->end_type, text, len) != 0)
        _exit(WORKER_EXIT_PROTO);
}

/* ---- entry points ---- */

static int prepare(lua_State *L)
{
    calls_prepare(L);
    return 0;
}

struct luaenv *worker_env_new(void)
{
    struct luaenv *env = luaenv_new();
    lua_State *L;

    if (env == NULL)
        return NULL;
    L = luaenv_state(env);
    lua_pushcfunction(L, prepare);
    if (lua_pcall(L, 0, 0, 0) != LUA_OK)
        return NULL;    /* the zygote exits; the state is not worth closing */
    lua_gc(L, LUA_GCCOLLECT, 0);
    return env;
}

/* Run f(job) under lua_pcall and send its end frame.  Returns 1 when the
 * state may run another chunk: a result, a syntax or runtime error, or a
 * snapshot over max_bindings_bytes. */
static int run_job(struct job *job, lua_CFunction f)
{
    lua_State *L = luaenv_state(job->env);
    const char *kind;
    int status;

    job->end_type = 0;
    json_decref(job->end);
    job->end = NULL;
    job->line = 0;
    job->have_tb = 0;
    job->tb_len = 0;
    lua_pushcfunction(L, f);
    lua_pushlightuserdata(L, job);
    status = lua_pcall(L, 1, 0, 0);
    TRACE(TR_W_LUA);
    if (status != LUA_OK) {
        /* escaped the job function: a memory error in tool tables or bindings */
        enum luaenv_caught c = luaenv_catch_end(L, status);
        luaenv_finish(job->env);
        if (c == LUAENV_CAUGHT_FATAL) {
            end_fatal(job);
        } else {
            size_t len;
            const char *msg = error_text(L, -1, &len);
            end_error(job, "internal_error", msg, len);
        }
    }
    luaenv_finish(job->env);
    lua_settop(L, 0);
    if (job->end_type == 0)
        end_errorf(job, "internal_error", "the job ended without a result");
    send_end(job);
    if (job->end_type == CHAN_RESULT)
        return 1;
    kind = json_string_value(json_object_get(job->end, "kind"));
    /* a session goes on after a syntax or runtime error, and after a
     * snapshot over max_bindings_bytes (nothing ran: the state is whole) */
    return luaenv_fatal(job->env) == LUAENV_FATAL_NONE && kind != NULL &&
           (strcmp(kind, "syntax_error") == 0 || strcmp(kind, "runtime_error") == 0 ||
            (job->snapshot && strcmp(kind, "bindings_too_large") == 0));
}

/*
 * Performance: a pooled worker waits for its job with the pages that job
 * will write first made its own, so their faults are not on the
 * execution's path: a block of WARM_HEAP bytes taken from the heap and
 * written (malloc keeps it as its top when freed: below the trim
 * threshold), and the vDSO's data page mapped by one reading of the clock.
 * With the zygote's warm-up (contain_warm_up) a trivial execution's worker
 * faulted ~15 times after its job arrived; with these, ~10.
 */
#define WARM_HEAP ((size_t)64 << 10)

static void prepare_for_job(void)
{
    struct timespec ts;
    char *p = malloc(WARM_HEAP);

    if (p != NULL) {
        memset(p, 0, WARM_HEAP);
        free(p);
    }
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
}

void worker_run(struct luaenv *env, int fd)
{
    struct job job = {.env = env, .fd = fd};

    prepare_for_job();
    read_job(&job, 1);
    apply_limits(&job, 1);
    TRACE(TR_W_READY);
    if (!job.session) {
        run_job(&job, job_main);
        _exit(WORKER_EXIT_OK);
    }
    /* a session: the open, then chunk after chunk until the supervisor
     * kills the process (or a chunk ends it with a limit) */
    if (!run_job(&job, session_open_main))
        _exit(WORKER_EXIT_OK);
    for (;;) {
        read_job(&job, 0);
        apply_limits(&job, 0);
        TRACE(TR_W_READY);
        if (!run_job(&job, session_chunk_main))
            _exit(WORKER_EXIT_OK);
    }
}
