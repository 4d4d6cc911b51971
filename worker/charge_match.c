/* Runs in: zygote, worker */
/*
 * charge_match.c - string.find, string.match, string.gmatch and string.gsub
 * with their work counted (contract: charge.h).
 *
 * Lua 5.3's patterns, with the stock functions' results and error messages;
 * every step of the matcher (a character tried against a pattern item, a
 * recursion, a byte compared) is counted, and the count is charged as it
 * grows (every CHUNK steps), so a pattern that backtracks exponentially
 * ends at the budget instead of running for hours in C.  The stock
 * functions cannot be bounded: they never return to anything that counts.
 */
#include "worker/charge.h"

#include <ctype.h>
#include <lauxlib.h>
#include <lua.h>
#include <string.h>

#include "proto/mutant.h"

#define MAXCCALLS      200          /* the matcher's recursion bound, as stock */
#define MAXCAPTURES    32           /* LUA_MAXCAPTURES of the stock library */
#define CAP_UNFINISHED (-1)
#define CAP_POSITION   (-2)
#define L_ESC          '%'
#define SPECIALS       "^$*+?.([%-"
#define CHUNK          4096         /* steps between charges */

#define uchar(c) ((unsigned char)(c))

struct ms {
    const char *src_init, *src_end, *p_end;
    lua_State  *L;
    struct charge *charge;
    uint64_t    steps;              /* counted, not yet charged */
    uint64_t    bytes;              /* compared by memcmp/memchr, not yet charged */
    int         matchdepth;
    int         level;
    struct {
        const char *init;
        ptrdiff_t   len;
    } capture[MAXCAPTURES];
};

/* Charge what was counted (and may raise). */
static void settle(struct ms *ms)
{
    uint64_t units = ms->steps / CHARGE_MATCH_STEPS + ms->bytes / CHARGE_BYTES;

    ms->steps %= CHARGE_MATCH_STEPS;
    ms->bytes %= CHARGE_BYTES;
    if (MUTANT(MATCH_STEPS))
        units = 0;                      /* mutant: matching is free */
    charge_pay(ms->L, ms->charge, units);
}

static void step(struct ms *ms, uint64_t n)
{
    ms->steps += n;
    if (ms->steps >= CHUNK)
        settle(ms);
}

static void scanned(struct ms *ms, size_t n)
{
    ms->bytes += n;
    if (ms->bytes >= (uint64_t)CHUNK * CHARGE_BYTES)
        settle(ms);
}

static const char *match(struct ms *ms, const char *s, const char *p);

static int check_capture(struct ms *ms, int l)
{
    l -= '1';
    if (l < 0 || l >= ms->level || ms->capture[l].len == CAP_UNFINISHED)
        return luaL_error(ms->L, "invalid capture index %%%d", l + 1);
    return l;
}

static int capture_to_close(struct ms *ms)
{
    int level = ms->level;

    for (level--; level >= 0; level--)
        if (ms->capture[level].len == CAP_UNFINISHED)
            return level;
    return luaL_error(ms->L, "invalid pattern capture");
}

static const char *class_end(struct ms *ms, const char *p)
{
    switch (*p++) {
    case L_ESC:
        if (p == ms->p_end)
            luaL_error(ms->L, "malformed pattern (ends with '%%')");
        return p + 1;
    case '[':
        if (*p == '^')
            p++;
        do {                        /* look for a ']' */
            if (p == ms->p_end)
                luaL_error(ms->L, "malformed pattern (missing ']')");
            if (*(p++) == L_ESC && p < ms->p_end)
                p++;                /* skip escapes (e.g. '%]') */
        } while (*p != ']');
        return p + 1;
    default:
        return p;
    }
}

static int match_class(int c, int cl)
{
    int res;

    switch (tolower(cl)) {
    case 'a': res = isalpha(c); break;
    case 'c': res = iscntrl(c); break;
    case 'd': res = isdigit(c); break;
    case 'g': res = isgraph(c); break;
    case 'l': res = islower(c); break;
    case 'p': res = ispunct(c); break;
    case 's': res = isspace(c); break;
    case 'u': res = isupper(c); break;
    case 'w': res = isalnum(c); break;
    case 'x': res = isxdigit(c); break;
    case 'z': res = (c == 0); break;    /* deprecated, as stock */
    default: return cl == c;
    }
    return isupper(cl) ? !res : res;
}

/* c against the set [ ... ] from p (the '[') to ec (the ']'). */
static int match_bracket_class(struct ms *ms, int c, const char *p, const char *ec)
{
    int sig = 1;

    if (*(p + 1) == '^') {
        sig = 0;
        p++;
    }
    while (++p < ec) {
        step(ms, 1);
        if (*p == L_ESC) {
            p++;
            if (match_class(c, uchar(*p)))
                return sig;
        } else if (*(p + 1) == '-' && p + 2 < ec) {
            p += 2;
            if (uchar(*(p - 2)) <= c && c <= uchar(*p))
                return sig;
        } else if (uchar(*p) == c) {
            return sig;
        }
    }
    return !sig;
}

static int single_match(struct ms *ms, const char *s, const char *p, const char *ep)
{
    int c;

    step(ms, 1);
    if (s >= ms->src_end)
        return 0;
    c = uchar(*s);
    switch (*p) {
    case '.': return 1;
    case L_ESC: return match_class(c, uchar(*(p + 1)));
    case '[': return match_bracket_class(ms, c, p, ep - 1);
    default: return uchar(*p) == c;
    }
}

static const char *match_balance(struct ms *ms, const char *s, const char *p)
{
    if (p >= ms->p_end - 1)
        luaL_error(ms->L, "malformed pattern (missing arguments to '%%b')");
    if (*s != *p)
        return NULL;
    {
        int b = *p, e = *(p + 1), cont = 1;
        const char *from = s;

        while (++s < ms->src_end) {
            if (*s == e) {
                if (--cont == 0) {
                    step(ms, (uint64_t)(s - from));
                    return s + 1;
                }
            } else if (*s == b) {
                cont++;
            }
        }
        step(ms, (uint64_t)(s - from));
    }
    return NULL;
}

static const char *max_expand(struct ms *ms, const char *s, const char *p, const char *ep)
{
    ptrdiff_t i = 0;

    while (single_match(ms, s + i, p, ep))
        i++;
    while (i >= 0) {                /* try with the longest run first */
        const char *res = match(ms, s + i, ep + 1);
        if (res != NULL)
            return res;
        i--;
    }
    return NULL;
}

static const char *min_expand(struct ms *ms, const char *s, const char *p, const char *ep)
{
    for (;;) {
        const char *res = match(ms, s, ep + 1);
        if (res != NULL)
            return res;
        if (single_match(ms, s, p, ep))
            s++;
        else
            return NULL;
    }
}

static const char *start_capture(struct ms *ms, const char *s, const char *p, int what)
{
    const char *res;
    int level = ms->level;

    if (level >= MAXCAPTURES)
        luaL_error(ms->L, "too many captures");
    ms->capture[level].init = s;
    ms->capture[level].len = what;
    ms->level = level + 1;
    if ((res = match(ms, s, p)) == NULL)
        ms->level--;
    return res;
}

static const char *end_capture(struct ms *ms, const char *s, const char *p)
{
    int l = capture_to_close(ms);
    const char *res;

    ms->capture[l].len = s - ms->capture[l].init;
    if ((res = match(ms, s, p)) == NULL)
        ms->capture[l].len = CAP_UNFINISHED;
    return res;
}

static const char *match_capture(struct ms *ms, const char *s, int l)
{
    size_t len;

    l = check_capture(ms, l);
    len = (size_t)ms->capture[l].len;      /* a position capture: huge, never fits */
    if ((size_t)(ms->src_end - s) < len)
        return NULL;
    scanned(ms, len);
    if (memcmp(ms->capture[l].init, s, len) == 0)
        return s + len;
    return NULL;
}

static const char *match(struct ms *ms, const char *s, const char *p)
{
    if (ms->matchdepth-- == 0)
        luaL_error(ms->L, "pattern too complex");
    step(ms, 1);
init:
    if (p != ms->p_end) {
        switch (*p) {
        case '(':
            if (*(p + 1) == ')')
                s = start_capture(ms, s, p + 2, CAP_POSITION);
            else
                s = start_capture(ms, s, p + 1, CAP_UNFINISHED);
            break;
        case ')':
            s = end_capture(ms, s, p + 1);
            break;
        case '$':
            if (p + 1 != ms->p_end)
                goto dflt;          /* not the end of the pattern: a plain '$' */
            s = (s == ms->src_end) ? s : NULL;
            break;
        case L_ESC:
            switch (*(p + 1)) {
            case 'b':
                s = match_balance(ms, s, p + 2);
                if (s != NULL) {
                    p += 4;
                    goto init;
                }
                break;
            case 'f': {
                const char *ep;
                char previous;

                p += 2;
                if (*p != '[')
                    luaL_error(ms->L, "missing '[' after '%%f' in pattern");
                ep = class_end(ms, p);
                previous = (s == ms->src_init) ? '\0' : *(s - 1);
                if (!match_bracket_class(ms, uchar(previous), p, ep - 1) &&
                    match_bracket_class(ms, uchar(*s), p, ep - 1)) {
                    p = ep;
                    goto init;
                }
                s = NULL;
                break;
            }
            case '0': case '1': case '2': case '3': case '4':
            case '5': case '6': case '7': case '8': case '9':
                s = match_capture(ms, s, uchar(*(p + 1)));
                if (s != NULL) {
                    p += 2;
                    goto init;
                }
                break;
            default:
                goto dflt;
            }
            break;
        default:
        dflt: {
            const char *ep = class_end(ms, p);

            if (!single_match(ms, s, p, ep)) {
                if (*ep == '*' || *ep == '?' || *ep == '-') {
                    p = ep + 1;     /* accept the empty match */
                    goto init;
                }
                s = NULL;
            } else {
                switch (*ep) {
                case '?': {
                    const char *res = match(ms, s + 1, ep + 1);
                    if (res != NULL) {
                        s = res;
                    } else {
                        p = ep + 1;
                        goto init;
                    }
                    break;
                }
                case '+':
                    s = max_expand(ms, s + 1, p, ep);
                    break;
                case '*':
                    s = max_expand(ms, s, p, ep);
                    break;
                case '-':
                    s = min_expand(ms, s, p, ep);
                    break;
                default:
                    s++;
                    p = ep;
                    goto init;
                }
            }
            break;
        }
        }
    }
    ms->matchdepth++;
    return s;
}

static void push_onecapture(struct ms *ms, int i, const char *s, const char *e)
{
    if (i >= ms->level) {
        if (i == 0)                 /* ms->level == 0 too: the whole match */
            lua_pushlstring(ms->L, s, (size_t)(e - s));
        else
            luaL_error(ms->L, "invalid capture index %%%d", i + 1);
    } else {
        ptrdiff_t l = ms->capture[i].len;
        if (l == CAP_UNFINISHED)
            luaL_error(ms->L, "unfinished capture");
        if (l == CAP_POSITION)
            lua_pushinteger(ms->L, (ms->capture[i].init - ms->src_init) + 1);
        else
            lua_pushlstring(ms->L, ms->capture[i].init, (size_t)l);
    }
}

static int push_captures(struct ms *ms, const char *s, const char *e)
{
    int i, nlevels = (ms->level == 0 && s) ? 1 : ms->level;

    luaL_checkstack(ms->L, nlevels, "too many captures");
    for (i = 0; i < nlevels; i++)
        push_onecapture(ms, i, s, e);
    return nlevels;
}

/* No special characters in p[0..l) (a NUL ends a strpbrk: look past it). */
static int nospecials(const char *p, size_t l)
{
    size_t upto = 0;

    do {
        if (strpbrk(p + upto, SPECIALS))
            return 0;
        upto += strlen(p + upto) + 1;
    } while (upto <= l);
    return 1;
}

/* The first s2[0..l2) in s1[0..l1), counting the bytes memchr and memcmp
 * look at. */
static const char *memfind(struct ms *ms, const char *s1, size_t l1, const char *s2, size_t l2)
{
    const char *init;

    if (l2 == 0)
        return s1;
    if (l2 > l1)
        return NULL;
    l2--;                           /* the first byte is memchr's */
    l1 -= l2;
    while (l1 > 0 && (init = memchr(s1, *s2, l1)) != NULL) {
        scanned(ms, (size_t)(init - s1) + 1 + l2);
        init++;
        if (memcmp(init, s2 + 1, l2) == 0)
            return init - 1;
        l1 -= (size_t)(init - s1);
        s1 = init;
    }
    scanned(ms, l1);
    return NULL;
}

static lua_Integer posrelat(lua_Integer pos, size_t len)
{
    if (pos >= 0)
        return pos;
    if (0u - (size_t)pos > len)
        return 0;
    return (lua_Integer)len + pos + 1;
}

static void prepstate(struct ms *ms, lua_State *L, const char *s, size_t ls, const char *p,
                      size_t lp)
{
    ms->L = L;
    ms->charge = lua_touserdata(L, lua_upvalueindex(1));
    ms->steps = ms->bytes = 0;
    ms->matchdepth = MAXCCALLS;
    ms->src_init = s;
    ms->src_end = s + ls;
    ms->p_end = p + lp;
}

static void reprepstate(struct ms *ms)
{
    ms->level = 0;
}

static int find_aux(lua_State *L, int find)
{
    size_t ls, lp;
    const char *s = luaL_checklstring(L, 1, &ls);
    const char *p = luaL_checklstring(L, 2, &lp);
    lua_Integer init = posrelat(luaL_optinteger(L, 3, 1), ls);
    struct ms ms;

    if (init < 1)
        init = 1;
    else if (init > (lua_Integer)ls + 1) {     /* start after the string's end */
        lua_pushnil(L);
        return 1;
    }
    prepstate(&ms, L, s, ls, p, lp);
    if (find && (lua_toboolean(L, 4) || nospecials(p, lp))) {
        const char *s2 = memfind(&ms, s + init - 1, ls - (size_t)init + 1, p, lp);
        settle(&ms);
        if (s2) {
            lua_pushinteger(L, (s2 - s) + 1);
            lua_pushinteger(L, (lua_Integer)((s2 - s) + (ptrdiff_t)lp));
            return 2;
        }
    } else {
        const char *s1 = s + init - 1;
        int anchor = (*p == '^');

        if (anchor) {
            p++;
            lp--;
            ms.p_end = p + lp;
        }
        do {
            const char *res;
            reprepstate(&ms);
            if ((res = match(&ms, s1, p)) != NULL) {
                settle(&ms);
                if (find) {
                    lua_pushinteger(L, (s1 - s) + 1);
                    lua_pushinteger(L, res - s);
                    return push_captures(&ms, NULL, 0) + 2;
                }
                return push_captures(&ms, s1, res);
            }
        } while (s1++ < ms.src_end && !anchor);
        settle(&ms);
    }
    lua_pushnil(L);
    return 1;
}

int charge_str_find(lua_State *L)
{
    return find_aux(L, 1);
}

int charge_str_match(lua_State *L)
{
    return find_aux(L, 0);
}

/* gmatch's iterator: upvalues 1 the charge, 2 the subject, 3 the pattern,
 * 4 the state. */
struct gmatch {
    const char *src, *p, *lastmatch;
    struct ms   ms;
};

static int gmatch_aux(lua_State *L)
{
    struct gmatch *gm = lua_touserdata(L, lua_upvalueindex(4));
    const char *src;

    gm->ms.L = L;
    for (src = gm->src; src <= gm->ms.src_end; src++) {
        const char *e;
        reprepstate(&gm->ms);
        if ((e = match(&gm->ms, src, gm->p)) != NULL && e != gm->lastmatch) {
            gm->src = gm->lastmatch = e;
            settle(&gm->ms);
            return push_captures(&gm->ms, src, e);
        }
    }
    gm->src = src;
    settle(&gm->ms);
    return 0;
}

int charge_str_gmatch(lua_State *L)
{
    size_t ls, lp;
    const char *s = luaL_checklstring(L, 1, &ls);
    const char *p = luaL_checklstring(L, 2, &lp);
    struct gmatch *gm;

    lua_settop(L, 2);               /* the subject and the pattern stay alive */
    gm = lua_newuserdata(L, sizeof *gm);
    prepstate(&gm->ms, L, s, ls, p, lp);
    gm->src = s;
    gm->p = p;
    gm->lastmatch = NULL;
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_pushcclosure(L, gmatch_aux, 4);
    return 1;
}

/* The replacement string (index 3) for the match s..e; its bytes are
 * handled one by one. */
static void add_s(struct ms *ms, luaL_Buffer *b, const char *s, const char *e)
{
    size_t l, i;
    lua_State *L = ms->L;
    const char *news = lua_tolstring(L, 3, &l);

    charge_pay(L, ms->charge, l / CHARGE_EACH_BYTES);
    for (i = 0; i < l; i++) {
        if (news[i] != L_ESC) {
            luaL_addchar(b, news[i]);
            continue;
        }
        i++;                        /* skip ESC */
        if (!isdigit(uchar(news[i]))) {
            if (news[i] != L_ESC)
                luaL_error(L, "invalid use of '%c' in replacement string", L_ESC);
            luaL_addchar(b, news[i]);
        } else if (news[i] == '0') {
            scanned(ms, (size_t)(e - s));
            luaL_addlstring(b, s, (size_t)(e - s));
        } else {
            size_t n;
            push_onecapture(ms, news[i] - '1', s, e);
            luaL_tolstring(L, -1, &n);  /* a position capture becomes text */
            lua_remove(L, -2);
            scanned(ms, n);
            luaL_addvalue(b);
        }
    }
}

static void add_value(struct ms *ms, luaL_Buffer *b, const char *s, const char *e, int tr)
{
    lua_State *L = ms->L;
    size_t n;

    switch (tr) {
    case LUA_TFUNCTION: {
        int k;
        lua_pushvalue(L, 3);
        k = push_captures(ms, s, e);
        lua_call(L, k, 1);
        break;
    }
    case LUA_TTABLE:
        push_onecapture(ms, 0, s, e);
        lua_gettable(L, 3);
        break;
    default:                        /* a number or a string */
        add_s(ms, b, s, e);
        return;
    }
    if (!lua_toboolean(L, -1)) {    /* nil or false: keep the original text */
        lua_pop(L, 1);
        lua_pushlstring(L, s, (size_t)(e - s));
    } else if (!lua_isstring(L, -1)) {
        luaL_error(L, "invalid replacement value (a %s)", luaL_typename(L, -1));
    }
    lua_tolstring(L, -1, &n);
    scanned(ms, n);
    luaL_addvalue(b);
}

int charge_str_gsub(lua_State *L)
{
    size_t srcl, lp;
    const char *src = luaL_checklstring(L, 1, &srcl);
    const char *p = luaL_checklstring(L, 2, &lp);
    const char *lastmatch = NULL;
    int tr = lua_type(L, 3);
    lua_Integer max_s = luaL_optinteger(L, 4, (lua_Integer)srcl + 1);
    int anchor = (*p == '^');
    lua_Integer n = 0;
    struct ms ms;
    luaL_Buffer b;

    luaL_argcheck(L, tr == LUA_TNUMBER || tr == LUA_TSTRING || tr == LUA_TFUNCTION ||
                  tr == LUA_TTABLE, 3, "string/function/table expected");
    luaL_buffinit(L, &b);
    if (anchor) {
        p++;
        lp--;
    }
    prepstate(&ms, L, src, srcl, p, lp);
    while (n < max_s) {
        const char *e;
        reprepstate(&ms);
        if ((e = match(&ms, src, p)) != NULL && e != lastmatch) {
            n++;
            add_value(&ms, &b, src, e, tr);
            src = lastmatch = e;
        } else if (src < ms.src_end) {
            luaL_addchar(&b, *src++);
        } else {
            break;
        }
        if (anchor)
            break;
    }
    scanned(&ms, (size_t)(ms.src_end - src));
    luaL_addlstring(&b, src, (size_t)(ms.src_end - src));
    settle(&ms);
    luaL_pushresult(&b);
    lua_pushinteger(L, n);
    return 2;
}
