/* Runs in: zygote, worker */
/*
 * pattern.c - string.find, string.match, string.gmatch and string.gsub,
 * every step of their work counted and charged (contract: charge.h, which
 * defines the step).
 *
 * The functions give Lua 5.3's results and error messages, at the same
 * moments (tests/unit/test_pattern_diff.c compares them with the stock
 * library's on generated patterns); the engine is designed here, from the
 * reference manual's account of patterns (section 6.4.1).
 *
 * In each call the pattern is compiled into items, one per element: a
 * single-character item (a character, '.', or a class or set held as a
 * 256-bit set, so that a test is one bit) with its repetition, a capture's
 * opening or close, a position capture, %b, %f, a back-reference, a final
 * '$' and the end of the pattern.  An item is compiled when the matcher
 * first takes it up, so a malformed element raises when the matcher
 * reaches it, never earlier, as in stock (a pattern whose bad part is never
 * reached matches without error).  A fault that depends on the captures (a
 * ')' with none open, a back-reference to one not closed, a 33rd capture)
 * is known when the item is compiled: the captures open at an item are the
 * same on every path that reaches it.
 *
 * The matcher walks the items and calls itself where a choice may have to
 * be undone (at a capture, a repetition, an optional item); it counts its
 * nested calls and raises "pattern too complex" at stock's depth, so the
 * same patterns fail.  The items live on the C stack while they are few and
 * in a userdata on the Lua stack once they are more, so a Lua error
 * anywhere leaks nothing.
 */
#include "worker/charge.h"

#include <lauxlib.h>
#include <lua.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#include "proto/mutant.h"

#define CAPTURES_MAX 32         /* captures in one pattern, as stock */
#define DEPTH_MAX    200        /* nested matcher calls, as stock */
#define PAY_EVERY    4096       /* steps between payments while the budget is far */
#define ITEMS_HERE   32         /* items held on the C stack */
#define SETS_HERE    8          /* compiled sets held on the C stack */

#define CAP_OPEN     (-1)       /* struct capture's len: not closed yet */
#define CAP_POSITION (-2)       /* a position capture */

#define uc(c) ((unsigned char)(c))

enum kind {
    K_CHAR, K_ANY, K_SET,       /* single-character items */
    K_OPEN, K_POSITION, K_CLOSE,
    K_BALANCE, K_FRONTIER, K_BACKREF,
    K_END,                      /* '$' as the pattern's last character */
    K_DONE,                     /* the end of the pattern */
    K_FAULT                     /* a malformed element: raises when taken up */
};

enum fault { F_PERCENT, F_BRACKET, F_BALANCE, F_FRONTIER, F_CAPTURES, F_CLOSE, F_INDEX };

struct item {
    unsigned char kind;         /* enum kind */
    unsigned char rep;          /* single-character items: 0, '*', '+', '-' or '?' */
    unsigned char a, b;         /* K_CHAR: the character; K_BALANCE: the pair;
                                 * K_CLOSE, K_BACKREF: the capture;
                                 * K_FAULT: enum fault and (F_INDEX) the digit */
    uint32_t set;               /* K_SET, K_FRONTIER: index (below NCLASSES: a class) */
};

typedef uint32_t set256[8];

/* The classes of the C locale (the worker never changes it), as stock's
 * <ctype.h> tests see them: lower-case letter, then its complement. */
#define NCLASSES 22
static const char class_letters[] = "acdglpsuwxz";
static const set256 classes[NCLASSES] = {
    {0x00000000, 0x00000000, 0x07fffffe, 0x07fffffe, 0x00000000, 0x00000000, 0x00000000, 0x00000000},  /* %a */
    {0xffffffff, 0x00000000, 0x00000000, 0x80000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000},  /* %c */
    {0x00000000, 0x03ff0000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000},  /* %d */
    {0x00000000, 0xfffffffe, 0xffffffff, 0x7fffffff, 0x00000000, 0x00000000, 0x00000000, 0x00000000},  /* %g */
    {0x00000000, 0x00000000, 0x00000000, 0x07fffffe, 0x00000000, 0x00000000, 0x00000000, 0x00000000},  /* %l */
    {0x00000000, 0xfc00fffe, 0xf8000001, 0x78000001, 0x00000000, 0x00000000, 0x00000000, 0x00000000},  /* %p */
    {0x00003e00, 0x00000001, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000},  /* %s */
    {0x00000000, 0x00000000, 0x07fffffe, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000},  /* %u */
    {0x00000000, 0x03ff0000, 0x07fffffe, 0x07fffffe, 0x00000000, 0x00000000, 0x00000000, 0x00000000},  /* %w */
    {0x00000000, 0x03ff0000, 0x0000007e, 0x0000007e, 0x00000000, 0x00000000, 0x00000000, 0x00000000},  /* %x */
    {0x00000001, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000},  /* %z */
    {0xffffffff, 0xffffffff, 0xf8000001, 0xf8000001, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},  /* %A */
    {0x00000000, 0xffffffff, 0xffffffff, 0x7fffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},  /* %C */
    {0xffffffff, 0xfc00ffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},  /* %D */
    {0xffffffff, 0x00000001, 0x00000000, 0x80000000, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},  /* %G */
    {0xffffffff, 0xffffffff, 0xffffffff, 0xf8000001, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},  /* %L */
    {0xffffffff, 0x03ff0001, 0x07fffffe, 0x87fffffe, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},  /* %P */
    {0xffffc1ff, 0xfffffffe, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},  /* %S */
    {0xffffffff, 0xffffffff, 0xf8000001, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},  /* %U */
    {0xffffffff, 0xfc00ffff, 0xf8000001, 0xf8000001, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},  /* %W */
    {0xffffffff, 0xfc00ffff, 0xffffff81, 0xffffff81, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},  /* %X */
    {0xfffffffe, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},  /* %Z */
};

struct capture {
    const char *at;
    ptrdiff_t   len;            /* CAP_OPEN, CAP_POSITION or the length */
};

struct matcher {
    lua_State      *L;
    struct charge  *charge;
    const char     *subject, *end;      /* *end is the string's NUL */
    const char     *next, *pat_end;     /* where the next item compiles from */
    struct item    *items;
    set256         *sets;
    size_t          nitems, cap_items, nsets, cap_sets;
    int             items_slot, sets_slot;  /* stack slots of their userdata, or 0 */
    int             c_level;                /* captures before the next item */
    unsigned char   c_open[CAPTURES_MAX];   /* ... and which are not closed */
    int             level, depth;           /* the match being tried */
    struct capture  cap[CAPTURES_MAX];
    uint64_t        steps, limit;           /* steps not paid; pay at limit */
    uint64_t        room;                   /* what the budget had left then */
    size_t          bytes;                  /* bytes not paid (< CHARGE_BYTES) */
    struct item     items_here[ITEMS_HERE];
    set256          sets_here[SETS_HERE];
};

/* ---- charging ---- */

/* The steps after which to pay: PAY_EVERY, or fewer when the budget has
 * less room, so that a match stops within one step of the budget. */
static void set_limit(struct matcher *m)
{
    struct charge *c = m->charge;

    m->room = c->room != NULL ? c->room(m->L, c->ud) : UINT64_MAX;
    m->limit = PAY_EVERY;
    if (m->room < PAY_EVERY / CHARGE_MATCH_STEPS)
        m->limit = (m->room + 1) * CHARGE_MATCH_STEPS;
}

/* Pay the whole steps counted (may raise).  Steps counted in bulk (a run,
 * positions passed) may go past the room: then the step that crosses it
 * is paid, which ends the work, and not the rest. */
static void settle(struct matcher *m)
{
    uint64_t units = m->steps / CHARGE_MATCH_STEPS;

    m->steps %= CHARGE_MATCH_STEPS;
    if (units > m->room)
        units = m->room + 1;
    if (MUTANT(MATCH_STEPS))
        units = 0;                      /* mutant: matching is free */
    charge_pay(m->L, m->charge, units);
}

/* The same, with more to match: then the next limit. */
static void pay(struct matcher *m)
{
    settle(m);
    set_limit(m);
}

/* Raise the error fmt (as luaL_error), the steps counted paid first: an
 * error must not make the work before it free. */
static void fail(struct matcher *m, const char *fmt, ...)
{
    va_list ap;

    settle(m);
    luaL_where(m->L, 1);
    va_start(ap, fmt);
    lua_pushvfstring(m->L, fmt, ap);
    va_end(ap);
    lua_concat(m->L, 2);
    lua_error(m->L);
}

static inline void tick(struct matcher *m, uint64_t n)
{
    m->steps += n;
    if (m->steps >= m->limit)
        pay(m);
}

/* n bytes compared or copied: a step per CHARGE_BYTES. */
static void scanned(struct matcher *m, size_t n)
{
    m->bytes += n;
    if (m->bytes >= CHARGE_BYTES) {
        uint64_t units = m->bytes / CHARGE_BYTES;

        m->bytes %= CHARGE_BYTES;
        tick(m, units * CHARGE_MATCH_STEPS);
    }
}

/* ---- sets ---- */

static inline int in_set(const uint32_t *set, unsigned c)
{
    return (set[c >> 5] >> (c & 31)) & 1;
}

static inline void set_add(uint32_t *set, unsigned c)
{
    set[c >> 5] |= 1u << (c & 31);
}

/* The class named by %c: its index in classes, or -1 (then %c is c). */
static int class_of(unsigned char c)
{
    unsigned char lower = c >= 'A' && c <= 'Z' ? (unsigned char)(c + 'a' - 'A') : c;
    const char *at = lower != 0 ? strchr(class_letters, lower) : NULL;

    if (at == NULL)
        return -1;
    return (int)(at - class_letters) + (lower != c ? NCLASSES / 2 : 0);
}

/* The ']' that closes the set opening at q ('['), or NULL.  The first
 * element (after a '^') may be ']' itself, and '%' takes the character
 * after it. */
static const char *set_close(const char *q, const char *e)
{
    q++;
    if (q < e && *q == '^')
        q++;
    do {
        if (q == e)
            return NULL;
        if (*q++ == '%' && q < e)
            q++;
    } while (q == e || *q != ']');
    return q;
}

/* The set of the elements between q ('[') and close: "%x" a class (or the
 * character x), "a-z" a range (the character after '-' ends it, even '%'),
 * anything else itself; '^' first, the complement. */
static void set_build(uint32_t *set, const char *q, const char *close)
{
    int complement = 0;

    memset(set, 0, sizeof(set256));
    q++;
    if (*q == '^') {
        complement = 1;
        q++;
    }
    for (; q < close; q++) {
        if (*q == '%') {
            int k;

            q++;                        /* may be close itself: then ']' */
            k = class_of(uc(*q));
            if (k < 0) {
                set_add(set, uc(*q));
            } else {
                for (int i = 0; i < 8; i++)
                    set[i] |= classes[k][i];
            }
        } else if (q + 2 < close && q[1] == '-') {
            for (unsigned c = uc(q[0]); c <= uc(q[2]); c++)
                set_add(set, c);
            q += 2;
        } else {
            set_add(set, uc(*q));
        }
    }
    if (complement)
        for (int i = 0; i < 8; i++)
            set[i] = ~set[i];
}

static const uint32_t *set_of(const struct matcher *m, uint32_t i)
{
    return i < NCLASSES ? classes[i] : m->sets[i - NCLASSES];
}

/* ---- compiling ---- */

/* Room for one more item or set: the C stack's arrays, then a userdata
 * twice as large each time, kept in *slot: a slot reserved before a
 * luaL_Buffer was started (the push and the replace leave the stack as it
 * was, so the buffer is undisturbed), or, when *slot is 0, the top of the
 * stack, where it stays (the functions return the values above it). */
static void *grow(struct matcher *m, void *old, size_t n, size_t *cap, size_t size, int *slot)
{
    void *nu;

    if (n < *cap)
        return old;
    nu = lua_newuserdata(m->L, *cap * 2 * size);
    memcpy(nu, old, n * size);
    if (*slot != 0)
        lua_replace(m->L, *slot);
    else
        *slot = lua_gettop(m->L);
    *cap *= 2;
    return nu;
}

static void add_item(struct matcher *m, struct item it)
{
    m->items = grow(m, m->items, m->nitems, &m->cap_items, sizeof *m->items, &m->items_slot);
    m->items[m->nitems++] = it;
}

static uint32_t add_set(struct matcher *m, const char *q, const char *close)
{
    m->sets = grow(m, m->sets, m->nsets, &m->cap_sets, sizeof *m->sets, &m->sets_slot);
    set_build(m->sets[m->nsets], q, close);
    return (uint32_t)(NCLASSES + m->nsets++);
}

static struct item fault(enum fault f, int digit)
{
    struct item it = {K_FAULT, 0, (unsigned char)f, (unsigned char)digit, 0};

    return it;
}

/* The single-character item at q: it, and *q past it and its repetition. */
static struct item compile_single(struct matcher *m, const char **qp)
{
    const char *q = *qp, *e = m->pat_end;
    struct item it = {K_CHAR, 0, uc(*q), 0, 0};

    if (*q == '%') {
        int k;

        if (q + 1 == e)
            return fault(F_PERCENT, 0);
        k = class_of(uc(q[1]));
        if (k >= 0) {
            it.kind = K_SET;
            it.set = (uint32_t)k;
        } else {
            it.a = uc(q[1]);
        }
        q += 2;
    } else if (*q == '[') {
        const char *close = set_close(q, e);

        if (close == NULL)
            return fault(F_BRACKET, 0);
        it.kind = K_SET;
        it.set = add_set(m, q, close);
        q = close + 1;
    } else {
        if (*q == '.')
            it.kind = K_ANY;
        q++;
    }
    if (q < e && (*q == '*' || *q == '+' || *q == '-' || *q == '?'))
        it.rep = uc(*q++);
    *qp = q;
    return it;
}

/* Compile the item at m->next (the matcher has reached it), charging a
 * step for each byte of the pattern it takes. */
static void compile_next(struct matcher *m)
{
    const char *q = m->next, *e = m->pat_end;
    struct item it = {K_DONE, 0, 0, 0, 0};

    if (q == e) {
        add_item(m, it);
        return;
    }
    switch (*q) {
    case '(':
        if (m->c_level == CAPTURES_MAX) {
            it = fault(F_CAPTURES, 0);
        } else if (q + 1 < e && q[1] == ')') {
            it.kind = K_POSITION;
            m->c_open[m->c_level++] = 0;
            q += 2;
        } else {
            it.kind = K_OPEN;
            m->c_open[m->c_level++] = 1;
            q++;
        }
        break;
    case ')': {
        int l = m->c_level - 1;

        while (l >= 0 && !m->c_open[l])
            l--;
        if (l < 0) {
            it = fault(F_CLOSE, 0);
        } else {
            it.kind = K_CLOSE;
            it.a = (unsigned char)l;
            m->c_open[l] = 0;
            q++;
        }
        break;
    }
    case '$':
        if (q + 1 == e) {
            it.kind = K_END;
            q++;
        } else {
            it = compile_single(m, &q);
        }
        break;
    case '%':
        if (q + 1 < e && q[1] == 'b') {
            if (q + 3 >= e) {
                it = fault(F_BALANCE, 0);
            } else {
                it.kind = K_BALANCE;
                it.a = uc(q[2]);
                it.b = uc(q[3]);
                q += 4;
            }
        } else if (q + 1 < e && q[1] == 'f') {
            const char *close = q + 2 < e && q[2] == '[' ? set_close(q + 2, e) : NULL;

            if (q + 2 >= e || q[2] != '[') {
                it = fault(F_FRONTIER, 0);
            } else if (close == NULL) {
                it = fault(F_BRACKET, 0);
            } else {
                it.kind = K_FRONTIER;
                it.set = add_set(m, q + 2, close);
                q = close + 1;
            }
        } else if (q + 1 < e && q[1] >= '0' && q[1] <= '9') {
            int l = q[1] - '1';

            if (l < 0 || l >= m->c_level || m->c_open[l]) {
                it = fault(F_INDEX, q[1] - '0');
            } else {
                it.kind = K_BACKREF;
                it.a = (unsigned char)l;
                q += 2;
            }
        } else {
            it = compile_single(m, &q);
        }
        break;
    default:
        it = compile_single(m, &q);
        break;
    }
    if (it.kind != K_FAULT) {
        tick(m, (uint64_t)(q - m->next));
        m->next = q;
    } else if (it.a == F_BRACKET) {
        tick(m, (uint64_t)(e - m->next));   /* scanned to the end for a ']' */
    }
    add_item(m, it);
}

static void raise_fault(struct matcher *m, const struct item *it)
{
    switch (it->a) {
    case F_PERCENT:  fail(m, "malformed pattern (ends with '%%')"); break;
    case F_BRACKET:  fail(m, "malformed pattern (missing ']')"); break;
    case F_BALANCE:  fail(m, "malformed pattern (missing arguments to '%%b')"); break;
    case F_FRONTIER: fail(m, "missing '[' after '%%f' in pattern"); break;
    case F_CAPTURES: fail(m, "too many captures"); break;
    case F_CLOSE:    fail(m, "invalid pattern capture"); break;
    default:         fail(m, "invalid capture index %%%d", (int)it->b); break;
    }
}

/* ---- matching ---- */

static inline int fits(const struct matcher *m, const struct item *it, unsigned c)
{
    switch (it->kind) {
    case K_CHAR: return c == it->a;
    case K_ANY:  return 1;
    default:     return in_set(set_of(m, it->set), c);
    }
}

/* How many characters from s on the single-character item matches. */
static size_t run_of(const struct matcher *m, const struct item *it, const char *s)
{
    const char *p = s, *end = m->end;

    if (it->kind == K_ANY)
        return (size_t)(end - s);
    if (it->kind == K_CHAR) {
        while (p < end && *p == (char)it->a)
            p++;
    } else {
        const uint32_t *set = set_of(m, it->set);

        while (p < end && in_set(set, uc(*p)))
            p++;
    }
    return (size_t)(p - s);
}

static const char *walk(struct matcher *m, const char *s, size_t k);

/* 1 when taking up item k at s is sure to fail at once: a compiled
 * single-character item that must match one character (no repetition, or
 * '+') where none fits.  A caller that skips the try charges its step. */
static inline int fails_at(const struct matcher *m, const char *s, size_t k)
{
    const struct item *it = &m->items[k];

    if (k >= m->nitems || it->kind > K_SET || (it->rep != 0 && it->rep != '+'))
        return 0;
    return s == m->end || !fits(m, it, uc(*s));
}

/* From at on, the first position where the first item may match (the end
 * at the latest): the positions passed are tries that would fail at once,
 * charged a step each. */
static const char *next_start(struct matcher *m, const char *at)
{
    const char *p = at, *end = m->end;
    const struct item *it = &m->items[0];

    if (m->nitems == 0 || it->kind == K_ANY || it->kind > K_SET || (it->rep != 0 && it->rep != '+'))
        return at;
    if (it->kind == K_CHAR) {
        p = memchr(at, it->a, (size_t)(end - at));
        if (p == NULL)
            p = end;
    } else {
        const uint32_t *set = set_of(m, it->set);

        while (p < end && !in_set(set, uc(*p)))
            p++;
    }
    tick(m, (uint64_t)(p - at));
    return p;
}

/* Item k repeated at most (from s on, the longest run first): where the
 * rest of the pattern, from item k + 1, matches after it, or NULL. */
static const char *longest(struct matcher *m, const char *s, size_t k, size_t run)
{
    for (;;) {
        const char *r = NULL;

        if (m->depth < DEPTH_MAX && fails_at(m, s + run, k + 1))
            tick(m, 1);                 /* the step of the try it spares */
        else
            r = walk(m, s + run, k + 1);

        if (r != NULL || run == 0)
            return r;
        run--;
    }
}

/* Item k repeated at least (s matches it): the shortest run first. */
static const char *shortest(struct matcher *m, const char *s, size_t k)
{
    for (int first = 1;; first = 0) {
        const char *r = NULL;

        if (m->depth < DEPTH_MAX && fails_at(m, s, k + 1))
            tick(m, 1);                 /* the step of the try it spares */
        else
            r = walk(m, s, k + 1);

        if (r != NULL)
            return r;
        if (s == m->end || !fits(m, &m->items[k], uc(*s)))
            return NULL;
        if (!first)
            tick(m, 1);                 /* a character after the first */
        s++;
    }
}

/* %b: from s, an opening character to its balancing close, or NULL. */
static const char *balance(struct matcher *m, const char *s, unsigned open, unsigned close)
{
    int depth = 1;

    if (s == m->end || uc(*s) != open)
        return NULL;
    for (const char *p = s + 1; p < m->end; p++) {
        if (uc(*p) == close) {
            if (--depth == 0) {
                tick(m, (uint64_t)(p - s));
                return p + 1;
            }
        } else if (uc(*p) == open) {
            depth++;
        }
    }
    tick(m, (uint64_t)(m->end - s - 1));
    return NULL;
}

/* A capture of item k opens at s (a position capture when position). */
static const char *open_capture(struct matcher *m, const char *s, size_t k, int position)
{
    const char *r;

    m->cap[m->level].at = s;
    m->cap[m->level].len = position ? CAP_POSITION : CAP_OPEN;
    m->level++;
    r = walk(m, s, k + 1);
    if (r == NULL)
        m->level--;
    return r;
}

static const char *close_capture(struct matcher *m, const char *s, size_t k, int l)
{
    const char *r;

    m->cap[l].len = s - m->cap[l].at;
    r = walk(m, s, k + 1);
    if (r == NULL)
        m->cap[l].len = CAP_OPEN;
    return r;
}

static const char *backref(struct matcher *m, const char *s, int l)
{
    ptrdiff_t len = m->cap[l].len;

    if (len < 0 || m->end - s < len)
        return NULL;                    /* a position capture never matches */
    scanned(m, (size_t)len);
    return memcmp(m->cap[l].at, s, (size_t)len) == 0 ? s + len : NULL;
}

/* The items from k on, at s: where the match ends, or NULL.  One nested
 * call: raises "pattern too complex" as the DEPTH_MAX + 1st. */
static const char *walk(struct matcher *m, const char *s, size_t k)
{
    if (m->depth == DEPTH_MAX)
        fail(m, "pattern too complex");
    m->depth++;
    for (;;) {
        struct item it;
        int hit;

        if (k == m->nitems)
            compile_next(m);
        it = m->items[k];
        tick(m, 1);
        switch (it.kind) {
        case K_DONE:
            goto done;
        case K_END:
            if (s != m->end)
                s = NULL;
            goto done;
        case K_OPEN:
        case K_POSITION:
            s = open_capture(m, s, k, it.kind == K_POSITION);
            goto done;
        case K_CLOSE:
            s = close_capture(m, s, k, it.a);
            goto done;
        case K_BALANCE:
            s = balance(m, s, it.a, it.b);
            break;
        case K_FRONTIER: {
            const uint32_t *set = set_of(m, it.set);
            unsigned before = s == m->subject ? 0 : uc(s[-1]);

            if (in_set(set, before) || !in_set(set, uc(*s)))
                s = NULL;
            break;
        }
        case K_BACKREF:
            s = backref(m, s, it.a);
            break;
        case K_FAULT:
            raise_fault(m, &it);
            break;
        default:
            hit = s < m->end && fits(m, &it, uc(*s));
            switch (it.rep) {
            case 0:
                s = hit ? s + 1 : NULL;
                break;
            case '?':
                if (hit) {
                    const char *r = walk(m, s + 1, k + 1);

                    if (r != NULL) {
                        s = r;
                        goto done;
                    }
                }
                break;
            case '*':
            case '+':
                if (hit) {
                    size_t run = run_of(m, &it, s + 1);

                    tick(m, run);
                    s = it.rep == '*' ? longest(m, s, k, run + 1)
                                      : longest(m, s + 1, k, run);
                    goto done;
                }
                if (it.rep == '+')
                    s = NULL;
                break;
            default:                    /* '-' */
                if (hit) {
                    s = shortest(m, s, k);
                    goto done;
                }
                break;
            }
            break;
        }
        if (s == NULL)
            goto done;
        k++;
    }
done:
    m->depth--;
    return s;
}

/* ---- the library functions ---- */

/* Set m up to match the pattern p..pe in the subject s (ls bytes), in a C
 * function whose upvalue 1 is the struct charge.  With reserve, pushes two
 * values: the slots where the items go once they outgrow the C stack (for
 * a caller that starts a luaL_Buffer); without, they go on top when they
 * do. */
static void start(struct matcher *m, lua_State *L, const char *s, size_t ls,
                  const char *p, const char *pe, int reserve)
{
    m->L = L;
    m->charge = lua_touserdata(L, lua_upvalueindex(1));
    m->subject = s;
    m->end = s + ls;
    m->next = p;
    m->pat_end = pe;
    m->items = m->items_here;
    m->cap_items = ITEMS_HERE;
    m->nitems = 0;
    m->sets = m->sets_here;
    m->cap_sets = SETS_HERE;
    m->nsets = 0;
    m->items_slot = m->sets_slot = 0;
    if (reserve) {
        lua_pushnil(L);
        m->items_slot = lua_gettop(L);
        lua_pushnil(L);
        m->sets_slot = lua_gettop(L);
    }
    m->c_level = 0;
    m->steps = 0;
    m->bytes = 0;
    set_limit(m);
}

/* A match tried from s: where it ends, or NULL. */
static const char *try_at(struct matcher *m, const char *s)
{
    m->level = 0;
    m->depth = 0;
    return walk(m, s, 0);
}

/* Push capture i of the match s..e (the whole match as capture 0 when
 * there is none). */
static void push_capture(struct matcher *m, int i, const char *s, const char *e)
{
    lua_State *L = m->L;

    if (i >= m->level) {
        if (i != 0)
            fail(m, "invalid capture index %%%d", i + 1);
        lua_pushlstring(L, s, (size_t)(e - s));
    } else if (m->cap[i].len == CAP_OPEN) {
        fail(m, "unfinished capture");
    } else if (m->cap[i].len == CAP_POSITION) {
        lua_pushinteger(L, (lua_Integer)(m->cap[i].at - m->subject) + 1);
    } else {
        lua_pushlstring(L, m->cap[i].at, (size_t)m->cap[i].len);
    }
}

/* Push the captures (the whole match when there are none and whole). */
static int push_captures(struct matcher *m, const char *s, const char *e, int whole)
{
    int n = m->level == 0 && whole ? 1 : m->level;

    luaL_checkstack(m->L, n, "too many captures");
    for (int i = 0; i < n; i++)
        push_capture(m, i, s, e);
    return n;
}

/* init (1-based, negative from the end) as an offset into a subject of
 * len bytes: 0 when it is after the end plus one, else 1 and *off. */
static int start_offset(lua_Integer init, size_t len, size_t *off)
{
    lua_Unsigned back = (lua_Unsigned)0 - (lua_Unsigned)init;

    if (init > 0) {
        if ((lua_Unsigned)init - 1 > len)
            return 0;
        *off = (size_t)init - 1;
    } else if (init == 0 || back > len) {
        *off = 0;
    } else {
        *off = len - (size_t)back;
    }
    return 1;
}

/* The index of the pattern's first special character, or lp. */
static size_t first_special(const char *p, size_t lp)
{
    for (size_t i = 0; i < lp; i++) {
        switch (p[i]) {
        case '^': case '$': case '*': case '+': case '?':
        case '.': case '(': case '[': case '%': case '-':
            return i;
        }
    }
    return lp;
}

static int find_aux(lua_State *L, int find)
{
    size_t ls, lp, off, special = 0;
    const char *s = luaL_checklstring(L, 1, &ls);
    const char *p = luaL_checklstring(L, 2, &lp);
    struct charge *c = lua_touserdata(L, lua_upvalueindex(1));
    struct matcher m;
    const char *at;
    int anchor;

    if (!start_offset(luaL_optinteger(L, 3, 1), ls, &off)) {
        lua_pushnil(L);
        return 1;
    }
    if (find && !lua_toboolean(L, 4))
        special = first_special(p, lp);
    if (find && (lua_toboolean(L, 4) || special == lp)) {
        const char *hit = lp == 0 ? s + off : lp > ls - off ? NULL
                        : memmem(s + off, ls - off, p, lp);
        size_t seen = hit != NULL ? (size_t)(hit - s) + lp - off : ls - off;
        uint64_t units = (uint64_t)(special + seen) / CHARGE_BYTES;
        uint64_t room = c->room != NULL && units != 0 ? c->room(L, c->ud) : UINT64_MAX;

        charge_pay(L, c, units > room ? room + 1 : units);     /* up to the crossing step */
        if (hit == NULL) {
            lua_pushnil(L);
            return 1;
        }
        lua_pushinteger(L, (lua_Integer)(hit - s) + 1);
        lua_pushinteger(L, (lua_Integer)(hit - s) + (lua_Integer)lp);
        return 2;
    }
    anchor = lp > 0 && *p == '^';
    start(&m, L, s, ls, p + anchor, p + lp, 0);
    scanned(&m, special);
    at = s + off;
    do {
        const char *e;

        if (!anchor)
            at = next_start(&m, at);
        e = try_at(&m, at);

        if (e != NULL) {
            settle(&m);
            if (!find)
                return push_captures(&m, at, e, 1);
            lua_pushinteger(L, (lua_Integer)(at - s) + 1);
            lua_pushinteger(L, (lua_Integer)(e - s));
            return push_captures(&m, NULL, NULL, 0) + 2;
        }
    } while (at++ < m.end && !anchor);
    settle(&m);
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

struct gmatch {
    size_t pos;                 /* where the next search starts */
    size_t last;                /* where the last match ended (SIZE_MAX: none) */
};

/* gmatch's iterator: upvalues 1 the charge, 2 the subject, 3 the pattern,
 * 4 its struct gmatch.  A match is not taken when it ends where the last
 * one did (an empty match just after a match). */
static int gmatch_next(lua_State *L)
{
    size_t ls, lp;
    const char *s = lua_tolstring(L, lua_upvalueindex(2), &ls);
    const char *p = lua_tolstring(L, lua_upvalueindex(3), &lp);
    struct gmatch *g = lua_touserdata(L, lua_upvalueindex(4));
    struct matcher m;

    start(&m, L, s, ls, p, p + lp, 0);
    for (const char *at = s + g->pos; at <= m.end; at++) {
        const char *e;

        at = next_start(&m, at);
        e = try_at(&m, at);

        if (e != NULL && (size_t)(e - s) != g->last) {
            g->pos = g->last = (size_t)(e - s);
            settle(&m);
            return push_captures(&m, at, e, 1);
        }
    }
    settle(&m);
    return 0;
}

int charge_str_gmatch(lua_State *L)
{
    struct gmatch *g;

    luaL_checkstring(L, 1);
    luaL_checkstring(L, 2);
    lua_settop(L, 2);
    g = lua_newuserdata(L, sizeof *g);
    g->pos = 0;
    g->last = SIZE_MAX;
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_pushcclosure(L, gmatch_next, 4);
    return 1;
}

static void add_match(struct matcher *m, luaL_Buffer *b, const char *s, const char *e)
{
    scanned(m, (size_t)(e - s));
    luaL_addlstring(b, s, (size_t)(e - s));
}

/* Add capture i of the match s..e to b, as push_capture would give it. */
static void add_capture(struct matcher *m, luaL_Buffer *b, int i, const char *s, const char *e)
{
    if (i < m->level && m->cap[i].len == CAP_POSITION) {
        lua_pushinteger(m->L, (lua_Integer)(m->cap[i].at - m->subject) + 1);
        luaL_addvalue(b);
    } else if (i >= m->level && i == 0) {
        add_match(m, b, s, e);
    } else if (i >= m->level || m->cap[i].len == CAP_OPEN) {
        push_capture(m, i, s, e);       /* raises */
    } else {
        scanned(m, (size_t)m->cap[i].len);
        luaL_addlstring(b, m->cap[i].at, (size_t)m->cap[i].len);
    }
}

/* The replacement string (argument 3) for the match s..e: "%0" the match,
 * "%1" to "%9" a capture, "%%" a '%'. */
static void add_string(struct matcher *m, luaL_Buffer *b, const char *s, const char *e)
{
    size_t l;
    const char *r = lua_tolstring(m->L, 3, &l), *rend = r + l;

    tick(m, (uint64_t)(l / CHARGE_EACH_BYTES) * CHARGE_MATCH_STEPS);
    while (r < rend) {
        const char *pc = memchr(r, '%', (size_t)(rend - r));

        if (pc == NULL) {
            luaL_addlstring(b, r, (size_t)(rend - r));
            break;
        }
        luaL_addlstring(b, r, (size_t)(pc - r));
        r = pc + 1;                     /* *rend is the string's NUL */
        if (*r == '%')
            luaL_addchar(b, '%');
        else if (*r == '0')
            add_match(m, b, s, e);
        else if (*r >= '1' && *r <= '9')
            add_capture(m, b, *r - '1', s, e);
        else
            fail(m, "invalid use of '%c' in replacement string", '%');
        r++;
    }
}

/* The replacement for the match s..e, by the type tr of argument 3. */
static void add_value(struct matcher *m, luaL_Buffer *b, const char *s, const char *e, int tr)
{
    lua_State *L = m->L;

    if (tr == LUA_TFUNCTION) {
        int n;

        pay(m);
        lua_pushvalue(L, 3);
        n = push_captures(m, s, e, 1);
        lua_call(L, n, 1);
    } else if (tr == LUA_TTABLE) {
        pay(m);
        push_capture(m, 0, s, e);
        lua_gettable(L, 3);
    } else {
        add_string(m, b, s, e);
        return;
    }
    if (!lua_toboolean(L, -1)) {        /* nil or false: the match stays */
        lua_pop(L, 1);
        add_match(m, b, s, e);
    } else if (!lua_isstring(L, -1)) {
        fail(m, "invalid replacement value (a %s)", luaL_typename(L, -1));
    } else {
        size_t n;

        lua_tolstring(L, -1, &n);
        scanned(m, n);
        luaL_addvalue(b);
    }
    set_limit(m);
}

int charge_str_gsub(lua_State *L)
{
    size_t ls, lp;
    const char *s = luaL_checklstring(L, 1, &ls);
    const char *p = luaL_checklstring(L, 2, &lp);
    int tr = lua_type(L, 3);
    lua_Integer max = luaL_optinteger(L, 4, (lua_Integer)ls + 1), n = 0;
    int anchor = lp > 0 && *p == '^';
    const char *at = s, *last = NULL;
    struct matcher m;
    luaL_Buffer b;

    luaL_argcheck(L, tr == LUA_TNUMBER || tr == LUA_TSTRING || tr == LUA_TFUNCTION ||
                  tr == LUA_TTABLE, 3, "string/function/table expected");
    start(&m, L, s, ls, p + anchor, p + lp, 1);
    luaL_buffinit(L, &b);
    while (n < max) {
        const char *e;

        if (!anchor) {
            const char *from = at;

            at = next_start(&m, at);
            luaL_addlstring(&b, from, (size_t)(at - from));
        }
        e = try_at(&m, at);

        if (e != NULL && e != last) {
            n++;
            add_value(&m, &b, at, e, tr);
            at = last = e;
        } else if (at < m.end) {
            luaL_addchar(&b, *at++);
        } else {
            break;
        }
        if (anchor)
            break;
    }
    scanned(&m, (size_t)(m.end - at));
    luaL_addlstring(&b, at, (size_t)(m.end - at));
    settle(&m);
    luaL_pushresult(&b);
    lua_pushinteger(L, n);
    return 2;
}
