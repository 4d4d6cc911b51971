/*
 * luadiff.c - the differential test of the worker's library against stock
 * Lua 5.3 (contract: luadiff.h).
 */
#include "tests/diff/luadiff.h"

#include <fcntl.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "worker/charge.h"
#include "worker/luaenv.h"

/* ---- choices ---- */

void luadiff_rng_seed(struct luadiff_rng *r, uint64_t seed)
{
    memset(r, 0, sizeof *r);
    r->s = seed * 0x9E3779B97F4A7C15u + 1;
}

void luadiff_rng_bytes(struct luadiff_rng *r, const uint8_t *data, size_t len)
{
    memset(r, 0, sizeof *r);
    r->data = data;
    r->len = len;
}

/* A choice in [0, n). */
static unsigned pick(struct luadiff_rng *r, unsigned n)
{
    uint64_t x;

    if (n <= 1)
        return 0;
    if (r->data != NULL) {
        x = r->pos < r->len ? r->data[r->pos] : 0;
        r->pos++;
        if (n > 256 && r->pos < r->len)
            x = x << 8 | r->data[r->pos++];
        return (unsigned)(x % n);
    }
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return (unsigned)((r->s >> 11) % n);
}

#define PICK(r, arr) (arr[pick(r, sizeof arr / sizeof arr[0])])

/* ---- text ---- */

struct text {
    char  *p;
    size_t len, cap;
};

static void put(struct text *t, const char *fmt, ...)
{
    va_list ap;
    int n;

    for (;;) {
        size_t room = t->cap - t->len;
        va_start(ap, fmt);
        n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            abort();
        if (t->p != NULL && (size_t)n < room) {
            t->len += (size_t)n;
            return;
        }
        t->cap = (t->cap + (size_t)n + 1) * 2;
        t->p = realloc(t->p, t->cap);
        if (t->p == NULL)
            abort();
        t->p[t->len] = '\0';
    }
}

/* ---- the generated statements ---- */

/*
 * The prelude: constructors of values with metamethods that log what runs
 * (LOG, read and cleared after each statement) and raise at a given level.
 */
static const char PRELUDE[] =
    "LOG = {}\n"
    "local function log(s) LOG[#LOG + 1] = s end\n"
    "function TS(s) return setmetatable({}, {__tostring = function() log('ts') return s end}) end\n"
    "function TSE(l) return setmetatable({}, {__tostring = function() log('tse') error('tse', l) end}) end\n"
    "function IX(n, v) return setmetatable({}, {__index = function(_, k) log('ix' .. tostring(k)) return v end,"
    " __len = function() log('len') return n end}) end\n"
    "function IXE(l) return setmetatable({}, {__index = function() log('ixe') error('ixe', l) end,"
    " __len = function() return 3 end}) end\n"
    "function LEN(n) return setmetatable({'c', 'a', 'b'}, {__len = function() log('len') return n end}) end\n"
    "function LENE(l) return setmetatable({}, {__len = function() log('lene') error('lene', l) end}) end\n"
    "function LT(l) local mt = {__lt = function() log('lt') error('lte', l) end}\n"
    "  return {setmetatable({}, mt), setmetatable({}, mt), setmetatable({}, mt)} end\n"
    "function NI() return setmetatable({}, {__newindex = function(t, k, v) log('ni' .. tostring(k)) rawset(t, k, v) end}) end\n"
    "function NIE(l) return setmetatable({}, {__newindex = function() log('nie') error('nie', l) end}) end\n"
    "function RD(...) local p, i = {...}, 0 return function() i = i + 1 log('rd' .. i) return p[i] end end\n"
    "function RDE(l) return function() log('rde') error('rde', l) end end\n"
    "function FE(l) return function() log('fe') error('fe', l) end end\n"
    "function CMP(l) return function(a, b) log('cmp') if l > 0 then error('cmpe', l) end return a > b end end\n"
    "function H(m) log('h') return 'H:' .. tostring(m) end\n"
    "function HE(m) error('he') end\n"
    "CO = coroutine.create(function(...) log('co') return ... end)\n";

static const char *const V_INT[] = {
    "0", "1", "2", "3", "-1", "-2", "-7", "4", "5", "10", "100", "math.maxinteger",
    "math.mininteger", "1 << 62", "-(1 << 62)", "2147483647", "2147483648", "1.0", "3.0",
};
static const char *const V_NUM[] = {
    "1.5", "-0.0", "1e308", "0/0", "1/0", "-1/0", "2^53", "2^63", "0.5", "'2'", "'1.5'",
    "'0x10'", "' 3 '", "'x'",
};
static const char *const V_STR[] = {
    "''", "'a'", "'abc'", "'hello world'", "'10'", "'0x1F'", "' 5 '", "'1e2'", "'%d'",
    "'a\\0b'", "'h\\195\\169llo'", "'\\255\\254'", "'z7'", "'99'", "'-8'", "'Z'",
    "string.rep('ab', 40)", "'\\240\\159\\152\\128x'", "'\\xed\\xa0\\x80'",
};
static const char *const V_TAB[] = {
    "{}", "{1, 2, 3}", "{'a', 'b', 'c'}", "{1, 'x', {}, 3}", "{3, 1, 2}", "{n = 2}",
    "{'b', 'a', 'c', 'a'}", "{1.5, 2, '3'}", "{true}", "{1, nil, 3}", "{'x', false}",
    "TS('ts')", "TS(42)", "TS({})", "TSE(1)", "TSE(2)", "IX(3, 'v')", "IX(2.5, 'v')",
    "IX('3', 'v')", "IX(3, {})", "IX(2^63, 'v')", "IX(3, 7)", "IXE(1)", "IXE(2)", "IXE(3)",
    "LEN(2)", "LEN(2^31)", "LEN(-1)", "LEN(1.5)", "LEN('x')", "LENE(1)", "LENE(2)", "LT(1)",
    "LT(2)", "NI()", "NIE(1)", "NIE(2)", "setmetatable({}, {__index = {'p', 'q'}})",
    "setmetatable({}, {__metatable = 'locked'})", "setmetatable({}, {__name = 'My'})",
};
static const char *const V_FUN[] = {
    "print", "function() end", "string.len", "FE(1)", "FE(2)", "FE(3)", "CMP(0)", "CMP(1)",
    "CMP(2)", "H", "HE", "tostring", "error", "coroutine.yield", "function(...) return ... end",
};
static const char *const V_OTHER[] = {
    "nil", "true", "false", "CO", "coroutine.create(print)", "coroutine.running()",
};
static const char *const V_FMT[] = {
    "'%d'", "'%5.2f'", "'%s'", "'%q'", "'%y%s'", "'%123s'", "'%-5d%%'", "'%x %X %o'", "'%c'",
    "'%a'", "'%g %e %E %G'", "'%i'", "'%s %s'", "'%10.3s|'", "'%%'", "'%'", "'%5'",
    "'%99d'", "'%100d'", "'%.99f'", "'%.100f'", "'%#x'", "'%+ d'", "'%-0#+ 5d'", "'%--------d'",
    "'%s%d%s'", "'%q%q'", "'%u'", "'%.3q'", "'%5s%y'", "'%d%s'",
};
static const char *const V_PACK[] = {
    "'i4'", "'<i2 >I2'", "'z'", "'s1'", "'!4 i3 xX'", "'c3'", "'b B h H l L j J T'", "'f d n'",
    "'i17'", "'i0'", "'!17'", "'c'", "'X'", "'Xi4'", "'=s2 z'", "'q'", "'<!2 h Xh b'",
    "'i'", "'s'", "'i3 c2 x !8 Xi8'", "'>j'", "' '",
};
static const char *const V_DATE[] = {
    "'%Y-%m-%d'", "'!%H:%M:%S'", "'*t'", "'!*t'", "'%c'", "'%'", "'%Ez'", "'%Q'", "'%%'",
    "'!%x %X %p'", "''", "'%E'", "'%Ec'", "'%Oy'",
};
static const char *const V_PAT[] = {
    "'a'", "'%a+'", "'(b)(c)'", "'^h'", "'[a-c]+'", "'()'", "'%'", "'[a'", "'(()'", "'.-'",
    "'%d*'", "'x*$'",
};
static const char *const V_TIME[] = {
    "0", "86400", "1000000000", "-1", "1.5", "'x'", "{}", "2^60", "1e100", "'100'",
};
static const char *const V_READER[] = {
    "RD('return ', '1')", "RD('return 1 +')", "RD('retu', 'rn 7')", "RD({})", "RD(1, 2)",
"RDE(1)", "RDE(2)", "RDE(3)", "RD()", "RD('', 'return 2')",
    "RD('return ', true)", "'return 5'", "'return'", "'x ='", "RD('return ...')",
};

/* load's modes: the worker loads text only (docs/protocol.md), so the
 * sources here are text, and a mode without "t" refuses them as stock does. */
static const char *const V_MODE[] = {"'t'", "'bt'", "nil", "{}", "true", "'b'", "'x'", "''"};

/* table.sort's tables, with and without a __len (which stock runs once). */
static const char *const V_SORT[] = {
    "{}", "{3, 1, 2}", "{'b', 'a', 'c', 'a'}", "{1, 'x', 3}", "{1, nil, 3}", "{1.5, 2, -1}",
    "LT(1)", "LT(2)", "{0/0, 1, 0/0}", "setmetatable({}, {__index = function() return 1 end})",
    "NIE(1)", "TS(1)", "LEN(3)", "LEN(2)", "LEN(0)", "LEN(4)", "LENE(1)", "LENE(2)", "IX(3, 1)",
    "IX(2, 'a')", "IXE(1)", "IXE(2)",
};

/* string.rep's count: small ones (and bad types).  A huge one is a string
 * of gigabytes in stock, where the worker refuses it at its string cap
 * (docs/protocol.md), or a memory error in stock. */
static const char *const V_REPN[] = {
    "0", "1", "3", "-1", "10", "1.5", "'2'", "'x'", "{}", "nil", "2.0", "-(1 << 62)",
};

enum kind { K_ANY, K_INT, K_NUM, K_STR, K_TAB, K_FUN, K_FMT, K_PACK, K_DATE, K_PAT,
            K_TIME, K_READER, K_CO, K_MODE, K_SORT, K_REPN };

/* A value of kind k most of the time, of any kind otherwise. */
static void value(struct luadiff_rng *r, struct text *t, enum kind k)
{
    static const enum kind any[] = {K_INT, K_NUM, K_STR, K_TAB, K_FUN, K_CO};

    if (k == K_ANY || (k != K_MODE && k != K_SORT && k != K_REPN && pick(r, 5) == 0))
        k = PICK(r, any);
    switch (k) {
    case K_INT:    put(t, "%s", PICK(r, V_INT)); break;
    case K_NUM:    put(t, "%s", PICK(r, V_NUM)); break;
    case K_STR:    put(t, "%s", PICK(r, V_STR)); break;
    case K_TAB:    put(t, "%s", PICK(r, V_TAB)); break;
    case K_FUN:    put(t, "%s", PICK(r, V_FUN)); break;
    case K_FMT:    put(t, "%s", PICK(r, V_FMT)); break;
    case K_PACK:   put(t, "%s", PICK(r, V_PACK)); break;
    case K_DATE:   put(t, "%s", PICK(r, V_DATE)); break;
    case K_PAT:    put(t, "%s", PICK(r, V_PAT)); break;
    case K_TIME:   put(t, "%s", PICK(r, V_TIME)); break;
    case K_READER: put(t, "%s", PICK(r, V_READER)); break;
    case K_MODE:   put(t, "%s", PICK(r, V_MODE)); break;
    case K_SORT:   put(t, "%s", PICK(r, V_SORT)); break;
    case K_REPN:   put(t, "%s", PICK(r, V_REPN)); break;
    default:       put(t, "%s", PICK(r, V_OTHER)); break;
    }
}

struct fn {
    const char *name;
    const char *params;     /* one letter a parameter: see kind_of */
    int         method;     /* may be called as a string method */
};

/* Every function worker/charge.c and worker/luaenv_lib.c wrap or replace. */
static const struct fn FUNCS[] = {
    {"string.byte", "sii", 1}, {"string.char", "iii", 0}, {"string.format", "fvvv", 1},
    {"string.lower", "s", 1}, {"string.upper", "s", 1}, {"string.reverse", "s", 1},
    {"string.rep", "sns", 1}, {"string.pack", "pvvv", 1}, {"string.packsize", "p", 1},
    {"string.unpack", "psi", 1}, {"string.find", "sPiv", 1}, {"string.match", "sPi", 1},
    {"string.gsub", "sPvi", 1}, {"table.concat", "tsii", 0}, {"table.insert", "tiv", 0},
    {"table.remove", "ti", 0}, {"table.move", "tiiit", 0}, {"table.unpack", "tii", 0},
    {"table.pack", "vvv", 0}, {"table.sort", "SF", 0}, {"utf8.char", "iii", 0},
    {"utf8.codepoint", "sii", 0}, {"utf8.len", "sii", 0}, {"utf8.offset", "sii", 0},
    {"utf8.codes", "s", 0}, {"os.date", "dT", 0}, {"tonumber", "vi", 0},
    {"rawequal", "vv", 0}, {"load", "RsMv", 0}, {"pcall", "Fvv", 0}, {"xpcall", "FFv", 0},
    {"setmetatable", "tv", 0}, {"collectgarbage", "v", 0}, {"print", "vv", 0},
    {"coroutine.create", "F", 0}, {"coroutine.resume", "cvv", 0}, {"coroutine.wrap", "F", 0},
};

static enum kind kind_of(char c)
{
    switch (c) {
    case 'i': return K_INT;
    case 's': return K_STR;
    case 't': return K_TAB;
    case 'F': return K_FUN;
    case 'f': return K_FMT;
    case 'p': return K_PACK;
    case 'd': return K_DATE;
    case 'P': return K_PAT;
    case 'T': return K_TIME;
    case 'R': return K_READER;
    case 'c': return K_CO;
    case 'M': return K_MODE;
    case 'S': return K_SORT;
    case 'n': return K_REPN;
    default:  return K_ANY;
    }
}

/* The arguments of f: each parameter, a few left out or one more. */
static void args(struct luadiff_rng *r, struct text *t, const struct fn *f, int skip_first)
{
    size_t n = strlen(f->params), i;
    unsigned c = pick(r, 8);
    int first = 1;

    if (c == 0 && n > 0)
        n = pick(r, (unsigned)n);            /* fewer */
    else if (c == 1)
        n++;                                  /* one more */
    for (i = skip_first ? 1 : 0; i < n; i++) {
        if (!first)
            put(t, ", ");
        first = 0;
        value(r, t, i < strlen(f->params) ? kind_of(f->params[i])
                    : strcmp(f->name, "table.sort") == 0 ? K_SORT : K_ANY);
    }
}

/* Statements that measure a depth: how far a recursion through each
 * function gets before the C stack runs out, and what the error says. */
static const char *const DEPTH[] = {
    "local n, t = 0 t = setmetatable({}, {__index = function() n = n + 1 return table.concat(t, '', 1, 1) end})"
    " local ok, e = pcall(table.concat, t, '', 1, 1) return n, e",
    "local n, v = 0 v = setmetatable({}, {__tostring = function() n = n + 1 return string.format('%s', v) end})"
    " local ok, e = pcall(string.format, '%s', v) return n, e",
    "local n, r = 0 r = function() n = n + 1 local f, e = load(r) error(e, 0) end"
    " local f, e = load(r) return n, f, e",
    "local n, c = 0 c = function(a, b) n = n + 1 table.sort({2, 1}, c) return a < b end"
    " local ok, e = pcall(table.sort, {2, 1}, c) return n, ok, e",
    "local n, c = 0 c = function(a, b) n = n + 1 table.sort(LEN(3), c) return a < b end"
    " local ok, e = pcall(table.sort, LEN(3), c) return n, ok, e",
    "local n, f = 0 f = function() n = n + 1 pcall(f) end f() return n",
    "local n, f = 0 f = function() n = n + 1 xpcall(f, H) end f() return n",
    "local n, f = 0 f = function() n = n + 1 return coroutine.wrap(f)() end local ok, e = pcall(f) return n, e",
    "local n, f = 0 f = function() n = n + 1 return coroutine.resume(coroutine.create(f)) end"
    " return n, f()",
    "local n, v = 0 v = setmetatable({}, {__tostring = function() n = n + 1 print(v) return 'x' end})"
    " local ok, e = pcall(print, v) return n, e",
    "local n, t = 0 t = setmetatable({}, {__index = function(_, k) n = n + 1 return table.unpack(t, 1, 1) end})"
    " local ok, e = pcall(table.unpack, t, 1, 1) return n, e",
    "local n, t = 0 t = setmetatable({}, {__len = function() n = n + 1 table.insert(t, 1) return 0 end})"
    " local ok, e = pcall(table.insert, t, 1) return n, e",
    "local n, t = 0 t = setmetatable({}, {__index = function() n = n + 1 return table.move(t, 1, 1, 1, {}) end})"
    " local ok, e = pcall(table.move, t, 1, 1, 1, {}) return n, e",
    "local n, r = 0 r = function() n = n + 1 return string.rep('x', 2, setmetatable({}, {__tostring = r})) end"
    " local ok, e = pcall(r) return n, ok",
};

/* One statement: a call of one function through one kind of caller. */
static void statement(struct luadiff_rng *r, struct text *t)
{
    const struct fn *f = &PICK(r, FUNCS);
    unsigned form = pick(r, 12), i, lines = pick(r, 3);

    for (i = 0; i < lines; i++)
        put(t, "\n");
    if (pick(r, 40) == 0) {
        put(t, "%s", PICK(r, DEPTH));
        return;
    }
    if (strcmp(f->name, "utf8.codes") == 0 && form < 4) {
        put(t, "local r = {} for p, c in utf8.codes(");
        value(r, t, K_STR);
        put(t, ") do r[#r + 1] = p .. ':' .. c end return table.concat(r, ' ')");
        return;
    }
    switch (form) {
    case 0: case 1: case 2:
        put(t, "return %s(", f->name);
        args(r, t, f, 0);
        put(t, ")");
        break;
    case 3: case 4:
        put(t, "return pcall(%s%s", f->name, strlen(f->params) ? ", " : "");
        args(r, t, f, 0);
        put(t, ")");
        break;
    case 5:
        put(t, "return xpcall(%s, %s%s", f->name, pick(r, 4) ? "H" : "HE",
            strlen(f->params) ? ", " : "");
        args(r, t, f, 0);
        put(t, ")");
        break;
    case 6:
        put(t, "local f = %s return f(", f->name);
        args(r, t, f, 0);
        put(t, ")");
        break;
    case 7:
        if (f->method) {
            put(t, "return (");
            value(r, t, K_STR);
            put(t, "):%s(", strchr(f->name, '.') + 1);
            args(r, t, f, 1);
            put(t, ")");
        } else {
            put(t, "local function g(...) return %s(...) end return pcall(g, ", f->name);
            args(r, t, f, 0);
            put(t, ")");
        }
        break;
    case 8:
        put(t, "return coroutine.wrap(%s)(", f->name);
        args(r, t, f, 0);
        put(t, ")");
        break;
    case 9:
        put(t, "return coroutine.resume(coroutine.create(%s)%s", f->name,
            strlen(f->params) ? ", " : "");
        args(r, t, f, 0);
        put(t, ")");
        break;
    case 10:
        put(t, "return pcall(pcall, %s%s", f->name, strlen(f->params) ? ", " : "");
        args(r, t, f, 0);
        put(t, ")");
        break;
    default:
        put(t, "local x = %s(", f->name);
        args(r, t, f, 0);
        put(t, ") return select('#', x), x");
        break;
    }
    if (strcmp(f->name, "string.gmatch") == 0)
        put(t, "()");
}

/* ---- the four states ---- */

struct run {
    struct luaenv *env;         /* NULL: stock */
    lua_State     *L;
    int            counting;
};

static void ser(lua_State *L, int idx, struct text *out, int depth);

/* A string with every hexadecimal address masked (tostring of a table). */
static void ser_string(const char *s, size_t len, struct text *out)
{
    size_t i;

    put(out, "\"");
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '0' && i + 2 < len && s[i + 1] == 'x' && len - i > 8) {
            size_t j = i + 2;
            while (j < len && strchr("0123456789abcdef", s[j]) != NULL && s[j] != '\0')
                j++;
            if (j - i >= 8) {
                put(out, "0x?");
                i = j - 1;
                continue;
            }
        }
        if (c < 32 || c >= 127 || c == '"' || c == '\\')
            put(out, "\\%u", c);
        else
            put(out, "%c", c);
    }
    put(out, "\"");
}

static void ser(lua_State *L, int idx, struct text *out, int depth)
{
    size_t len;
    const char *s;

    idx = lua_absindex(L, idx);
    switch (lua_type(L, idx)) {
    case LUA_TNIL:     put(out, "nil"); break;
    case LUA_TBOOLEAN: put(out, lua_toboolean(L, idx) ? "true" : "false"); break;
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx))
            put(out, "%lld", (long long)lua_tointeger(L, idx));
        else
            put(out, "%.17gf", (double)lua_tonumber(L, idx));
        break;
    case LUA_TSTRING:
        s = lua_tolstring(L, idx, &len);
        ser_string(s, len, out);
        break;
    case LUA_TTABLE: {
        lua_Integer n = (lua_Integer)lua_rawlen(L, idx), i;
        put(out, "{#%lld", (long long)n);
        for (i = 1; depth < 2 && i <= n && i <= 12; i++) {
            put(out, " ");
            lua_rawgeti(L, idx, i);
            ser(L, -1, out, depth + 1);
            lua_pop(L, 1);
        }
        lua_pushliteral(L, "n");        /* table.pack; os.date("*t") */
        lua_rawget(L, idx);
        if (!lua_isnil(L, -1)) {
            put(out, " n=");
            ser(L, -1, out, depth + 1);
        }
        lua_pop(L, 1);
        lua_pushliteral(L, "year");
        if (lua_rawget(L, idx) != LUA_TNIL)
            put(out, " date");
        lua_pop(L, 1);
        put(out, "}");
        break;
    }
    default:
        put(out, "%s", luaL_typename(L, idx));
        break;
    }
}

/* Run text in L and describe its outcome and the log; leaves the stack as
 * it found it.  Returns 1 when the worker's state spent its budget. */
static int run_text(struct run *ru, const char *text, struct text *out)
{
    lua_State *L = ru->L;
    int base = lua_gettop(L), status, heavy = 0, i, n;

    if (ru->env != NULL) {
        struct luaenv_limits lim = {.max_reductions = ru->counting ? LUADIFF_BUDGET : 0,
                                    .output_fd = -1, .max_output_bytes = 1 << 20};
        luaenv_apply(ru->env, &lim);
    }
    status = luaL_loadbufferx(L, text, strlen(text), "=input", "t");
    if (status == LUA_OK) {
        if (ru->env != NULL)
            luaenv_start(ru->env);
        status = lua_pcall(L, 0, LUA_MULTRET, 0);
        if (ru->env != NULL) {
            if (status != LUA_OK)
                luaenv_catch_end(L, status);
            luaenv_finish(ru->env);
            heavy = luaenv_fatal(ru->env) == LUAENV_FATAL_REDUCTIONS;
        }
    }
    put(out, status == LUA_OK ? "ok" : "error");
    n = lua_gettop(L);
    for (i = base + 1; i <= n; i++) {
        put(out, " ");
        ser(L, i, out, 0);
    }
    lua_settop(L, base);
    lua_getglobal(L, "LOG");
    if (lua_type(L, -1) == LUA_TTABLE && lua_rawlen(L, -1) > 0) {
        put(out, " log:");
        ser(L, -1, out, 1);
    }
    lua_pop(L, 1);
    lua_newtable(L);
    lua_setglobal(L, "LOG");
    return heavy;
}

/* Stock's outcome of a heavy statement, in a child given LUADIFF_HEAVY_MS:
 * 1 with its text in out when it finished, 0 when it did not. */
static int stock_in_child(struct run *stock, const char *text, struct text *out)
{
    int fds[2], status, done = 0;
    pid_t pid;
    struct pollfd p;
    char buf[4096];
    ssize_t k;

    if (pipe(fds) != 0)
        abort();
    pid = fork();
    if (pid < 0)
        abort();
    if (pid == 0) {
        struct text t = {0};
        close(fds[0]);
        run_text(stock, text, &t);
        if (t.len > 0 && write(fds[1], t.p, t.len) < 0)
            _exit(1);
        _exit(0);
    }
    close(fds[1]);
    p.fd = fds[0];
    p.events = POLLIN;
    if (poll(&p, 1, LUADIFF_HEAVY_MS) > 0) {
        while ((k = read(fds[0], buf, sizeof buf)) > 0) {
            put(out, "%.*s", (int)k, buf);
            done = 1;
        }
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    close(fds[0]);
    return done;
}

/* The fourth state: stock with charge_open, as tests/tools/lua_meter
 * measures (charge.c alone, paying into a count). */
struct program {
    struct run    stock, on, off, meter;
    struct charge charge;
    uint64_t      charged;
};

static void count_pay(lua_State *L, void *ud, uint64_t n)
{
    (void)L;
    *(uint64_t *)ud += n;
}

static int program_open(struct program *p)
{
    memset(p, 0, sizeof *p);
    p->stock.L = luaL_newstate();
    p->on.env = luaenv_new();
    p->off.env = luaenv_new();
    if (p->stock.L == NULL || p->on.env == NULL || p->off.env == NULL)
        return -1;
    luaL_openlibs(p->stock.L);
    p->meter.L = luaL_newstate();
    if (p->meter.L == NULL)
        return -1;
    luaL_openlibs(p->meter.L);
    p->charge.pay = count_pay;
    p->charge.ud = &p->charged;
    charge_open(p->meter.L, &p->charge);
    p->on.L = luaenv_state(p->on.env);
    p->on.counting = 1;
    p->off.L = luaenv_state(p->off.env);
    return 0;
}

static void program_close(struct program *p)
{
    if (p->stock.L != NULL)
        lua_close(p->stock.L);
    if (p->meter.L != NULL)
        lua_close(p->meter.L);
    luaenv_free(p->on.env);
    luaenv_free(p->off.env);
}

/* Run one statement in the four states; 0 when they agree, 1 when it was
 * heavy and stock did not finish it, -1 when they differ. */
static int compare(struct program *p, const char *text, struct luadiff_stats *st,
                   char *report, size_t cap)
{
    struct text a = {0}, b = {0}, c = {0}, d = {0};
    int rc = 0;

    st->statements++;
    if (getenv("LUADIFF_TRACE"))
        fprintf(stderr, "stmt: %s\n", text);
    if (run_text(&p->on, text, &b)) {
        st->heavy++;
        if (getenv("LUADIFF_SHOW_HEAVY"))
            fprintf(stderr, "heavy: %s\n", text);
        if (stock_in_child(&p->stock, text, &a)) {
            snprintf(report, cap, "statement: %s\nstock:     %s\ncounting:  %s (budget spent)\n",
                     text, a.p, b.p);
            rc = -1;
        } else {
            rc = 1;             /* the states now differ by what ran of it: end the program */
        }
        goto out;
    }
    run_text(&p->stock, text, &a);
    run_text(&p->off, text, &c);
    run_text(&p->meter, text, &d);
    st->compared++;
    if (strcmp(a.p, b.p) != 0 || strcmp(a.p, c.p) != 0 || strcmp(a.p, d.p) != 0) {
        snprintf(report, cap, "statement: %s\nstock:     %s\ncounting:  %s\nuncounted: %s\n"
                 "charge.c:  %s\n", text, a.p, b.p, c.p, d.p);
        rc = -1;
    }
out:
    if (rc < 0)
        st->differences++;
    free(a.p);
    free(b.p);
    free(c.p);
    free(d.p);
    return rc;
}

/* Stock print writes to stdout: send it to /dev/null meanwhile. */
static int quiet_begin(void)
{
    int saved, null;

    fflush(stdout);
    saved = dup(STDOUT_FILENO);
    null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
        dup2(null, STDOUT_FILENO);
        close(null);
    }
    return saved;
}

static void quiet_end(int saved)
{
    fflush(stdout);
    if (saved >= 0) {
        dup2(saved, STDOUT_FILENO);
        close(saved);
    }
}

static int prelude(struct program *p, char *report, size_t cap)
{
    struct luadiff_stats ignore = {0};

    return compare(p, PRELUDE, &ignore, report, cap);
}

int luadiff_program(struct luadiff_rng *r, unsigned max_statements,
                    struct luadiff_stats *st, char *report, size_t cap)
{
    struct program p;
    unsigned i, n = 1 + pick(r, max_statements);
    int rc = 0, saved = quiet_begin();

    if (program_open(&p) != 0 || prelude(&p, report, cap) != 0) {
        rc = -1;
        goto out;
    }
    st->programs++;
    for (i = 0; i < n && rc == 0; i++) {
        struct text t = {0};
        statement(r, &t);
        rc = compare(&p, t.p, st, report, cap);
        free(t.p);
    }
    if (rc > 0)
        rc = 0;
out:
    program_close(&p);
    quiet_end(saved);
    return rc;
}

int luadiff_statement(const char *text, struct luadiff_stats *st, char *report, size_t cap)
{
    struct program p;
    int rc, saved = quiet_begin();

    rc = program_open(&p) != 0 || prelude(&p, report, cap) != 0 ? -1
         : compare(&p, text, st, report, cap) < 0 ? -1 : 0;
    program_close(&p);
    quiet_end(saved);
    return rc;
}
