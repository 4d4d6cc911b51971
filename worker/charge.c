/*
 * charge.c - the charges of library work (contract and rates: charge.h).
 * Depends on the Lua API only, never on the worker's state.
 *
 * A wrapper is a C closure: upvalue 1 the struct charge, upvalue 2 the
 * stock function it charges for.  It checks the arguments as the stock
 * function does, in its order and with its messages, measures the work,
 * pays, and calls the stock C function directly (not through lua_call), so
 * the stock function runs in the wrapper's own call frame: its argument
 * errors name the function as the caller wrote it and its luaL_error
 * positions are the caller's, exactly as without the wrapper.  The stock
 * library functions take no upvalues, so the wrapper's are no concern of
 * theirs.  Where measuring first would run a metamethod stock runs once
 * (#t through __len) or could stop the work half way (__index, __newindex,
 * a reader), the function is this module's own, written from the manual
 * with stock's messages (found by running lua5.3), in one frame as well.
 * tests/unit/test_luadiff.c holds all of it to stock Lua, statement by
 * statement.
 */
#include "worker/charge.h"

#include "proto/mutant.h"

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
    struct charge *c = lua_touserdata(L, lua_upvalueindex(1));

    n = charge_call(n);
    if (n != 0)
        (c->pay_ahead != NULL ? c->pay_ahead : c->pay)(L, c->ud, n);
}

/* A charge with no free part, for work not yet done (charge.h: pay_ahead). */
static void pay_ahead(lua_State *L, uint64_t n)
{
    struct charge *c = lua_touserdata(L, lua_upvalueindex(1));

    if (n != 0)
        (c->pay_ahead != NULL ? c->pay_ahead : c->pay)(L, c->ud, n);
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

/* A position in a string of len bytes as the manual gives it (section
 * 6.4: -1 is the last byte), counted from the start: a negative one that
 * reaches back past the first byte is 0.  Callers clamp the result to
 * their own range. */
static lua_Integer from_start(lua_Integer pos, size_t len)
{
    uint64_t back;

    if (pos >= 0)
        return pos;
    back = (uint64_t)0 - (uint64_t)pos;     /* -pos, LUA_MININTEGER included */
    return back > len ? 0 : (lua_Integer)(len - back) + 1;
}

/* The bytes of the string at idx (0 for anything else). */
static size_t strlen_at(lua_State *L, int idx)
{
    size_t len = 0;

    if (lua_type(L, idx) == LUA_TSTRING)
        lua_tolstring(L, idx, &len);
    return len;
}

/* What a table function needs of a value that is not a table. */
#define NEED_READ   1       /* __index */
#define NEED_WRITE  2       /* __newindex */
#define NEED_LEN    4       /* __len */

/* Whether the table on top has a (raw) field name. */
static int has_field(lua_State *L, const char *name)
{
    int t;

    lua_pushstring(L, name);
    t = lua_rawget(L, -2);
    lua_pop(L, 1);
    return t != LUA_TNIL;
}

/* The table functions take a table, or any value whose metatable has (raw)
 * the fields of what they do with it; anything else is an argument error. */
static void check_table(lua_State *L, int idx, int need)
{
    int ok;

    if (lua_type(L, idx) == LUA_TTABLE)
        return;
    ok = lua_getmetatable(L, idx);
    if (ok) {
        ok = (!(need & NEED_READ) || has_field(L, "__index"))
             && (!(need & NEED_WRITE) || has_field(L, "__newindex"))
             && (!(need & NEED_LEN) || has_field(L, "__len"));
        lua_pop(L, 1);
    }
    if (!ok)
        luaL_checktype(L, idx, LUA_TTABLE);
}

/* The length of the table at idx (after check_table): luaL_len, so a __len
 * metamethod runs, once, as in the stock function. */
static lua_Integer table_len(lua_State *L, int idx, int need)
{
    check_table(L, idx, need | NEED_LEN);
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
    posi = from_start(luaL_optinteger(L, 2, 1), l);
    pose = from_start(luaL_optinteger(L, 3, posi), l);
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

/*
 * string.format's work as far as stock gets: its format is read directive
 * by directive, each taking the next argument, and the first directive
 * stock refuses (no argument left, a spec too long, an unknown conversion,
 * an argument of the wrong type, a string with zeros under a width or
 * precision) stops it.  The walk here stops there too.  On its way it gives
 * each %s argument that has a __tostring its text, in stock's order (the
 * argument is replaced by it, so stock does not run it again): what stock
 * would run, and nothing more, and the text is paid for by its bytes
 * before format copies it, also when a later directive then fails.
 */
struct format_work {
    size_t   scanned;       /* bytes of the format stock reads */
    uint64_t each, bytes;   /* %q arguments; other string arguments */
};

/* The end of the spec at fmt[i] (after the '%': flags, width, precision),
 * or len when stock refuses it. */
static size_t format_spec(const char *fmt, size_t len, size_t i)
{
    size_t flags = 0, d;

    while (i < len && fmt[i] != '\0' && strchr("-+ #0", fmt[i]) != NULL) {
        i++;
        flags++;
    }
    if (flags >= sizeof "-+ #0")
        return len;                     /* repeated flags */
    for (d = 0; d < 2 && i < len && fmt[i] >= '0' && fmt[i] <= '9'; d++)
        i++;
    if (i < len && fmt[i] == '.') {
        i++;
        for (d = 0; d < 2 && i < len && fmt[i] >= '0' && fmt[i] <= '9'; d++)
            i++;
    }
    if (i < len && fmt[i] >= '0' && fmt[i] <= '9')
        return len;                     /* width or precision too long */
    return i;
}

static void format_walk(lua_State *L, const char *fmt, size_t len, struct format_work *w)
{
    int arg = 1, top = lua_gettop(L), ok;
    size_t i = 0, start, slen;
    const char *str;

    while (i < len) {
        if (fmt[i++] != '%')
            continue;
        if (i < len && fmt[i] == '%') {
            i++;
            continue;
        }
        start = i;
        if (++arg > top || (i = format_spec(fmt, len, i)) >= len)
            break;
        switch (fmt[i++]) {
        case 'c': case 'd': case 'i': case 'o': case 'u': case 'x': case 'X':
            lua_tointegerx(L, arg, &ok);
            break;
        case 'a': case 'A': case 'e': case 'E': case 'f': case 'g': case 'G':
            lua_tonumberx(L, arg, &ok);
            break;
        case 'q':
            ok = lua_type(L, arg) <= LUA_TSTRING;   /* nil, boolean, number, string */
            w->each += strlen_at(L, arg);
            break;
        case 's':
            if (luaL_getmetafield(L, arg, "__tostring") != LUA_TNIL) {
                lua_pop(L, 1);
                luaL_tolstring(L, arg, NULL);       /* stock's turn to run it */
                lua_replace(L, arg);
            }
            ok = 1;
            if (lua_type(L, arg) == LUA_TSTRING) {
                str = lua_tolstring(L, arg, &slen);
                w->bytes += slen;
                ok = i - start == 1 || strlen(str) == slen;   /* zeros under a modifier */
            }
            break;
        default:
            ok = 0;                     /* invalid option */
            break;
        }
        if (!ok)
            break;
    }
    w->scanned = i < len ? i : len;
}

static int w_format(lua_State *L)
{
    size_t len;
    const char *fmt = luaL_checklstring(L, 1, &len);
    struct format_work w = {0};

    format_walk(L, fmt, len, &w);
    pay(L, (w.scanned + w.each) / CHARGE_EACH_BYTES + w.bytes / CHARGE_BYTES);
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
    pos = from_start(luaL_optinteger(L, 3, 1), ld);
    if (memchr(fmt, 'z', lf) != NULL && pos >= 1 && (size_t)pos <= ld)
        pay_ahead(L, (ld - (size_t)pos + 1) / CHARGE_BYTES);   /* strlen may run to the end */
    n = stock(L);
    pay(L, lf / CHARGE_EACH_BYTES + (uint64_t)n);
    return n;
}

/* ---- table ---- */

/*
 * table.insert, remove, unpack and concat are written here from the
 * reference manual (section 6.6), with stock's messages (found by running
 * lua5.3): the stock functions take #t with luaL_len, so a wrapper that
 * measured first would run a __len metamethod twice.  Each checks its
 * arguments in stock's order, then pays, then works; an argument stock
 * refuses costs nothing.
 */
static int w_insert(lua_State *L)
{
    lua_Integer n = table_len(L, 1, NEED_READ | NEED_WRITE), pos, k;
    lua_Integer e = (lua_Integer)((lua_Unsigned)n + 1u);    /* first empty slot, as Lua's + */

    switch (lua_gettop(L)) {
    case 2:
        pos = e;
        break;
    case 3:
        pos = luaL_checkinteger(L, 2);
        luaL_argcheck(L, pos >= 1 && pos <= e, 2,
                      "position out of bounds");     /* from 1 to the first empty slot */
        break;
    default:
        return luaL_error(L, "wrong number of arguments to 'insert'");
    }
    pay(L, count(pos, e - 1) * CHARGE_TABLE_VALUE);     /* moved up one */
    for (k = e; k > pos; k--) {
        lua_geti(L, 1, k - 1);
        lua_seti(L, 1, k);
    }
    lua_seti(L, 1, pos);
    return 0;
}

static int w_remove(lua_State *L)
{
    lua_Integer size = table_len(L, 1, NEED_READ | NEED_WRITE);
    lua_Integer pos = luaL_optinteger(L, 2, size);
    lua_Integer e = (lua_Integer)((lua_Unsigned)size + 1u);    /* first empty slot, as Lua's + */

    if (pos != size)
        luaL_argcheck(L, pos >= 1 && pos <= e, 1,
                      "position out of bounds");     /* from 1 to the first empty slot */
    pay(L, count(pos, size) * CHARGE_TABLE_VALUE);
    lua_geti(L, 1, pos);
    for (; pos < size; pos++) {
        lua_geti(L, 1, pos + 1);
        lua_seti(L, 1, pos);
    }
    lua_pushnil(L);
    lua_seti(L, 1, pos);
    return 1;
}

/* A plain table: one without a metatable, whose reads and writes are raw. */
static int plain_table(lua_State *L, int idx)
{
    if (lua_type(L, idx) != LUA_TTABLE || !lua_getmetatable(L, idx))
        return lua_type(L, idx) == LUA_TTABLE;
    lua_pop(L, 1);
    return 0;
}

/* table.move: paid before it moves between plain tables; with a metatable
 * on either side (__index or __newindex may raise at any item) each item is
 * paid as it is moved. */
static int w_move(lua_State *L)
{
    struct charge *c = lua_touserdata(L, lua_upvalueindex(1));
    lua_Integer f = luaL_checkinteger(L, 2), e = luaL_checkinteger(L, 3);
    lua_Integer t = luaL_checkinteger(L, 4), n, i;
    int tt = lua_isnoneornil(L, 5) ? 1 : 5, each, backward;

    check_table(L, 1, NEED_READ);
    check_table(L, tt, NEED_WRITE);
    if (e >= f) {
        /* the count of items, e - f + 1, must be a lua_Integer, and so
         * must the last destination index, t + count - 1 */
        luaL_argcheck(L, (lua_Unsigned)e - (lua_Unsigned)f < (lua_Unsigned)LUA_MAXINTEGER, 3,
                      "too many elements to move");
        n = e - f + 1;
        luaL_argcheck(L, t <= LUA_MAXINTEGER - (n - 1), 4, "destination wrap around");
        each = !plain_table(L, 1) || !plain_table(L, tt);
        if (!each)
            pay(L, (uint64_t)n > UINT64_MAX / CHARGE_TABLE_VALUE ? UINT64_MAX
                                                                  : (uint64_t)n * CHARGE_TABLE_VALUE);
        /* Last item first when the destination starts inside the source
         * range of the same table (equal by ==, so __eq may decide). */
        backward = t > f && t <= e && (tt == 1 || lua_compare(L, 1, tt, LUA_OPEQ));
        for (i = 0; i < n; i++) {
            lua_Integer k = backward ? n - 1 - i : i;
            if (each)
                charge_pay(L, c, CHARGE_TABLE_VALUE);
            lua_geti(L, 1, f + k);
            lua_seti(L, tt, t + k);
        }
    }
    lua_pushvalue(L, tt);
    return 1;
}

static int w_tunpack(lua_State *L)
{
    lua_Integer i = luaL_optinteger(L, 2, 1);
    lua_Integer e = luaL_opt(L, luaL_checkinteger, 3, luaL_len(L, 1));
    lua_Unsigned span;          /* the count of results less one */

    if (i > e)
        return 0;
    span = (lua_Unsigned)e - (lua_Unsigned)i;
    if (span >= (lua_Unsigned)INT_MAX || !lua_checkstack(L, (int)span + 1))
        return luaL_error(L, "too many results to unpack");
    pay(L, (uint64_t)span + 1);
    for (; i < e; i++)
        lua_geti(L, 1, i);
    lua_geti(L, 1, e);
    return (int)span + 1;
}

/* The comparison table.sort makes when the table it sorts has a __len:
 * pays for itself, then compares as stock would, by the caller's function
 * (upvalue 3) or by < (upvalue 3 nil).  Upvalues 1 and 2 are w_sort's. */
static int sort_compare(lua_State *L)
{
    if (!MUTANT(SORT_COMPARE))
        pay_ahead(L, CHARGE_SORT_COMPARE);
    if (lua_isnil(L, lua_upvalueindex(3))) {
        lua_pushboolean(L, lua_compare(L, 1, 2, LUA_OPLT));
        return 1;
    }
    lua_pushvalue(L, lua_upvalueindex(3));
    lua_insert(L, 1);
    lua_call(L, 2, 1);
    return 1;
}

/* table.sort is the stock function, paid before it sorts by the length of
 * the table.  A table with a __len metamethod is not measured here (that
 * would run the metamethod a second time, where stock runs it once): its
 * comparisons pay as they are made instead.  A Lua comparator pays by its
 * own instructions, at least one a comparison, for a bounded amount of
 * work in the stock function; < or a C function is replaced by
 * sort_compare, which the stock function calls as it would the caller's
 * (one C call level deeper than stock's comparison).  An argument stock
 * refuses goes to it untouched. */
static int w_sort(lua_State *L)
{
    if (lua_type(L, 1) != LUA_TTABLE || !(lua_isnoneornil(L, 2) || lua_type(L, 2) == LUA_TFUNCTION))
        return stock(L);
    if (luaL_getmetafield(L, 1, "__len") != LUA_TNIL) {
        lua_pop(L, 1);
        if (!lua_isnoneornil(L, 2) && !lua_iscfunction(L, 2))
            return stock(L);
        lua_settop(L, 2);
        lua_pushvalue(L, lua_upvalueindex(1));
        lua_pushvalue(L, lua_upvalueindex(2));
        lua_pushvalue(L, 2);
        lua_pushcclosure(L, sort_compare, 3);
        lua_replace(L, 2);
        return stock(L);
    }
    {
        lua_Integer n = luaL_len(L, 1);     /* the raw length: no code runs */
        if (n > 1 && n < INT_MAX) {
            uint64_t levels = 0;
            while (levels < 63 && ((lua_Integer)1 << levels) < n)
                levels++;
            pay(L, (uint64_t)n * levels * CHARGE_SORT_LEVEL);
        }
    }
    return stock(L);
}

/* Stock prints the index as a C int: its low 32 bits, as a signed number. */
static void concat_item_error(lua_State *L, lua_Integer i)
{
    luaL_error(L, "invalid value (%s) at index %d in table for 'concat'",
               luaL_typename(L, -1), (int)(int32_t)(uint32_t)(lua_Unsigned)i);
}

static void too_large(lua_State *L)
{
    luaL_error(L, "resulting string too large");
}

/* Items i..last of a table without a metatable: read raw, measured and
 * paid for before the result is built.  A result above the cap is refused
 * before it is built; up to CONCAT_DIRECT items are joined on the stack by
 * lua_concat, which writes the result directly (a luaL_Buffer needs twice
 * the result: the buffer, then the string). */
#define CONCAT_DIRECT 4096

static int concat_plain(lua_State *L, struct charge *c, const char *sep, size_t lsep,
                        lua_Integer i, lua_Integer last)
{
    size_t total = 0, len, cap = c->cap != 0 && !MUTANT(REP_CONCAT) ? c->cap : SIZE_MAX;
    uint64_t items = 0;
    lua_Integer k;
    luaL_Buffer b;

    for (k = i; k <= last; k++) {
        int t = lua_rawgeti(L, 1, k);
        items++;
        if (t != LUA_TSTRING && t != LUA_TNUMBER) {
            pay(L, items * CHARGE_TABLE_VALUE + total / CHARGE_BYTES);
            concat_item_error(L, k);
        }
        lua_tolstring(L, -1, &len);
        lua_pop(L, 1);
        if (len > cap - total)
            too_large(L);
        total += len;
        if (k == last)
            break;
        if (lsep > cap - total)
            too_large(L);
        total += lsep;
    }
    pay(L, items * CHARGE_TABLE_VALUE + total / CHARGE_BYTES);
    if (items <= CONCAT_DIRECT && !MUTANT(CAP_BUILD)) {
        int n = 0;
        if (c->fit != NULL)
            c->fit(L, c->ud, total);
        luaL_checkstack(L, 2 * (int)items + 1, "too many values to concatenate");
        for (k = i; k <= last; k++) {
            if (k > i && lsep > 0) {
                lua_pushlstring(L, sep, lsep);
                n++;
            }
            lua_rawgeti(L, 1, k);
            n++;
            if (k == last)
                break;
        }
        lua_concat(L, n);
        lua_tolstring(L, -1, NULL);     /* a single number item becomes its text */
        return 1;
    }
    if (c->fit != NULL)
        c->fit(L, c->ud, total > SIZE_MAX / 2 ? SIZE_MAX : total * 2);
    luaL_buffinitsize(L, &b, total);
    for (k = i; k <= last; k++) {
        lua_rawgeti(L, 1, k);
        luaL_addvalue(&b);
        if (k == last)
            break;
        luaL_addlstring(&b, sep, lsep);
    }
    luaL_pushresult(&b);
    return 1;
}

/* Items of anything else (__index may make each one): each paid as it is
 * added, so an error at an item has paid for the copying before it; the
 * allocator's string cap is the guard. */
static int concat_any(lua_State *L, struct charge *c, const char *sep, size_t lsep,
                      lua_Integer i, lua_Integer last)
{
    luaL_Buffer b;
    size_t len;

    luaL_buffinit(L, &b);
    for (; i <= last; i++) {
        lua_geti(L, 1, i);
        if (!lua_isstring(L, -1))
            concat_item_error(L, i);
        lua_tolstring(L, -1, &len);
        charge_pay(L, c, CHARGE_TABLE_VALUE + (len + lsep) / CHARGE_BYTES);
        luaL_addvalue(&b);
        if (i == last)
            break;
        luaL_addlstring(&b, sep, lsep);
    }
    luaL_pushresult(&b);
    return 1;
}

static int w_concat(lua_State *L)
{
    struct charge *c = lua_touserdata(L, lua_upvalueindex(1));
    lua_Integer last = table_len(L, 1, NEED_READ), i;
    size_t lsep;
    const char *sep = luaL_optlstring(L, 2, "", &lsep);

    i = luaL_optinteger(L, 3, 1);
    last = luaL_optinteger(L, 4, last);
    if (lua_type(L, 1) == LUA_TTABLE && !lua_getmetatable(L, 1))
        return concat_plain(L, c, sep, lsep, i, last);
    if (lua_type(L, 1) == LUA_TTABLE)
        lua_pop(L, 1);
    return concat_any(L, c, sep, lsep, i, last);
}

/* ---- utf8 ---- */

static int w_codepoint(lua_State *L)
{
    size_t len;
    lua_Integer posi, pose;

    luaL_checklstring(L, 1, &len);
    posi = from_start(luaL_optinteger(L, 2, 1), len);
    pose = from_start(luaL_optinteger(L, 3, posi), len);
    if (posi >= 1 && pose <= (lua_Integer)len)
        pay(L, pushed(posi, pose));
    return stock(L);
}

static int w_len(lua_State *L)
{
    size_t len;
    lua_Integer posi, posj;

    luaL_checklstring(L, 1, &len);
    posi = from_start(luaL_optinteger(L, 2, 1), len);
    posj = from_start(luaL_optinteger(L, 3, -1), len);
    luaL_argcheck(L, 1 <= posi && posi - 1 <= (lua_Integer)len, 2,
                  "initial position out of string");
    luaL_argcheck(L, posj - 1 < (lua_Integer)len, 3, "final position out of string");
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
    i = from_start(i, len);
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

/*
 * load, written from the manual with stock's checks and messages: the
 * reader is called from load's own frame (inside lua_load), as stock's is,
 * so its errors keep stock's positions, levels and C-stack depth; each
 * piece is paid for before the lexer reads it (a payment that raises there
 * is load's error, as any error of the reader).
 */
#define LOAD_PIECE_SLOT 5           /* keeps the reader's last piece alive */

static const char *load_piece(lua_State *L, void *ud, size_t *size)
{
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
    lua_replace(L, LOAD_PIECE_SLOT);
    s = lua_tolstring(L, LOAD_PIECE_SLOT, size);
    charge_pay(L, ud, charge_source(*size));
    return s;
}

static int w_load(lua_State *L)
{
    struct charge *c = lua_touserdata(L, lua_upvalueindex(1));
    size_t len;
    const char *s = lua_tolstring(L, 1, &len), *name;
    const char *mode = luaL_optstring(L, 3, "bt");
    int env = lua_isnone(L, 4) ? 0 : 4, status;

    if (s != NULL) {
        name = luaL_optstring(L, 2, s);
        pay_ahead(L, charge_source(len));
        status = luaL_loadbufferx(L, s, len, name, mode);
    } else {
        name = luaL_optstring(L, 2, "=(load)");
        luaL_checktype(L, 1, LUA_TFUNCTION);
        lua_settop(L, LOAD_PIECE_SLOT);
        status = lua_load(L, load_piece, c, name, mode);
    }
    if (status != LUA_OK) {
        lua_pushnil(L);
        lua_insert(L, -2);
        return 2;                       /* nil and the message */
    }
    if (env != 0) {
        lua_pushvalue(L, env);
        if (lua_setupvalue(L, -2, 1) == NULL)
            lua_pop(L, 1);
    }
    return 1;
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
