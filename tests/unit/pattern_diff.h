/* pattern_diff.h - the differential test of worker/pattern.c against the
 * stock string library (liblua5.3), shared by tests/unit/test_pattern_diff.c
 * (a fixed-seed pass) and tests/fuzz/fuzz_pattern.c (libFuzzer).
 *
 * One state holds stock's string.find, match, gmatch and gsub and ours
 * twice: counting on (every charge added up, a budget that never ends, with
 * a room that says so) and counting off (no room, payments dropped).  A case
 * is a call generated from a byte source: a subject and a pattern over small
 * alphabets (so that matches happen), every class and its complement, sets
 * with ranges, '^', classes and ']', %b, %f, back-references, anchors,
 * quantifiers, captures, malformed elements, init anywhere (negative, huge,
 * a float, a string), plain, every kind of gsub replacement (strings with
 * %0-%9 and %%, tables, functions returning nil, false, strings, numbers,
 * tables, booleans, numbers, invalid types) and gsub's n.  Each call runs in
 * Lua, from a local named f, so argument errors name the same function; its
 * results (types and values) or its error message are compared as text.
 * Ours runs first, counting on: a case that takes more than PD_CASE_STEPS
 * steps is left out (counted apart), so no case runs for hours.
 */
#ifndef PATTERN_DIFF_H
#define PATTERN_DIFF_H

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "worker/charge.h"

/* Where a case's choices come from: a PRNG, or the fuzzer's bytes. */
struct pd_src {
    const uint8_t *data;        /* NULL: the PRNG */
    size_t         len, pos;
    uint64_t       rng;
};

static unsigned pd_pick(struct pd_src *r, unsigned n)
{
    if (n <= 1)
        return 0;
    if (r->data != NULL)
        return r->pos < r->len ? r->data[r->pos++] % n : 0;
    r->rng ^= r->rng >> 12;
    r->rng ^= r->rng << 25;
    r->rng ^= r->rng >> 27;
    return (unsigned)((r->rng * 0x2545F4914F6CDD1DULL) >> 33) % n;
}

struct pd {
    lua_State     *L;
    struct charge  on, off;
    uint64_t       paid;        /* counting on: all its charges */
    uint64_t       case_start;  /* paid when the case began */
    int            run;         /* registry refs: the runner, */
    int            values;      /* the replacement values */
    long           cases, failed, long_cases;  /* long: left out */
    char           desc[4096];  /* the case, readable */
    char           got[3][4096];  /* the answers (stock's first), as text */
};

/* A case's work, counting on, beyond which it is left out (stock, which
 * nothing bounds, is not run): a pattern whose backtracking is exponential
 * in a raw case would take hours in both. */
#define PD_CASE_STEPS 2000000

static void pd_pay_on(lua_State *L, void *ud, uint64_t n)
{
    struct pd *d = ud;

    d->paid += n;
    if (d->paid - d->case_start > PD_CASE_STEPS)
        luaL_error(L, "pd: case too long");
}

static void pd_pay_off(lua_State *L, void *ud, uint64_t n)
{
    (void)L;
    (void)ud;
    (void)n;
}

static uint64_t pd_room_on(lua_State *L, void *ud)
{
    struct pd *d = ud;

    (void)L;
    return PD_CASE_STEPS - (d->paid - d->case_start);
}

static const char pd_lua[] =
    "local pack, concat, mtype, fmt = table.pack, table.concat, math.type, string.format\n"
    "local function ser(r)\n"
    "  local out = {}\n"
    "  for i = 1, r.n do\n"
    "    local v = r[i]; local t = type(v)\n"
    "    if t == 'string' then out[i] = 's' .. #v .. ':' .. v\n"
    "    elseif t == 'number' then out[i] = mtype(v) .. ':' .. fmt('%.17g', v)\n"
    "    else out[i] = t .. ':' .. tostring(v) end\n"
    "  end\n"
    "  return r.n .. '|' .. concat(out, '|')\n"
    "end\n"
    "local function call(f, ...) local r = pack(f(...)) return ser(r) end\n"
    "local function gm(f, ...)\n"
    "  local it = f(...)\n"
    "  local all = {}\n"
    "  for i = 1, 40 do\n"
    "    local r = pack(it())\n"
    "    all[#all + 1] = ser(r)\n"
    "    if r[1] == nil then break end\n"
    "  end\n"
    "  return concat(all, ';')\n"
    "end\n"
    "local run = function(g, f, ...)\n"
    "  local ok, v = pcall(g and gm or call, f, ...)\n"
    "  return (ok and 'ok ' or 'error ') .. tostring(v)\n"
    "end\n"
    "local values = {\n"
    "  function() return nil end,\n"
    "  function() return false end,\n"
    "  function(a) return tostring(a) .. '<' end,\n"
    "  function(...) return select('#', ...) end,\n"
    "  function(a, b) return b end,\n"
    "  function() return {} end,\n"
    "  function() return 2.5 end,\n"
    "  function(...) return concat({...}, ',') end,\n"
    "  function() return true end,\n"
    "  function() return 7 end,\n"
    "  {a = 'A', b = false, ['()'] = 'P', [1] = 'one', [2] = 2, ab = {}, ['a a'] = 1.5, [''] = 'E'},\n"
    "  {},\n"
    "  setmetatable({}, {__index = function(t, k) return type(k) == 'string' and k:upper() or nil end}),\n"
    "  true, false, 12, 0.5, -3, math.maxinteger,\n"
    "}\n"
    "return run, values\n";

static void pd_register(lua_State *L, struct charge *c, const char *name)
{
    static const char *const fn[] = {"find", "match", "gmatch", "gsub"};
    lua_CFunction f[] = {charge_str_find, charge_str_match, charge_str_gmatch, charge_str_gsub};

    lua_newtable(L);
    for (int i = 0; i < 4; i++) {
        lua_pushlightuserdata(L, c);
        lua_pushcclosure(L, f[i], 1);
        lua_setfield(L, -2, fn[i]);
    }
    lua_setglobal(L, name);
}

/* 0 on success. */
static int pd_open(struct pd *d)
{
    memset(d, 0, sizeof *d);
    d->L = luaL_newstate();
    if (d->L == NULL)
        return -1;
    luaL_openlibs(d->L);
    d->on.pay = pd_pay_on;
    d->on.ud = d;
    d->on.room = pd_room_on;
    d->off.pay = pd_pay_off;
    d->off.ud = d;
    pd_register(d->L, &d->on, "mine_on");
    pd_register(d->L, &d->off, "mine_off");
    if (luaL_loadstring(d->L, pd_lua) != LUA_OK || lua_pcall(d->L, 0, 2, 0) != LUA_OK)
        return -1;
    d->values = luaL_ref(d->L, LUA_REGISTRYINDEX);
    d->run = luaL_ref(d->L, LUA_REGISTRYINDEX);
    return 0;
}

static void pd_close(struct pd *d)
{
    if (d->L != NULL)
        lua_close(d->L);
    d->L = NULL;
}

/* Text builders (bounded; a case is small). */
static void pd_add(char *buf, size_t cap, size_t *n, const char *s, size_t l)
{
    while (l-- > 0 && *n + 1 < cap)
        buf[(*n)++] = *s++;
    buf[*n] = '\0';
}

static void pd_addc(char *buf, size_t cap, size_t *n, char c)
{
    pd_add(buf, cap, n, &c, 1);
}

static void pd_desc_str(struct pd *d, size_t *n, const char *s, size_t l)
{
    pd_addc(d->desc, sizeof d->desc, n, '"');
    for (size_t i = 0; i < l; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];

        if (c < 32 || c >= 127 || c == '"' || c == '\\') {
            snprintf(esc, sizeof esc, "\\%u", c);
            pd_add(d->desc, sizeof d->desc, n, esc, strlen(esc));
        } else {
            pd_addc(d->desc, sizeof d->desc, n, (char)c);
        }
    }
    pd_add(d->desc, sizeof d->desc, n, "\", ", 3);
}

static void pd_desc(struct pd *d, size_t *n, const char *s)
{
    pd_add(d->desc, sizeof d->desc, n, s, strlen(s));
}

/* ---- generating a case ---- */

static const char pd_subject_chars[] = "aabab()1 .%A_-[]^$\0\n\xe9";

static size_t pd_subject(struct pd_src *r, char *out, size_t cap)
{
    size_t len = pd_pick(r, 8) == 0 ? 12 + pd_pick(r, 30) : pd_pick(r, 11), n = 0;
    unsigned narrow = pd_pick(r, 3);    /* 0: the whole alphabet; else "ab" or "ab()" */

    while (n < len && n + 1 < cap) {
        unsigned k = narrow == 1 ? pd_pick(r, 2) : narrow == 2 ? pd_pick(r, 6)
                   : pd_pick(r, sizeof pd_subject_chars - 1);

        out[n++] = pd_subject_chars[k];
    }
    return n;
}

static void pd_put(char *out, size_t cap, size_t *n, const char *s)
{
    while (*s != '\0' && *n + 1 < cap)
        out[(*n)++] = *s++;
}

static void pd_putc(char *out, size_t cap, size_t *n, char c)
{
    if (*n + 1 < cap)
        out[(*n)++] = c;
}

static const char pd_classes[] = "acdglpsuwxzACDGLPSUWXZ";
static const char pd_lits[] = "ab()1 .%A_-]^$x";

/* One element of a set (not the first ']' case). */
static void pd_set_element(struct pd_src *r, char *out, size_t cap, size_t *n)
{
    char tmp[4] = {0};

    switch (pd_pick(r, 7)) {
    case 0:
        tmp[0] = '%';
        tmp[1] = pd_classes[pd_pick(r, sizeof pd_classes - 1)];
        break;
    case 1:
        tmp[0] = '%';
        tmp[1] = "]%-^.a("[pd_pick(r, 7)];
        break;
    case 2:
        tmp[0] = "a(A0"[pd_pick(r, 4)];
        tmp[1] = '-';
        tmp[2] = "b)z9%"[pd_pick(r, 5)];
        break;
    case 3:
        tmp[0] = '-';
        break;
    default:
        tmp[0] = pd_lits[pd_pick(r, sizeof pd_lits - 1)];
        break;
    }
    pd_put(out, cap, n, tmp);
}

static void pd_set(struct pd_src *r, char *out, size_t cap, size_t *n, int close)
{
    unsigned k = 1 + pd_pick(r, 3);

    pd_putc(out, cap, n, '[');
    if (pd_pick(r, 3) == 0)
        pd_putc(out, cap, n, '^');
    if (pd_pick(r, 6) == 0)
        pd_putc(out, cap, n, ']');
    while (k-- > 0)
        pd_set_element(r, out, cap, n);
    if (close)
        pd_putc(out, cap, n, ']');
}

/* A pattern: 0 to 7 elements, some of them malformed now and then. */
static size_t pd_pattern(struct pd_src *r, char *out, size_t cap)
{
    size_t n = 0;
    unsigned items = pd_pick(r, 8);

    switch (pd_pick(r, 60)) {         /* the bounds: depth and captures */
    case 0:
        for (unsigned i = 0, k = 190 + pd_pick(r, 20); i < k; i++)
            pd_put(out, cap, &n, "a?");
        return n;
    case 1:
        for (unsigned i = 0, k = 28 + pd_pick(r, 8); i < k; i++)
            pd_put(out, cap, &n, pd_pick(r, 2) ? "(" : "()");
        pd_put(out, cap, &n, "a");
        return n;
    case 2:
        for (unsigned i = 0, k = 190 + pd_pick(r, 20); i < k; i++)
            pd_put(out, cap, &n, "a*");
        return n;
    case 3: case 4: case 5:           /* more items and sets than the C stack holds */
        for (unsigned i = 0, k = 9 + pd_pick(r, 24); i < k; i++) {
            if (pd_pick(r, 3) == 0)
                pd_put(out, cap, &n, "%f[%w]");
            else
                pd_set(r, out, cap, &n, 1);
            if (pd_pick(r, 4) == 0)
                pd_putc(out, cap, &n, "*?-"[pd_pick(r, 3)]);
        }
        return n;
    default:
        break;
    }
    if (pd_pick(r, 4) == 0)
        pd_putc(out, cap, &n, '^');
    while (items-- > 0) {
        int single = 0;

        switch (pd_pick(r, 20)) {
        case 0: case 1: case 2: case 3:
            pd_putc(out, cap, &n, "ab"[pd_pick(r, 2)]);
            single = 1;
            break;
        case 4:
            pd_putc(out, cap, &n, pd_lits[pd_pick(r, sizeof pd_lits - 1)]);
            single = 1;
            break;
        case 5:
            pd_putc(out, cap, &n, '.');
            single = 1;
            break;
        case 6: case 7:
            pd_putc(out, cap, &n, '%');
            pd_putc(out, cap, &n, pd_classes[pd_pick(r, sizeof pd_classes - 1)]);
            single = 1;
            break;
        case 8:
            pd_putc(out, cap, &n, '%');
            pd_putc(out, cap, &n, ".%()[]-$^q"[pd_pick(r, 10)]);
            single = 1;
            break;
        case 9: case 10:
            pd_set(r, out, cap, &n, pd_pick(r, 12) != 0);
            single = 1;
            break;
        case 11:
            pd_putc(out, cap, &n, '(');
            break;
        case 12:
            pd_putc(out, cap, &n, ')');
            break;
        case 13:
            pd_put(out, cap, &n, "()");
            break;
        case 14: {
            char b[5] = {'%', 'b', "(a["[pd_pick(r, 3)], ")b]"[pd_pick(r, 3)], 0};

            if (pd_pick(r, 10) == 0)
                b[2 + pd_pick(r, 2)] = 0;     /* missing arguments */
            pd_put(out, cap, &n, b);
            break;
        }
        case 15:
            pd_put(out, cap, &n, "%f");
            if (pd_pick(r, 8) == 0)
                pd_putc(out, cap, &n, "a%"[pd_pick(r, 2)]);
            else
                pd_set(r, out, cap, &n, pd_pick(r, 12) != 0);
            break;
        case 16: case 17:
            pd_putc(out, cap, &n, '%');
            pd_putc(out, cap, &n, (char)('0' + (pd_pick(r, 4) == 0 ? pd_pick(r, 10) : 1 + pd_pick(r, 2))));
            break;
        case 18:
            pd_putc(out, cap, &n, "$^"[pd_pick(r, 2)]);
            break;
        default:
            pd_putc(out, cap, &n, '%');             /* maybe the last byte */
            break;
        }
        if (single && pd_pick(r, 2) == 0)
            pd_putc(out, cap, &n, "*+-?"[pd_pick(r, 4)]);
    }
    if (pd_pick(r, 5) == 0)
        pd_putc(out, cap, &n, '$');
    return n;
}

/* Push an init (or n) argument; 0 when none is pushed. */
static int pd_push_int(struct pd *d, struct pd_src *r, size_t len, size_t *dn)
{
    lua_State *L = d->L;
    char b[64];

    switch (pd_pick(r, 20)) {
    case 0: return 0;
    case 1: lua_pushnil(L); break;
    case 2: lua_pushinteger(L, LUA_MAXINTEGER); break;
    case 3: lua_pushinteger(L, LUA_MININTEGER); break;
    case 4: lua_pushinteger(L, (lua_Integer)len + 1); break;
    case 5: lua_pushinteger(L, (lua_Integer)len + 2); break;
    case 6: lua_pushinteger(L, -(lua_Integer)len - 1); break;
    case 7: lua_pushnumber(L, 2.0); break;
    case 8: lua_pushnumber(L, 1.5); break;
    case 9: lua_pushstring(L, pd_pick(r, 2) ? "2" : "x"); break;
    case 10: lua_pushinteger(L, -100); break;
    case 11: lua_pushinteger(L, 100); break;
    default: lua_pushinteger(L, (lua_Integer)pd_pick(r, 13) - 6); break;
    }
    snprintf(b, sizeof b, "%s, ", luaL_tolstring(L, -1, NULL));
    lua_pop(L, 1);
    pd_desc(d, dn, b);
    return 1;
}

/* A replacement string: literal bytes, %0-%9, %%, and a bad '%' now and then. */
static size_t pd_repl(struct pd_src *r, char *out, size_t cap)
{
    size_t n = 0;
    unsigned k = pd_pick(r, 6);

    while (k-- > 0) {
        switch (pd_pick(r, 6)) {
        case 0: case 1:
            pd_putc(out, cap, &n, "xy-"[pd_pick(r, 3)]);
            break;
        case 2: case 3:
            pd_putc(out, cap, &n, '%');
            pd_putc(out, cap, &n, (char)('0' + pd_pick(r, pd_pick(r, 3) == 0 ? 10 : 3)));
            break;
        case 4:
            pd_put(out, cap, &n, "%%");
            break;
        default:
            pd_putc(out, cap, &n, '%');
            if (pd_pick(r, 2))
                pd_putc(out, cap, &n, "xa "[pd_pick(r, 3)]);
            break;
        }
    }
    return n;
}

/* Push the arguments of a call of function fn (0 find, 1 match, 2 gmatch,
 * 3 gsub) and describe it; returns how many. */
static int pd_args(struct pd *d, struct pd_src *r, int fn, size_t *dn)
{
    lua_State *L = d->L;
    char s[512], p[512];
    size_t ls = pd_subject(r, s, sizeof s), lp = pd_pattern(r, p, sizeof p);

    if (lp >= 190 && pd_pick(r, 4) != 0) {    /* the depth bound needs a run of 'a' */
        ls = 150 + pd_pick(r, 80);
        memset(s, 'a', ls);
        if (pd_pick(r, 2))
            s[ls - 1 - pd_pick(r, 10)] = 'b';
    }
    int nargs = 2;

    switch (pd_pick(r, 40)) {           /* arguments of the wrong type */
    case 0:
        lua_newtable(L);
        pd_desc(d, dn, "{}, ");
        break;
    case 1:
        lua_pushinteger(L, 1212);
        pd_desc(d, dn, "1212, ");
        break;
    default:
        lua_pushlstring(L, s, ls);
        pd_desc_str(d, dn, s, ls);
        break;
    }
    if (pd_pick(r, 50) == 0) {
        lua_pushnumber(L, 1.5);
        pd_desc(d, dn, "1.5, ");
    } else {
        lua_pushlstring(L, p, lp);
        pd_desc_str(d, dn, p, lp);
    }
    if (fn == 0 || fn == 1) {
        if (pd_push_int(d, r, ls, dn)) {
            nargs++;
            if (fn == 0 && pd_pick(r, 2)) {
                static const char *const names[] = {"true", "false", "nil", "0"};
                unsigned k = pd_pick(r, 4);

                if (k == 0) lua_pushboolean(L, 1);
                else if (k == 1) lua_pushboolean(L, 0);
                else if (k == 2) lua_pushnil(L);
                else lua_pushinteger(L, 0);
                pd_desc(d, dn, names[k]);
                nargs++;
            }
        }
    } else if (fn == 3) {
        unsigned k = pd_pick(r, 4);

        if (k <= 1) {
            char rp[64];
            size_t lr = pd_repl(r, rp, sizeof rp);

            lua_pushlstring(L, rp, lr);
            pd_desc_str(d, dn, rp, lr);
        } else if (k == 2) {
            char b[32];
            int v = 1 + (int)pd_pick(r, 20);

            lua_rawgeti(L, LUA_REGISTRYINDEX, d->values);
            lua_rawgeti(L, -1, v);
            lua_remove(L, -2);
            snprintf(b, sizeof b, "values[%d], ", v);
            pd_desc(d, dn, b);
        } else {
            if (pd_pick(r, 10) == 0) {
                lua_pushnil(L);
                pd_desc(d, dn, "nil, ");
            } else {
                lua_pushstring(L, "%1");
                pd_desc(d, dn, "\"%1\", ");
            }
        }
        nargs++;
        if (pd_push_int(d, r, ls, dn))
            nargs++;
    } else if (pd_pick(r, 4) == 0) {
        lua_pushinteger(L, 3);          /* gmatch ignores it */
        pd_desc(d, dn, "3");
        nargs++;
    }
    return nargs;
}

static const char *const pd_fns[] = {"find", "match", "gmatch", "gsub"};

/* Call function fn (0 find, 1 match, 2 gmatch, 3 gsub) of stock and of ours
 * (counting on and off) with the nargs values above base; pops them.  0
 * when the three answers agree; the answers are in d->got either way. */
static int pd_compare(struct pd *d, int fn, int base, int nargs)
{
    static const char *const owners[] = {"mine_on", "string", "mine_off"};
    lua_State *L = d->L;

    d->case_start = d->paid;
    for (int w = 0; w < 3; w++) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, d->run);
        lua_pushboolean(L, fn == 2);
        lua_getglobal(L, owners[w]);
        lua_getfield(L, -1, pd_fns[fn]);
        lua_remove(L, -2);
        for (int i = 1; i <= nargs; i++)
            lua_pushvalue(L, base + i);
        if (lua_pcall(L, nargs + 2, 1, 0) != LUA_OK)
            lua_pushfstring(L, "runner failed: %s", lua_tostring(L, -1));
        if (w == 0 && strstr(lua_tostring(L, -1), "pd: case too long") != NULL) {
            lua_settop(L, base);
            d->long_cases++;
            d->got[0][0] = '\0';
            return 0;
        }
    }
    d->cases++;
    for (int w = 0; w < 3; w++) {               /* got[]: stock, on, off */
        size_t len;
        const char *out = lua_tolstring(L, (w == 0 ? 1 : w == 1 ? 0 : 2) - 3, &len);

        len = len < sizeof d->got[w] - 1 ? len : sizeof d->got[w] - 1;
        memcpy(d->got[w], out, len);
        d->got[w][len] = '\0';
    }
    if (lua_rawequal(L, -3, -2) && lua_rawequal(L, -3, -1)) {
        lua_settop(L, base);
        return 0;
    }
    lua_settop(L, base);
    d->failed++;
    return -1;
}

/* Run one generated case; 0 when all three agree. */
static int pd_case(struct pd *d, struct pd_src *r)
{
    int fn = (int)pd_pick(r, 4), nargs, base = lua_gettop(d->L);
    size_t dn = 0;

    pd_desc(d, &dn, pd_fns[fn]);
    pd_desc(d, &dn, "(");
    nargs = pd_args(d, r, fn, &dn);
    pd_desc(d, &dn, ")");
    return pd_compare(d, fn, base, nargs);
}

/* Run a case of raw bytes: data[0] the function and the arguments' kinds,
 * data[1] the subject's length, then the subject, the pattern up to the
 * next 0xff byte, and a gsub replacement string (the rest); 0 when all
 * three agree. */
static int pd_raw(struct pd *d, const uint8_t *data, size_t size)
{
    lua_State *L = d->L;
    int base = lua_gettop(L), nargs = 2, fn;
    size_t ls, lp, dn = 0;
    const uint8_t *p, *stop;
    unsigned k;

    if (size < 2)
        return 0;
    k = data[0];
    fn = (int)(k & 3);
    ls = data[1] < size - 2 ? data[1] : size - 2;
    p = data + 2 + ls;
    stop = memchr(p, 0xff, size - 2 - ls);
    lp = stop != NULL ? (size_t)(stop - p) : size - 2 - ls;
    pd_desc(d, &dn, pd_fns[fn]);
    pd_desc(d, &dn, "(");
    lua_pushlstring(L, (const char *)data + 2, ls);
    pd_desc_str(d, &dn, (const char *)data + 2, ls);
    lua_pushlstring(L, (const char *)p, lp);
    pd_desc_str(d, &dn, (const char *)p, lp);
    if (fn <= 1 && (k & 4)) {
        lua_pushinteger(L, (lua_Integer)(int8_t)(k & 0xf8) / 8);
        nargs++;
        if (fn == 0) {
            lua_pushboolean(L, (k & 0x80) != 0);
            nargs++;
        }
    } else if (fn == 3) {
        const char *rest = stop != NULL ? (const char *)stop + 1 : "";
        size_t lr = stop != NULL ? size - (size_t)(stop + 1 - data) : 0;

        if (k & 4) {
            lua_rawgeti(L, LUA_REGISTRYINDEX, d->values);
            lua_rawgeti(L, -1, 1 + (int)((k >> 3) % 19));
            lua_remove(L, -2);
        } else {
            lua_pushlstring(L, rest, lr);
        }
        nargs++;
    }
    pd_desc(d, &dn, "...)");
    return pd_compare(d, fn, base, nargs);
}

static void pd_report(const struct pd *d, FILE *f)
{
    fprintf(f, "case: %s\n  stock:       %s\n  counting on: %s\n  counting off: %s\n",
            d->desc, d->got[0], d->got[1], d->got[2]);
}

#endif
