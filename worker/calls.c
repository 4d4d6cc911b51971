/*
 * calls.c - tool calls from the worker's Lua state, and parallel()
 * (contract: calls.h; the frames: docs/architecture.md, "Channel").
 *
 * A tool function's Lua stack while its call is in flight:
 *   1..n  the arguments, n+1 a jsonbox (the encoded arguments until they
 *   are sent, then the answer), n+2 the call's number (0 until sent).
 * tool_step() moves a call forward from whatever point it had reached, so
 * the same code runs on the first entry and in the continuation after a
 * yield to parallel()'s scheduler, whoever resumed the coroutine.
 *
 * parallel()'s stack: 1..n the functions (replaced by each one's first
 * result or error value), n+1 the branch map, then for branch i its thread
 * at n+2i and its struct branch (a userdata) at n+2i+1.  The map (registry,
 * weak keys, never reachable from Lua) takes a thread to its branch, so a
 * tool function finds out whether it runs directly in a branch.
 */
#include "worker/calls.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker/codec.h"
#include "worker/look.h"
#include "worker/luaenv.h"
#include "worker/worker.h"
#include "proto/chan.h"
#include "worker/jsonbig.h"
#include "proto/jsonpass.h"
#include "proto/mutant.h"

#define JSONBOX  "sandboxd.jsonbox"
#define TEXT_MAX 8192           /* the message of a tool error */

struct calls_answer {
    struct calls_answer *next;
    unsigned call;
    json_t  *json;              /* {"call", "ok", "value" | "message"}, owned */
};

enum { BR_NEW, BR_RUN, BR_WAIT, BR_SLOT, BR_DONE, BR_FAILED };

struct branch {
    lua_State *co;
    int        state;
    unsigned   call;            /* BR_WAIT: the call it waits for */
    int        live;            /* 0 once its parallel() has returned */
};

static const char branch_map_key = 'b';

/* ---- the JSON box: a userdata owning one json_t ---- */

static int jsonbox_gc(lua_State *L)
{
    json_t **box = lua_touserdata(L, 1);
    if (*box != NULL) {
        json_decref(*box);
        *box = NULL;
    }
    return 0;
}

/* If a Lua error unwinds past the holder, the collector frees the JSON. */
static json_t **jsonbox_new(lua_State *L)
{
    json_t **box = lua_newuserdata(L, sizeof *box);
    *box = NULL;
    luaL_setmetatable(L, JSONBOX);
    return box;
}

void calls_prepare(lua_State *L)
{
    luaL_newmetatable(L, JSONBOX);
    lua_pushcfunction(L, jsonbox_gc);
    lua_setfield(L, -2, "__gc");
    lua_pop(L, 1);
}

void calls_set_spin(struct calls *c, unsigned spin_us)
{
    look_bound(&c->look, spin_us);
}

void calls_init(struct calls *c, int fd, size_t max_result, unsigned max_parallel,
                unsigned spin_us)
{
    memset(c, 0, sizeof *c);
    c->fd = fd;
    c->max_result = max_result;
    c->max_parallel = max_parallel ? max_parallel : 1;
    look_init(&c->look, spin_us);       /* the whole window until a tool is slow */
    c->pend = calloc(c->max_parallel, sizeof *c->pend);
    if (c->pend == NULL)
        _exit(WORKER_EXIT_PROTO);
}

/* ---- the channel ---- */

/* Send one call (takes args); returns its number.  outstanding < max. */
static unsigned send_call(struct calls *c, const char *tool, const char *fn, json_t *args)
{
    json_t *call = json_pack("{s:s, s:s, s:o}", "tool", tool, "function", fn, "args", args);
    char *text = call ? json_dumps(call, JSON_COMPACT) : NULL;

    if (text == NULL || chan_send(c->fd, CHAN_TOOL_CALL, text, strlen(text)) != 0)
        _exit(WORKER_EXIT_PROTO);
    free(text);
    json_decref(call);
    c->pend[c->outstanding++] = ++c->next_call;
    return c->next_call;
}

/* Read one answer (blocking) and keep it.  It must name an outstanding call. */
static void read_answer(struct calls *c)
{
    struct calls_answer *a, **tail;
    char *payload;
    size_t len;
    uint32_t type;
    json_t *j, *k;
    unsigned i;
    uint64_t t0;

    if (c->outstanding == 0)
        _exit(WORKER_EXIT_PROTO);
    t0 = look_begin(&c->look, c->fd);       /* look.h: why */
    if (chan_recv(c->fd, &type, &payload, &len, CHAN_TOOL_RESULT_MAX) != 0 ||
        type != CHAN_TOOL_RESULT)
        _exit(WORKER_EXIT_PROTO);
    look_end(&c->look, t0);
    j = jb_load(payload, len, JP_CHUNK);            /* a long answer in one pass */
    free(payload);
    look_bound(&c->look, json_integer_value(json_object_get(j, "spin_us")));
    k = json_object_get(j, "call");
    for (i = 0; json_is_integer(k) && i < c->outstanding; i++)
        if ((json_int_t)c->pend[i] == json_integer_value(k))
            break;
    if (!json_is_object(j) || !json_is_integer(k) || i == c->outstanding ||
        (a = malloc(sizeof *a)) == NULL)
        _exit(WORKER_EXIT_PROTO);
    a->call = c->pend[i];
    a->json = j;
    a->next = NULL;
    c->pend[i] = c->pend[--c->outstanding];
    for (tail = &c->kept; *tail != NULL; tail = &(*tail)->next)
        ;
    *tail = a;
}

static int has_answer(const struct calls *c, unsigned call)
{
    for (const struct calls_answer *a = c->kept; a != NULL; a = a->next)
        if (a->call == call)
            return 1;
    return 0;
}

/* The answer to call (owned by the caller), reading until it is there. */
static json_t *wait_answer(struct calls *c, unsigned call)
{
    for (;;) {
        for (struct calls_answer **p = &c->kept; *p != NULL; p = &(*p)->next) {
            struct calls_answer *a = *p;
            if (a->call == call) {
                json_t *j = a->json;
                *p = a->next;
                free(a);
                return j;
            }
        }
        read_answer(c);
    }
}

/* ---- tool functions ---- */

/* "Weather.get takes 1, 2 or 3 argument(s), got 4" as the error value. */
static int arity_error(lua_State *L, const char *tool, const char *fn, int got)
{
    lua_Integer k, n = (lua_Integer)lua_rawlen(L, lua_upvalueindex(3));
    luaL_Buffer b;

    luaL_buffinit(L, &b);
    lua_pushfstring(L, "%s.%s takes ", tool, fn);
    luaL_addvalue(&b);
    for (k = 1; k <= n; k++) {
        if (k > 1)
            luaL_addstring(&b, k == n ? " or " : ", ");
        lua_rawgeti(L, lua_upvalueindex(3), k);
        luaL_addvalue(&b);
    }
    lua_pushfstring(L, " argument(s), got %d", got);
    luaL_addvalue(&b);
    luaL_pushresult(&b);
    return lua_error(L);
}

static int arity_allowed(lua_State *L, int got)
{
    lua_Integer k, n = (lua_Integer)lua_rawlen(L, lua_upvalueindex(3));

    if (n == 0)
        return 1;
    for (k = 1; k <= n; k++) {
        lua_rawgeti(L, lua_upvalueindex(3), k);
        if (lua_tointeger(L, -1) == got) {
            lua_pop(L, 1);
            return 1;
        }
        lua_pop(L, 1);
    }
    return 0;
}

/* The branch L runs as, when L is a live branch of parallel() that may
 * yield; else NULL. */
static struct branch *current_branch(lua_State *L)
{
    struct branch *b;

    if (!lua_isyieldable(L))
        return NULL;
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &branch_map_key) != LUA_TTABLE) {
        lua_pop(L, 1);
        return NULL;
    }
    lua_pushthread(L);
    lua_rawget(L, -2);
    b = lua_touserdata(L, -1);
    lua_pop(L, 2);
    return b != NULL && b->live && b->co == L ? b : NULL;
}

/* The answer in *box as the call's one return value, or its error. */
static int push_answer(lua_State *L, const char *tool, const char *fn, json_t **box)
{
    json_t *v;
    const char *err;
    size_t len;

    if (json_is_true(json_object_get(*box, "ok"))) {
        int host = luaenv_host_begin(L);    /* the client's value: not the chunk's work */
        v = json_object_get(*box, "value");
        if (v == NULL)
            lua_pushnil(L);
        else if (codec_push_json(L, v, &err) != 0) {
            luaenv_host_end(L, host);
            lua_pushfstring(L, "%s.%s: cannot use the result: %s", tool, fn, err);
            return lua_error(L);
        }
        luaenv_host_end(L, host);
        json_decref(*box);
        *box = NULL;
        return 1;
    }
    v = json_object_get(*box, "message");
    lua_pushfstring(L, "%s.%s: ", tool, fn);
    if (json_is_string(v)) {
        len = json_string_length(v);
        lua_pushlstring(L, json_string_value(v), len < TEXT_MAX ? len : TEXT_MAX);
    } else {
        lua_pushliteral(L, "tool error");
    }
    lua_concat(L, 2);
    json_decref(*box);
    *box = NULL;
    return lua_error(L);
}

static int tool_step(lua_State *L, int n);

static int tool_cont(lua_State *L, int status, lua_KContext ctx)
{
    (void)status;
    return tool_step(L, (int)ctx);
}

/* Moves the call forward: wait for a slot, send, wait for the answer. */
static int tool_step(lua_State *L, int n)
{
    const char *tool = lua_tostring(L, lua_upvalueindex(1));
    const char *fn = lua_tostring(L, lua_upvalueindex(2));
    struct calls *c = lua_touserdata(L, lua_upvalueindex(4));
    json_t **box = lua_touserdata(L, n + 1);
    lua_Integer k = lua_tointeger(L, n + 2);
    struct branch *b = current_branch(L);

    if (k == 0) {
        if (b != NULL && c->outstanding >= c->max_parallel) {
            b->state = BR_SLOT;
            return lua_yieldk(L, 0, (lua_KContext)n, tool_cont);
        }
        while (c->outstanding >= c->max_parallel)
            read_answer(c);             /* frees a slot; the answer is kept */
        luaenv_output_flush(luaenv_from(L));    /* output printed before the call first */
        k = send_call(c, tool, fn, *box);   /* takes the arguments */
        *box = NULL;
        lua_pushinteger(L, k);
        lua_replace(L, n + 2);
        if (b != NULL) {
            b->state = BR_WAIT;
            b->call = (unsigned)k;
            return lua_yieldk(L, 0, (lua_KContext)n, tool_cont);
        }
    }
    *box = wait_answer(c, (unsigned)k);
    if (b != NULL)
        b->state = BR_RUN;
    return push_answer(L, tool, fn, box);
}

/*
 * A tool function.  Upvalues: tool name, function name, arities (table or
 * nil), the struct calls (light userdata).  Encodes the arguments and
 * returns exactly one value, or raises the catchable "Tool.fn: message".
 */
static int tool_fn(lua_State *L)
{
    const char *tool = lua_tostring(L, lua_upvalueindex(1));
    const char *fn = lua_tostring(L, lua_upvalueindex(2));
    struct calls *c = lua_touserdata(L, lua_upvalueindex(4));
    int i, n = lua_gettop(L);
    json_t **box, *args, *v;
    const char *err;

    if (!lua_isnil(L, lua_upvalueindex(3)) && !arity_allowed(L, n))
        return arity_error(L, tool, fn, n);
    luaL_checkstack(L, 4, "too many arguments");
    box = jsonbox_new(L);               /* before any C allocation */
    *box = args = json_array();
    if (args == NULL)
        return luaL_error(L, "%s.%s: out of memory", tool, fn);
    for (i = 1; i <= n; i++) {
        if (codec_to_json(L, i, c->max_result, &v, &err) != 0) {
            lua_pushfstring(L, "%s.%s: cannot pass argument #%d: %s", tool, fn, i, err);
            return lua_error(L);        /* the box frees args */
        }
        json_array_append_new(args, v);
    }
    if (c->max_result != 0 && json_dumpb(args, NULL, 0, JSON_COMPACT) > c->max_result) {
        lua_pushfstring(L, "%s.%s: arguments larger than %I bytes", tool, fn,
                        (lua_Integer)c->max_result);
        return lua_error(L);
    }
    lua_pushinteger(L, 0);              /* not sent yet */
    return tool_step(L, n);
}

void calls_push_tool(lua_State *L, struct calls *c)
{
    lua_pushlightuserdata(L, c);
    lua_pushcclosure(L, tool_fn, 4);
}

/* ---- parallel ---- */

#define TH(n, i) ((n) + 2 * (i))
#define UD(n, i) ((n) + 2 * (i) + 1)

/* Branch i ends with the error value on top of L. */
static void branch_failed(lua_State *L, struct branch *b, int i)
{
    lua_replace(L, i);
    b->state = BR_FAILED;
}

/* Resume branch i once; record how it stopped. */
static void resume_branch(lua_State *L, struct branch *b, int i)
{
    lua_State *co = b->co;
    int status;

    luaenv_arm(L, co);                  /* as coroutine.resume: may raise */
    b->state = BR_RUN;
    status = lua_resume(co, L, 0);
    if (status == LUA_YIELD) {
        if (b->state == BR_RUN) {       /* not a tool call: a yield of its own */
            lua_settop(co, 0);
            lua_pushfstring(L, "parallel: function #%d yielded outside a tool call", i);
            branch_failed(L, b, i);
        }
        return;
    }
    if (status == LUA_OK) {
        if (lua_gettop(co) == 0) {
            lua_pushnil(L);
        } else {
            lua_settop(co, 1);
            lua_xmove(co, L, 1);
        }
        lua_replace(L, i);
        b->state = BR_DONE;
        return;
    }
    lua_xmove(co, L, 1);
    if (luaenv_catch(L, status) == LUAENV_CAUGHT_FATAL)
        luaenv_rethrow(L);
    branch_failed(L, b, i);
}

static void push_branch_map(lua_State *L)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &branch_map_key) == LUA_TTABLE)
        return;
    lua_pop(L, 1);
    lua_newtable(L);
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &branch_map_key);
}

/* parallel(f1, f2, ...): upvalue 1 is the struct calls. */
static int parallel_fn(lua_State *L)
{
    struct calls *c = lua_touserdata(L, lua_upvalueindex(1));
    int n = lua_gettop(L), i, active, progressed;

    for (i = 1; i <= n; i++)
        luaL_checktype(L, i, LUA_TFUNCTION);
    luaL_checkstack(L, 2 * n + 8, "too many functions for parallel");
    push_branch_map(L);                 /* n+1 */
    for (i = 1; i <= n; i++) {
        lua_State *co = lua_newthread(L);
        struct branch *b = lua_newuserdata(L, sizeof *b);
        b->co = co;
        b->state = BR_NEW;
        b->call = 0;
        b->live = 1;
        lua_pushvalue(L, i);
        lua_xmove(L, co, 1);
        if (!MUTANT(PARALLEL_PREPAY))
            luaenv_arm_new(L, co);      /* as coroutine.create: its first period paid */
        lua_pushvalue(L, TH(n, i));
        lua_pushvalue(L, UD(n, i));
        lua_rawset(L, n + 1);
    }
    for (;;) {
        active = progressed = 0;
        for (i = 1; i <= n; i++) {
            struct branch *b = lua_touserdata(L, UD(n, i));
            if (b->state == BR_RUN) {   /* resumed from elsewhere and left there */
                lua_pushfstring(L, "parallel: function #%d was resumed outside parallel", i);
                branch_failed(L, b, i);
            } else if (b->state == BR_NEW ||
                       (b->state == BR_WAIT && has_answer(c, b->call)) ||
                       (b->state == BR_SLOT && c->outstanding < c->max_parallel)) {
                resume_branch(L, b, i);
                progressed = 1;
            }
            if (b->state != BR_DONE && b->state != BR_FAILED)
                active++;
        }
        if (active == 0)
            break;
        if (!progressed && c->outstanding == 0)
            break;                      /* cannot happen: every wait has a call out */
        if (!progressed)
            read_answer(c);             /* blocks for the next answer */
    }
    for (i = 1; i <= n; i++)
        ((struct branch *)lua_touserdata(L, UD(n, i)))->live = 0;
    if (active != 0)
        return luaL_error(L, "parallel: the functions wait for nothing");
    for (i = 1; i <= n; i++) {
        if (((struct branch *)lua_touserdata(L, UD(n, i)))->state == BR_FAILED) {
            lua_pushvalue(L, i);
            return lua_error(L);
        }
    }
    lua_settop(L, n);
    return n;
}

void calls_push_parallel(lua_State *L, struct calls *c)
{
    lua_pushlightuserdata(L, c);
    lua_pushcclosure(L, parallel_fn, 1);
}
