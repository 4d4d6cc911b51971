/* Runs in: zygote, worker */
/*
 * luaenv_lib.c - the replacement library functions of the sandbox (the
 * list and their contracts are in luaenv.h).  Each protected boundary here
 * (pcall, xpcall, coroutine.resume/wrap, load) passes what it caught through
 * luaenv_catch() and rethrows while a fatal limit is set.
 *
 * The MUTANT(...) branches are the mutation check's (proto/mutant.h): each
 * switches one hardening piece off in a test build, and is constant false
 * in every other.
 */
#include "worker/luaenv.h"

#include "worker/charge.h"
#include "proto/mutant.h"

#include <lauxlib.h>
#include <lualib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define RESERVED_SLOT 5   /* load: keeps the reader's last piece alive */

static int too_large(lua_State *L)
{
    return luaL_error(L, "resulting string too large");
}

/* Before building a result of about `need` bytes in a luaL_Buffer (which
 * gets no emergency collection): collect first if it would not fit. */
static void make_room(lua_State *L, size_t need)
{
    struct luaenv *e = luaenv_from(L);

    if (e->max_heap != 0 && (need > e->max_heap || e->used > e->max_heap - need))
        luaenv_collect(L);
}

/* Call the original function (upvalue 1) with this call's arguments. */
static int call_original(lua_State *L)
{
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

/* ---- pcall, xpcall ---- */

static int finish_pcall(lua_State *L, int status, lua_KContext extra)
{
    if (status != LUA_OK && status != LUA_YIELD) {
        luaenv_charge_unwind(L);
        /* (the mutant: pcall/xpcall swallow a fatal limit) */
        if (luaenv_catch(L, status) == LUAENV_CAUGHT_FATAL && !MUTANT(PCALL_RETHROW))
            return luaenv_rethrow(L);
        lua_pushboolean(L, 0);
        lua_pushvalue(L, -2);
        return 2;
    }
    return lua_gettop(L) - (int)extra;
}

static int sb_pcall(lua_State *L)
{
    int status;

    luaL_checkany(L, 1);
    lua_pushboolean(L, 1);
    lua_insert(L, 1);
    status = lua_pcallk(L, lua_gettop(L) - 2, LUA_MULTRET, 0, 0, finish_pcall);
    return finish_pcall(L, status, 0);
}

/*
 * xpcall's message handler is a guard around the user's handler h: h never
 * sees a fatal error, so it cannot run code after a limit was hit.  The
 * guard is a Lua function (made by GUARD_MAKER, kept in the registry at
 * &guard_key), so that h runs at the C-stack depth stock Lua gives it (a C
 * guard would be one C call deeper for each call of h, and a handler that
 * raises would recurse half as far).  It calls h as guard_pass returns it:
 * a Lua h by a tail call, which leaves h the error levels it has in stock
 * Lua; a C h unnamed (a call of a call's result), so luaL names it by
 * searching the loaded tables, as for a handler called from C; and the
 * guard has no line information (stripped), so h's luaL_where(1) is empty
 * as under the C function that raised in stock Lua.
 */
static const char GUARD_MAKER[] =
    "local pass = ...\n"
    "return function(h) return function(m) return pass(m, h)(m) end end";
static const char guard_key = 0;

/* The handler to call for error value m (index 1): h (index 2), or, for a
 * fatal error (luaenv_is_fatal_error), a function that returns m. */
static int guard_keep(lua_State *L)
{
    lua_settop(L, 1);
    return 1;
}

static int guard_pass(lua_State *L)
{
    if (!MUTANT(XPCALL_HANDLER) && luaenv_is_fatal_error(L, 1))
        lua_pushcfunction(L, guard_keep);
    else
        lua_pushvalue(L, 2);
    return 1;
}

struct dump {
    char  *p;
    size_t len;
    int    failed;
};

/* lua_dump's writer: append to a malloc'd block. */
static int dump_piece(lua_State *L, const void *p, size_t sz, void *ud)
{
    struct dump *d = ud;
    char *q = realloc(d->p, d->len + sz);

    (void)L;
    if (q == NULL) {
        d->failed = 1;
        return 1;
    }
    memcpy(q + d->len, p, sz);
    d->p = q;
    d->len += sz;
    return 0;
}

/* Put the guard maker in the registry: compiled, stripped of its line
 * information, loaded again, given guard_pass. */
static void open_guard(lua_State *L)
{
    struct dump d = {0};
    int status;

    if (luaL_loadbufferx(L, GUARD_MAKER, sizeof GUARD_MAKER - 1, "=xpcall", "t") != LUA_OK)
        lua_error(L);
    if (lua_dump(L, dump_piece, &d, 1) != 0 || d.failed) {
        free(d.p);
        luaL_error(L, "not enough memory");
    }
    lua_pop(L, 1);
    status = luaL_loadbufferx(L, d.p, d.len, "=xpcall", "b");
    free(d.p);
    if (status != LUA_OK)
        lua_error(L);
    lua_pushcfunction(L, guard_pass);
    lua_call(L, 1, 1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &guard_key);
}

static int sb_xpcall(lua_State *L)
{
    int status, n = lua_gettop(L);

    luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &guard_key);
    lua_pushvalue(L, 2);
    lua_call(L, 1, 1);
    lua_replace(L, 2);          /* f, guard, args... */
    lua_pushboolean(L, 1);
    lua_pushvalue(L, 1);
    lua_rotate(L, 3, 2);        /* f, guard, true, f, args... */
    status = lua_pcallk(L, n - 2, LUA_MULTRET, 2, 2, finish_pcall);
    return finish_pcall(L, status, 2);
}

/* ---- coroutine.resume, coroutine.wrap ---- */

/* Resume co with narg arguments from L.  Returns the number of results moved
 * to L, or -1 with an error value on top of L.  A fatal error is rethrown. */
static int resume(lua_State *L, lua_State *co, int narg)
{
    int status, nres;

    if (!lua_checkstack(co, narg)) {
        luaenv_check(L);            /* the growth may have been refused */
        lua_pushliteral(L, "too many arguments to resume");
        return -1;
    }
    if (lua_status(co) == LUA_OK && lua_gettop(co) == 0) {
        lua_pushliteral(L, "cannot resume dead coroutine");
        return -1;
    }
    luaenv_arm(L, co);
    lua_xmove(L, co, narg);
    status = lua_resume(co, L, narg);
    if (status == LUA_OK || status == LUA_YIELD) {
        nres = lua_gettop(co);
        if (!lua_checkstack(L, nres + 1)) {
            lua_pop(co, nres);
            luaenv_check(L);
            lua_pushliteral(L, "too many results to resume");
            return -1;
        }
        lua_xmove(co, L, nres);
        return nres;
    }
    lua_xmove(co, L, 1);
    /* (the mutant: resume/wrap swallow a fatal limit) */
    if (luaenv_catch(L, status) == LUAENV_CAUGHT_FATAL && !MUTANT(RESUME_RETHROW))
        luaenv_rethrow(L);
    return -1;
}

static int sb_resume(lua_State *L)
{
    lua_State *co = lua_tothread(L, 1);
    int r;

    luaL_argcheck(L, co != NULL, 1, "thread expected");
    r = resume(L, co, lua_gettop(L) - 1);
    if (r < 0) {
        lua_pushboolean(L, 0);
        lua_insert(L, -2);
        return 2;
    }
    lua_pushboolean(L, 1);
    lua_insert(L, -(r + 1));
    return r + 1;
}

static int wrap_call(lua_State *L)
{
    lua_State *co = lua_tothread(L, lua_upvalueindex(1));
    int r = resume(L, co, lua_gettop(L));

    if (r < 0) {
        if (lua_type(L, -1) == LUA_TSTRING) {   /* add where the call was */
            luaL_where(L, 1);
            lua_insert(L, -2);
            lua_concat(L, 2);
        }
        return lua_error(L);
    }
    return r;
}

/* coroutine.create as stock Lua's, with the new thread armed
 * (luaenv_arm_new: its first period of the count hook, paid now). */
static int sb_create(lua_State *L)
{
    lua_State *co;

    luaL_checktype(L, 1, LUA_TFUNCTION);
    co = lua_newthread(L);
    lua_pushvalue(L, 1);
    lua_xmove(L, co, 1);
    luaenv_arm_new(L, co);
    return 1;
}

static int sb_wrap(lua_State *L)
{
    sb_create(L);
    lua_pushcclosure(L, wrap_call, 1);
    return 1;
}

/* ---- load ---- */

struct reader {
    size_t total, cap;
};

/* Calls the function at index 1 for the next piece; pieces count against
 * the string cap in total.  Runs in load's own frame (inside lua_load), as
 * stock's reader does: its errors have stock's positions and levels. */
static const char *read_piece(lua_State *L, void *ud, size_t *size)
{
    struct reader *rd = ud;
    const char *s;

    luaL_checkstack(L, 2, "too many nested functions");
    lua_pushvalue(L, 1);
    lua_call(L, 0, 1);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        *size = 0;
        return NULL;
    }
    if (!lua_isstring(L, -1))
        luaL_error(L, "reader function must return a string");
    s = lua_tolstring(L, -1, size);
    if (*size > rd->cap - rd->total)
        too_large(L);
    luaenv_charge(L, charge_source(*size));     /* the lexer reads every byte */
    rd->total += *size;
    lua_replace(L, RESERVED_SLOT);
    return s;
}

/*
 * load as stock's, but for text only and with its charges.  lua_load runs
 * the parser and the reader protected, under the message handler of the
 * calling code, as in stock Lua (an xpcall's handler sees a reader's
 * error); while it runs, luaenv_loading() is true, so the chunk's
 * top-level handler (worker.c) knows such an error is load's, not the end
 * of the chunk.
 */
static int sb_load(lua_State *L)
{
    struct reader rd = {0};
    size_t len;
    const char *s = lua_tolstring(L, 1, &len), *name;
    const char *want = luaL_optstring(L, 3, "bt"), *mode = want;
    int env = lua_isnone(L, 4) ? 0 : 4;
    int status;

    /* Text only, whatever the mode: "t" where it allows text, else ""
     * (nothing), which refuses text with the caller's mode in the
     * message, as stock does, and binary as always. */
    if (!MUTANT(BYTECODE))
        mode = strchr(want, 't') ? "t" : "";    /* (the mutant: binary chunks accepted) */
    if (s != NULL) {
        name = luaL_optstring(L, 2, s);
        if (mode[0] == '\0' && (len == 0 || s[0] != LUA_SIGNATURE[0])) {
            lua_pushnil(L);             /* stock refuses before it reads on */
            lua_pushfstring(L, "attempt to load a text chunk (mode is '%s')", want);
            return 2;
        }
        luaenv_charge_ahead(L, charge_source(len));     /* the lexer reads every byte */
        luaenv_loading(L, 1);
        status = luaL_loadbufferx(L, s, len, name, mode);
    } else {
        name = luaL_optstring(L, 2, "=(load)");
        luaL_checktype(L, 1, LUA_TFUNCTION);
        rd.cap = luaenv_string_cap(luaenv_from(L));
        lua_settop(L, RESERVED_SLOT);
        luaenv_loading(L, 1);
        status = lua_load(L, read_piece, &rd, name, mode);
    }
    luaenv_loading(L, -1);
    if (status == LUA_OK) {
        if (env != 0) {
            lua_pushvalue(L, env);
            if (!lua_setupvalue(L, -2, 1))
                lua_pop(L, 1);
        }
        return 1;
    }
    luaenv_charge_unwind(L);
    /* (the mutant: a load reader swallows a fatal limit) */
    if (luaenv_catch(L, status) == LUAENV_CAUGHT_FATAL && !MUTANT(LOAD_RETHROW))
        return luaenv_rethrow(L);
    if (status == LUA_ERRSYNTAX && mode[0] == '\0' && lua_type(L, -1) == LUA_TSTRING) {
        /* a reader's chunk refused for its kind: name the caller's mode
         * for text, as stock does, and "t" for binary, as for every load */
        const char *msg = lua_tostring(L, -1);
        int text = strcmp(msg, "attempt to load a text chunk (mode is '')") == 0;

        if (text || strcmp(msg, "attempt to load a binary chunk (mode is '')") == 0) {
            lua_pop(L, 1);
            lua_pushfstring(L, "attempt to load a %s chunk (mode is '%s')",
                            text ? "text" : "binary", text ? want : "t");
        }
    }
    lua_pushnil(L);
    lua_insert(L, -2);
    return 2;
}

/* ---- setmetatable, collectgarbage, print ---- */

static int sb_setmetatable(lua_State *L)
{
    int t = lua_type(L, 2);

    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_argcheck(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table expected");
    /* Only a __gc present now marks the object for finalization (5.3), and
     * finalizers run with hooks off: refuse it. */
    if (!MUTANT(GC_REFUSAL) && t == LUA_TTABLE) {
        lua_pushliteral(L, "__gc");
        if (lua_rawget(L, 2) != LUA_TNIL)
            return luaL_error(L, "__gc metamethods are not allowed");
    }
    lua_settop(L, 2);
    if (luaL_getmetafield(L, 1, "__metatable") != LUA_TNIL)
        return luaL_error(L, "cannot change a protected metatable");
    lua_setmetatable(L, 1);
    return 1;
}

static int sb_collectgarbage(lua_State *L)
{
    static const char *const opts[] = {"stop", "restart", "collect", "count", "step",
                                       "setpause", "setstepmul", "isrunning", NULL};
    int o = luaL_checkoption(L, 1, "collect", opts);

    luaL_optinteger(L, 2, 0);           /* checked as stock does, then unused */

    if (strcmp(opts[o], "count") == 0) {
        int kb = lua_gc(L, LUA_GCCOUNT, 0), b = lua_gc(L, LUA_GCCOUNTB, 0);
        lua_pushnumber(L, (lua_Number)kb + (lua_Number)b / 1024);
        return 1;
    }
    lua_pushinteger(L, 0);
    return 1;
}

static int sb_print(lua_State *L)
{
    struct luaenv *e = luaenv_from(L);
    int i, n = lua_gettop(L);
    const char *s;
    size_t len;

    /* Each argument is written as soon as the global tostring has made its
     * text, as stock print writes to stdout: a later argument whose
     * conversion fails leaves the earlier ones written, and a conversion
     * that prints writes after them.  The bytes go to the output buffer,
     * sent when the line is complete (luaenv_output_flush); nothing is
     * copied into the Lua heap, and the buffer never holds more than
     * max_output_bytes, so print needs no charge (charge.h). */
    lua_getglobal(L, "tostring");
    for (i = 1; i <= n; i++) {
        lua_pushvalue(L, n + 1);
        lua_pushvalue(L, i);
        lua_call(L, 1, 1);
        s = lua_tolstring(L, -1, &len);
        if (s == NULL)
            return luaL_error(L, "'tostring' must return a string to 'print'");
        if (i > 1)
            luaenv_output(e, "\t", 1);
        luaenv_output(e, s, len);
        lua_pop(L, 1);
    }
    luaenv_output(e, "\n", 1);
    luaenv_output_flush(e);
    return 0;
}

/* ---- string.rep: a size pre-check, exact at the cap ---- */

/*
 * The string cap is exact: a result of up to the cap is built, a longer one
 * raises the catchable "resulting string too large".  The stock functions
 * build in a luaL_Buffer and then copy it into the string, which needs
 * twice the result: at the cap (half of max_heap) that alone is the whole
 * heap.  So large results are built with lua_concat, which writes the new
 * string directly: string.rep by doubling (the peak is the result and the
 * half before it).  (table.concat does the same in charge.c, with the cap
 * and the collection luaenv.c gives its struct charge.)
 */
#define REP_DIRECT     ((size_t)64 << 10)  /* smaller results: the stock string.rep */

/* s (index 1) repeated n > 0 times with sep (index 3, a string) between:
 * r = s, then for each bit of n below its highest, r = r..sep..r, with
 * ..sep..s appended for a 1 bit.  Each step is one new string. */
static int rep_by_doubling(lua_State *L, size_t n, size_t len1, size_t lsep)
{
    int bit = 0;
    size_t count = 1;

    while (bit + 1 < (int)(sizeof n * 8) && (n >> (bit + 1)) != 0)
        bit++;
    lua_pushvalue(L, 1);
    while (bit-- > 0) {
        size_t next = 2 * count + ((n >> bit) & 1);
        make_room(L, len1 * next + lsep * (next - 1));
        lua_pushvalue(L, 3);
        lua_pushvalue(L, -2);
        if ((n >> bit) & 1) {
            lua_pushvalue(L, 3);
            lua_pushvalue(L, 1);
            lua_concat(L, 5);
        } else {
            lua_concat(L, 3);
        }
        count = next;
    }
    return 1;
}

/* s (index 1) repeated n > 0 times with sep (index 3) between, total
 * bytes, in a buffer: one unit (s and sep), then the filled part copied
 * onto its end until n units are there (the last sep is left out).  The
 * stock string.rep copies each repetition separately, which takes as long
 * as an instruction per repetition of a one-byte string; this is memcpy's
 * speed, so its charge (the bytes of its result) is what it costs. */
static int rep_small(lua_State *L, size_t n, size_t l, size_t lsep, size_t total)
{
    luaL_Buffer b;
    const char *s = lua_tostring(L, 1), *sep = lsep ? lua_tostring(L, 3) : "";
    size_t unit = l + lsep, all = total + lsep, done = unit;
    char *p = luaL_buffinitsize(L, &b, all);

    memcpy(p, s, l);
    memcpy(p + l, sep, lsep);
    while (done < all) {
        size_t k = done < all - done ? done : all - done;
        memcpy(p + done, p, k);
        done += k;
    }
    luaL_pushresultsize(&b, total);
    return 1;
}

static int sb_rep(lua_State *L)
{
    size_t l, lsep, n, total, cap = luaenv_string_cap(luaenv_from(L));
    lua_Integer count;
    int host;

    if (MUTANT(REP_CONCAT))
        return call_original(L);        /* mutant: no size pre-check, no "" shortcut */
    luaL_checklstring(L, 1, &l);
    count = luaL_checkinteger(L, 2);
    luaL_optlstring(L, 3, "", &lsep);
    if (count <= 0 || l + lsep == 0) {   /* also: no busy loop over "" */
        lua_pushliteral(L, "");
        return 1;
    }
    if ((uint64_t)count > SIZE_MAX)
        return too_large(L);
    n = (size_t)count;
    /* total = l*n + lsep*(n-1), each step checked against the cap */
    if (l > 0 && n > cap / l)
        return too_large(L);
    total = l * n;
    if (lsep > 0 && n - 1 > (cap - total) / lsep)
        return too_large(L);
    total += lsep * (n - 1);
    if (MUTANT(CAP_BUILD)) {            /* mutant: the stock buffer at any size */
        make_room(L, total * 2);
        return call_original(L);
    }
    if (total < REP_DIRECT) {
        make_room(L, total * 2);    /* the buffer, then the string */
        return rep_small(L, n, l, lsep, total);
    }
    lua_settop(L, 3);
    if (lsep == 0) {
        lua_pushliteral(L, "");
        lua_replace(L, 3);
    }
    /* charged as the one string it makes (charge.h), before making it; the
     * halves on the way are this function's own business */
    luaenv_charge_ahead(L, charge_string(total));
    host = luaenv_host_begin(L);
    rep_by_doubling(L, n, l, lsep);
    luaenv_host_end(L, host);
    return 1;
}

/* ---- installation ---- */

/* A copy of the C function at idx, with its upvalues: the same behaviour,
 * another identity.  luaL names a function called from C by searching the
 * loaded tables in hash order, which the state's seed decides: an alias
 * that were the same value as the original would be named either way. */
static void push_copy(lua_State *L, int idx)
{
    int n = 0;

    luaL_checkstack(L, 8, NULL);
    while (lua_getupvalue(L, idx, n + 1) != NULL)
        n++;
    lua_pushcclosure(L, lua_tocfunction(L, idx), n);
}

/* Replace tab[name] by a closure of f over the original value. */
static void wrap_field(lua_State *L, int tab, const char *name, lua_CFunction f)
{
    lua_getfield(L, tab, name);
    lua_pushcclosure(L, f, 1);
    lua_setfield(L, tab, name);
}

int luaenv_openlib(lua_State *L)
{
    static const luaL_Reg base[] = {
        {"load", sb_load},
        {"pcall", sb_pcall},
        {"xpcall", sb_xpcall},
        {"setmetatable", sb_setmetatable},
        {"collectgarbage", sb_collectgarbage},
        {"print", sb_print},
        {NULL, NULL},
    };
    int g = lua_gettop(L);

    open_guard(L);

    if (MUTANT(COLLECTGARBAGE)) {
        lua_getfield(L, g, "collectgarbage");   /* mutant: the stock function, every option */
        lua_pushvalue(L, g);
        luaL_setfuncs(L, base, 0);
        lua_pushvalue(L, -2);
        lua_setfield(L, -2, "collectgarbage");
        lua_pop(L, 2);
    } else {
        luaL_setfuncs(L, base, 0);
    }

    lua_getfield(L, g, LUA_COLIBNAME);
    lua_pushcfunction(L, sb_create);
    lua_setfield(L, -2, "create");
    lua_pushcfunction(L, sb_resume);
    lua_setfield(L, -2, "resume");
    lua_pushcfunction(L, sb_wrap);
    lua_setfield(L, -2, "wrap");
    lua_pop(L, 1);

    lua_getfield(L, g, LUA_STRLIBNAME);
    wrap_field(L, lua_gettop(L), "rep", sb_rep);
    lua_pop(L, 1);

    lua_getfield(L, g, LUA_TABLIBNAME);
    lua_getfield(L, -1, "unpack");
    push_copy(L, lua_gettop(L));
    lua_setfield(L, g, "unpack");
    lua_pop(L, 2);
    return 0;
}
