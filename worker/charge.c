/*
 * charge.c - the charges of library work (contract and rates: charge.h).
 * Depends on the Lua API only, never on the worker's state.
 *
 * A wrapper is a C closure: upvalue 1 the struct charge, upvalue 2 the
 * stock function it charges for.  It measures the work from the arguments,
 * pays, and calls the stock C function directly (not through lua_call), so
 * the stock function runs in the wrapper's own call frame: its argument
 * errors name the function as the caller wrote it and its luaL_error
 * positions are the caller's, exactly as without the wrapper.  The stock
 * library functions take no upvalues, so the wrapper's are no concern of
 * theirs.
 */
#include "worker/charge.h"

#include <lauxlib.h>
#include <lua.h>
#include <limits.h>
#include <lualib.h>
#include <stdlib.h>
#include <string.h>

#define PROBE_LEN 100

/* ---- the string header ---- */

struct probe {
    size_t block;           /* the last new string's block */
};

static void *probe_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    struct probe *pr = ud;

    if (nsize == 0) {
        free(ptr);
        return NULL;
    }
    if (ptr == NULL && osize == LUA_TSTRING)
        pr->block = nsize;
    return realloc(ptr, nsize);
}

size_t charge_string_header(void)
{
    static const char text[PROBE_LEN];
    struct probe pr = {0};
    lua_State *L = lua_newstate(probe_alloc, &pr);

    if (L == NULL)
        return 0;
    lua_pushlstring(L, text, PROBE_LEN);    /* a long string: never interned */
    lua_close(L);
    return pr.block > PROBE_LEN + 1 ? pr.block - PROBE_LEN - 1 : 0;
}

/* ---- helpers ---- */

/* A call's charge: less its free part (charge.h), which the call's own
 * instruction pays for; small calls then cost nothing more than that. */
static void pay(lua_State *L, uint64_t n)
{
    n = charge_call(n);
    if (n != 0)
        charge_pay(L, lua_touserdata(L, lua_upvalueindex(1)), n);
}

/* A charge with no free part: one of several a call makes. */
static void pay_exact(lua_State *L, uint64_t n)
{
    charge_pay(L, lua_touserdata(L, lua_upvalueindex(1)), n);
}

static int stock(lua_State *L)
{
    return lua_tocfunction(L, lua_upvalueindex(2))(L);
}

/* A count of values as a charge (negative counts are empty ranges). */
static uint64_t count(lua_Integer from, lua_Integer to)
{
    return to >= from ? (uint64_t)to - (uint64_t)from + 1 : 0;
}

/* The same for values pushed on the stack: a count the stack cannot take
 * is refused by the stock function with an error, at once; nothing to pay. */
static uint64_t pushed(lua_Integer from, lua_Integer to)
{
    uint64_t n = count(from, to);

    return n <= LUAI_MAXSTACK ? n : 0;
}

static lua_Integer posrelat(lua_Integer pos, size_t len)
{
    if (pos >= 0)
        return pos;
    if (0u - (size_t)pos > len)
        return 0;
    return (lua_Integer)len + pos + 1;
}

/* The bytes of the string at idx (0 for anything else). */
static size_t strlen_at(lua_State *L, int idx)
{
    size_t len = 0;

    if (lua_type(L, idx) == LUA_TSTRING)
        lua_tolstring(L, idx, &len);
    return len;
}

/* The length of the table at idx as the table functions see it (luaL_len:
 * a __len metamethod runs), or -1 when idx is not a table (the stock
 * function then raises or takes its own path). */
static lua_Integer table_len(lua_State *L, int idx)
{
    if (lua_type(L, idx) != LUA_TTABLE)
        return -1;
    return luaL_len(L, idx);
}

/* ---- string ---- */

static int w_byte(lua_State *L)
{
    size_t l;
    lua_Integer posi, pose;

    if (lua_gettop(L) <= 2)
        return stock(L);            /* one value at most: free (the common s:byte(i)) */
    luaL_checklstring(L, 1, &l);
    posi = posrelat(luaL_optinteger(L, 2, 1), l);
    pose = posrelat(luaL_optinteger(L, 3, posi), l);
    if (posi < 1)
        posi = 1;
    if (pose > (lua_Integer)l)
        pose = (lua_Integer)l;
    pay(L, pushed(posi, pose));
    return stock(L);
}

static int w_nargs(lua_State *L)       /* string.char, table.pack, utf8.char */
{
    pay(L, (uint64_t)lua_gettop(L));
    return stock(L);
}

static int w_each_arg1(lua_State *L)   /* lower, upper, reverse, packsize */
{
    pay(L, strlen_at(L, 1) / CHARGE_EACH_BYTES);
    return stock(L);
}

static int w_date(lua_State *L)
{
    size_t len = strlen_at(L, 1), conversions = 0;
    const char *f = len ? lua_tostring(L, 1) : NULL;

    for (size_t i = 0; i < len; i++)
        conversions += f[i] == '%';
    pay(L, len / CHARGE_EACH_BYTES + (uint64_t)conversions * CHARGE_DATE_CONVERSION);
    return stock(L);
}

/* The conversion of the directive at fmt[i] (after the '%'), or 0 at the
 * end of the format; *next is the index after it. */
static char directive(const char *fmt, size_t len, size_t i, size_t *next)
{
    while (i < len && strchr("-+ #0", fmt[i]) != NULL)
        i++;
    while (i < len && ((fmt[i] >= '0' && fmt[i] <= '9') || fmt[i] == '.'))
        i++;
    *next = i + 1;
    return i < len ? fmt[i] : 0;
}

static int w_format(lua_State *L)
{
    size_t len, i = 0;
    const char *fmt = luaL_checklstring(L, 1, &len);
    int arg = 1, top = lua_gettop(L);
    uint64_t each = len, bytes = 0;

    while (i < len) {
        char conv;
        if (fmt[i++] != '%')
            continue;
        if (i < len && fmt[i] == '%') {
            i++;
            continue;
        }
        conv = directive(fmt, len, i, &i);
        if (++arg > top)
            break;
        if (conv == 's' && luaL_getmetafield(L, arg, "__tostring") != LUA_TNIL) {
            /* The text a __tostring gives is copied like a string argument:
             * made here, in the order format would make it, so that it is
             * paid for even when a later directive fails. */
            lua_pop(L, 1);
            luaL_tolstring(L, arg, NULL);
            lua_replace(L, arg);
        }
        if (conv == 'q')
            each += strlen_at(L, arg);
        else
            bytes += strlen_at(L, arg);
    }
    pay(L, each / CHARGE_EACH_BYTES + bytes / CHARGE_BYTES);
    return stock(L);
}

static int w_pack(lua_State *L)
{
    int i, top = lua_gettop(L);
    uint64_t bytes = 0;

    for (i = 2; i <= top; i++)
        bytes += strlen_at(L, i);
    pay(L, strlen_at(L, 1) / CHARGE_EACH_BYTES + (uint64_t)(top > 1 ? top - 1 : 0) +
           bytes / CHARGE_BYTES);
    return stock(L);
}

static int w_unpack(lua_State *L)
{
    size_t lf, ld;
    const char *fmt = luaL_checklstring(L, 1, &lf);
    lua_Integer pos;
    int n;

    luaL_checklstring(L, 2, &ld);
    pos = posrelat(luaL_optinteger(L, 3, 1), ld);
    if (memchr(fmt, 'z', lf) != NULL && pos >= 1 && (size_t)pos <= ld)
        pay_exact(L, (ld - (size_t)pos + 1) / CHARGE_BYTES);   /* strlen may run to the end */
    n = stock(L);
    pay(L, lf / CHARGE_EACH_BYTES + (uint64_t)n);
    return n;
}

/* ---- table ---- */

/* Only positions the stock function accepts are paid for: it refuses the
 * others with its own error before any work. */
static int w_insert(lua_State *L)
{
    lua_Integer e = table_len(L, 1), pos;

    if (e >= 0 && lua_gettop(L) == 3 && lua_isinteger(L, 2)) {
        pos = lua_tointeger(L, 2);
        if (pos >= 1 && pos <= e + 1)
            pay(L, count(pos, e) * CHARGE_TABLE_VALUE);     /* moved up one */
    }
    return stock(L);
}

static int w_remove(lua_State *L)
{
    lua_Integer size = table_len(L, 1), pos;

    if (size >= 0) {
        pos = luaL_optinteger(L, 2, size);
        if (pos >= 1 && pos <= size + 1)
            pay(L, count(pos, size) * CHARGE_TABLE_VALUE);
    }
    return stock(L);
}

static int w_move(lua_State *L)
{
    lua_Integer f = luaL_checkinteger(L, 2), e = luaL_checkinteger(L, 3);

    if (f > 0)
        pay(L, count(f, e) > UINT64_MAX / CHARGE_TABLE_VALUE ? UINT64_MAX
                                                             : count(f, e) * CHARGE_TABLE_VALUE);
    return stock(L);
}

static int w_tunpack(lua_State *L)
{
    lua_Integer i = luaL_optinteger(L, 2, 1);
    lua_Integer e = luaL_opt(L, luaL_checkinteger, 3, luaL_len(L, 1));

    pay(L, pushed(i, e));
    return stock(L);
}

static int w_sort(lua_State *L)
{
    lua_Integer n = table_len(L, 1);

    if (n > 1 && n < INT_MAX) {
        uint64_t levels = 0;
        while (levels < 63 && ((lua_Integer)1 << levels) < n)
            levels++;
        pay(L, (uint64_t)n * levels * CHARGE_SORT_LEVEL);
    }
    return stock(L);
}

/* table.concat.  A plain table is measured raw before the stock function
 * runs; one with a metatable (its items may come from __index) is built
 * here, each item paid as it is added, so that an error at the last item
 * has paid for the copying before it. */
static int w_concat(lua_State *L)
{
    size_t lsep, len;
    const char *sep;
    lua_Integer i, last;
    uint64_t bytes = 0;
    luaL_Buffer b;

    if (lua_type(L, 1) != LUA_TTABLE)
        return stock(L);
    if (!lua_getmetatable(L, 1)) {
        last = (lua_Integer)lua_rawlen(L, 1);
        luaL_optlstring(L, 2, "", &lsep);
        i = luaL_optinteger(L, 3, 1);
        last = luaL_optinteger(L, 4, last);
        uint64_t items = 0;
        for (lua_Integer k = i; k <= last; k++) {
            int t = lua_rawgeti(L, 1, k);
            if (t == LUA_TSTRING)
                lua_tolstring(L, -1, &len);
            else
                len = 0;
            lua_pop(L, 1);
            items++;
            bytes += len + lsep;
            if (t != LUA_TSTRING && t != LUA_TNUMBER)
                break;              /* the stock function stops here too */
            if (k == LUA_MAXINTEGER)
                break;
        }
        pay(L, items * CHARGE_TABLE_VALUE + bytes / CHARGE_BYTES);
        return stock(L);
    }
    lua_pop(L, 1);
    last = luaL_len(L, 1);
    sep = luaL_optlstring(L, 2, "", &lsep);
    i = luaL_optinteger(L, 3, 1);
    last = luaL_optinteger(L, 4, last);
    luaL_buffinit(L, &b);
    for (; i <= last; i++) {
        lua_geti(L, 1, i);
        if (!lua_isstring(L, -1))
            return luaL_error(L, "invalid value (%s) at index %I in table for 'concat'",
                              luaL_typename(L, -1), (LUAI_UACINT)i);
        lua_tolstring(L, -1, &len);
        pay_exact(L, CHARGE_TABLE_VALUE + (len + lsep) / CHARGE_BYTES);
        luaL_addvalue(&b);
        if (i != last)
            luaL_addlstring(&b, sep, lsep);
        else
            break;
    }
    luaL_pushresult(&b);
    return 1;
}

/* ---- utf8 ---- */

static int w_codepoint(lua_State *L)
{
    size_t len;
    lua_Integer posi, pose;

    luaL_checklstring(L, 1, &len);
    posi = posrelat(luaL_optinteger(L, 2, 1), len);
    pose = posrelat(luaL_optinteger(L, 3, posi), len);
    if (posi >= 1 && pose <= (lua_Integer)len)
        pay(L, pushed(posi, pose));
    return stock(L);
}

static int w_len(lua_State *L)
{
    size_t len;
    lua_Integer posi, posj;

    luaL_checklstring(L, 1, &len);
    posi = posrelat(luaL_optinteger(L, 2, 1), len);
    posj = posrelat(luaL_optinteger(L, 3, -1), len);
    pay(L, count(posi, posj) / CHARGE_EACH_BYTES);
    return stock(L);
}

static int w_offset(lua_State *L)
{
    size_t len;
    lua_Integer n, i, end;
    int r;

    luaL_checklstring(L, 1, &len);
    n = luaL_checkinteger(L, 2);
    i = luaL_optinteger(L, 3, n >= 0 ? 1 : (lua_Integer)len + 1);
    i = posrelat(i, len);
    r = stock(L);
    if (lua_isinteger(L, -1))
        end = lua_tointeger(L, -1);
    else
        end = n >= 0 ? (lua_Integer)len + 1 : 1;
    pay(L, (end >= i ? count(i, end) : count(end, i)) / CHARGE_EACH_BYTES);
    return r;
}

/* utf8.codes' iterator: upvalue 1 the charge, 2 the stock iterator. */
static int codes_step(lua_State *L)
{
    lua_Integer from = lua_tointeger(L, 2);
    int r = stock(L);

    if (r == 2)
        pay(L, count(from, lua_tointeger(L, -2)) / CHARGE_EACH_BYTES);
    return r;
}

static int w_codes(lua_State *L)
{
    int r = stock(L);               /* iterator, s, 0 */

    lua_pushvalue(L, lua_upvalueindex(1));
    lua_pushvalue(L, -r - 1);
    lua_pushcclosure(L, codes_step, 2);
    lua_replace(L, -r - 1);
    return r;
}

/* ---- base ---- */

static int w_tonumber(lua_State *L)
{
    pay(L, strlen_at(L, 1) / CHARGE_EACH_BYTES);
    return stock(L);
}

static int w_rawequal(lua_State *L)
{
    size_t a = strlen_at(L, 1), b = strlen_at(L, 2);

    if (a == b)
        pay(L, a / CHARGE_BYTES);
    return stock(L);
}

/* load with a reader: upvalue 1 the charge, 2 the reader. */
static int load_piece(lua_State *L)
{
    lua_settop(L, 0);
    lua_pushvalue(L, lua_upvalueindex(2));
    lua_call(L, 0, 1);
    pay_exact(L, charge_source(strlen_at(L, 1)));
    return 1;
}

static int w_load(lua_State *L)
{
    if (lua_type(L, 1) == LUA_TFUNCTION) {
        lua_pushvalue(L, lua_upvalueindex(1));
        lua_pushvalue(L, 1);
        lua_pushcclosure(L, load_piece, 2);
        lua_replace(L, 1);
    } else {
        pay_exact(L, charge_source(strlen_at(L, 1)));
    }
    return stock(L);
}

/* ---- installation ---- */

struct wrap {
    const char   *name;
    lua_CFunction f;
};

/* Replace each named C function of the table at idx by f as a closure over
 * the charge and the stock function. */
static void wrap_fields(lua_State *L, int idx, struct charge *c, const struct wrap *w)
{
    for (; w->name != NULL; w++) {
        lua_getfield(L, idx, w->name);
        if (!lua_iscfunction(L, -1)) {
            lua_pop(L, 1);
            continue;
        }
        lua_pushlightuserdata(L, c);
        lua_insert(L, -2);
        lua_pushcclosure(L, w->f, 2);
        lua_setfield(L, idx, w->name);
    }
}

/* Replace the named functions of the table at idx by f with the charge as
 * upvalue 1 (own implementations). */
static void own_fields(lua_State *L, int idx, struct charge *c, const struct wrap *w)
{
    for (; w->name != NULL; w++) {
        lua_pushlightuserdata(L, c);
        lua_pushcclosure(L, w->f, 1);
        lua_setfield(L, idx, w->name);
    }
}

static void in_table(lua_State *L, int g, const char *name, struct charge *c,
                     const struct wrap *wrapped, const struct wrap *own)
{
    if (lua_getfield(L, g, name) == LUA_TTABLE) {
        int t = lua_gettop(L);
        if (wrapped != NULL)
            wrap_fields(L, t, c, wrapped);
        if (own != NULL)
            own_fields(L, t, c, own);
    }
    lua_pop(L, 1);
}

void charge_open(lua_State *L, struct charge *c)
{
    static const struct wrap string_w[] = {
        {"byte", w_byte}, {"char", w_nargs}, {"format", w_format}, {"lower", w_each_arg1},
        {"upper", w_each_arg1}, {"reverse", w_each_arg1}, {"pack", w_pack},
        {"packsize", w_each_arg1}, {"unpack", w_unpack}, {NULL, NULL},
    };
    static const struct wrap string_own[] = {
        {"find", charge_str_find}, {"match", charge_str_match},
        {"gmatch", charge_str_gmatch}, {"gsub", charge_str_gsub}, {NULL, NULL},
    };
    static const struct wrap table_w[] = {
        {"concat", w_concat}, {"insert", w_insert}, {"remove", w_remove}, {"move", w_move},
        {"unpack", w_tunpack}, {"pack", w_nargs}, {"sort", w_sort}, {NULL, NULL},
    };
    static const struct wrap utf8_w[] = {
        {"char", w_nargs}, {"codepoint", w_codepoint}, {"len", w_len}, {"offset", w_offset},
        {"codes", w_codes}, {NULL, NULL},
    };
    static const struct wrap os_w[] = {{"date", w_date}, {NULL, NULL}};
    static const struct wrap base_w[] = {
        {"tonumber", w_tonumber}, {"rawequal", w_rawequal}, {"load", w_load}, {NULL, NULL},
    };
    int g;

    lua_pushglobaltable(L);
    g = lua_gettop(L);
    in_table(L, g, LUA_STRLIBNAME, c, string_w, string_own);
    in_table(L, g, LUA_TABLIBNAME, c, table_w, NULL);
    in_table(L, g, LUA_UTF8LIBNAME, c, utf8_w, NULL);
    in_table(L, g, LUA_OSLIBNAME, c, os_w, NULL);
    wrap_fields(L, g, c, base_w);
    if (lua_getfield(L, g, "unpack") == LUA_TFUNCTION) {   /* the 5.1 alias, if any */
        lua_pop(L, 1);
        lua_getfield(L, g, LUA_TABLIBNAME);
        lua_getfield(L, -1, "unpack");
        lua_setfield(L, g, "unpack");
    }
    lua_settop(L, g - 1);
}
