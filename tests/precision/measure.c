/*
 * measure.c - the precision suite's measuring harness: runs a Lua 5.3
 * program under STOCK liblua5.3 (the Debian library, not sandboxd's worker)
 * and measures what it needs, by the definitions sandboxd documents for its
 * limits (docs/protocol.md, section 4):
 *
 *   instructions  Lua VM instructions, counted exactly: a count hook with
 *                 count 1 on every thread (a coroutine inherits the hook of
 *                 the thread that creates it).
 *   charges       the documented charge for library work (charges.h).
 *   reductions_need = instructions + charges.
 *   heap_need     the smallest heap cap, in bytes of Lua's own allocation
 *                 requests (what max_heap counts), at which the program
 *                 completes with the value it returns uncapped.  Found by
 *                 bisection with a capping allocator under which every
 *                 refused growth gets a full collection and a retry (the
 *                 allocator's comment says how), so this is the most the
 *                 program holds live plus what it asks for, not the peak the
 *                 normal collector pace happens to leave behind.
 *
 * The program runs in the library surface sandboxd exposes (docs/protocol.md,
 * section 10): the stock functions, with io, package, require, debug,
 * dofile, loadfile, string.dump and every os function but time, clock, date
 * and difftime removed, and unpack an alias of table.unpack.  print converts
 * its arguments as Lua's does and writes nothing.  The collector keeps stock
 * Lua's parameters.
 *
 * Usage:
 *   measure version           {"lua": ..., "charges": ...}
 *   measure run [--cap N] [--hook N] FILE
 *                             one run (--hook: the count hook's period, 1
 *                             by default, 0 for none): {"ok", "value" or
 *                             "error" and "memory", "instructions",
 *                             "charges", "peak", "base",
 *                             "buffer_collections", "cpu_ms"}
 *   measure need FILE         the full measurement: {"value", "instructions",
 *                             "charges", "reductions_need", "heap_need",
 *                             "peak_uncapped", "base", "trials", "cpu_ms",
 *                             "run_cpu_ms", "completes_at_double",
 *                             "completes_at_half"}
 * Each prints one JSON line on stdout; exit status 0, or 1 when the program
 * fails uncapped (need: the error is printed), 2 on a usage or system error.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "tests/precision/charges.h"

/* ---- a growable text buffer (outside the Lua heap) ---- */

struct text {
    char  *s;
    size_t len, cap;
};

static void text_grow(struct text *t, size_t more)
{
    if (t->len + more + 1 <= t->cap)
        return;
    while (t->len + more + 1 > t->cap)
        t->cap = t->cap ? t->cap * 2 : 256;
    t->s = realloc(t->s, t->cap);
    if (t->s == NULL) {
        fputs("measure: out of memory\n", stderr);
        exit(2);
    }
}

static void text_add(struct text *t, const char *s, size_t n)
{
    text_grow(t, n);
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = '\0';
}

static void text_printf(struct text *t, const char *fmt, ...)
{
    char buf[128];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0)
        text_add(t, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

static void text_quote(struct text *t, const char *s, size_t n)
{
    size_t i;

    text_add(t, "\"", 1);
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            text_add(t, e, 2);
        } else if (c < 0x20 || c == 0x7f) {
            text_printf(t, "\\u%04x", c);
        } else {
            text_add(t, (const char *)&c, 1);
        }
    }
    text_add(t, "\"", 1);
}

/* ---- the capping, counting allocator ---- */

/*
 * Lua's core meets a refused growth with an emergency full collection and
 * one retry (luaM_realloc_), so under a cap the garbage of its own blocks
 * never counts against a program.  lauxlib's string buffers (luaL_Buffer,
 * behind string.format, gsub, rep, table.concat, ...) grow through the
 * allocator directly and fail at once, so whether a buffer's growth fits
 * would depend on how much garbage the collector's pace happened to leave.
 * The harness gives buffers what the core gives its own blocks: a refused
 * buffer growth runs a full collection and is tried once more.  The heap
 * need is then the most the program ever holds live plus what it asks for
 * at that moment, whatever the collector's pace.
 *
 * The collection runs on the running thread (the hook below follows it
 * through every call and return), from inside the C function that owns the
 * buffer: a point where that function could call lua_gc itself, with the
 * buffer's box anchored on its stack.  A buffer's growth is told from a
 * core block's by the allocator's return address: probe_buffer_sites()
 * records the call sites lauxlib grows a buffer from.
 */

struct heap {
    size_t   used, peak, cap;   /* cap 0: none */
    uint64_t buffer_collections;
};

#define MAX_SITES   4
#define PROBE_FIRST 3000        /* a buffer's first box */
#define PROBE_GROWN 103000      /* the same box grown */

static void      *g_sites[MAX_SITES];
static int        g_nsites, g_probing, g_collecting;
static lua_State *g_running;    /* the thread that made the last call or return */

static int is_buffer_site(void *ra)
{
    int i;
    for (i = 0; i < g_nsites; i++)
        if (g_sites[i] == ra)
            return 1;
    return 0;
}

static int fits(const struct heap *h, size_t grow)
{
    return h->cap == 0 || (grow <= h->cap && h->used <= h->cap - grow);
}

/* A full collection for a refused buffer growth: 1 if it ran. */
static int collect_for_buffer(struct heap *h)
{
    if (g_running == NULL || g_collecting || lua_status(g_running) != LUA_OK)
        return 0;
    g_collecting = 1;
    lua_gc(g_running, LUA_GCCOLLECT, 0);
    g_collecting = 0;
    h->buffer_collections++;
    return 1;
}

static void *cap_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    struct heap *h = ud;
    size_t old = ptr ? osize : 0;
    void *p;
    int fresh;

    if (nsize == 0) {
        free(ptr);
        h->used -= old;
        return NULL;
    }
    if (nsize > old) {
        void *ra = __builtin_return_address(0);
        if (g_probing && (nsize == PROBE_FIRST || nsize == PROBE_GROWN) && g_nsites < MAX_SITES
            && !is_buffer_site(ra))
            g_sites[g_nsites++] = ra;
        if (!fits(h, nsize - old)
            && !(is_buffer_site(ra) && collect_for_buffer(h) && fits(h, nsize - old)))
            return NULL;
    }
    fresh = ptr == NULL;
    p = realloc(ptr, nsize);
    if (p == NULL)
        return nsize <= old ? ptr : NULL;
    if (nsize > old)
        charges_allocated(fresh, osize, nsize);
    h->used = h->used - old + nsize;
    if (h->used > h->peak)
        h->peak = h->used;
    return p;
}

static int probe_body(lua_State *L)
{
    luaL_Buffer b;
    char *p;

    luaL_buffinit(L, &b);
    p = luaL_prepbuffsize(&b, PROBE_FIRST);
    memset(p, 'x', PROBE_FIRST);
    luaL_addsize(&b, PROBE_FIRST);
    p = luaL_prepbuffsize(&b, PROBE_GROWN - PROBE_FIRST);
    memset(p, 'y', PROBE_GROWN - PROBE_FIRST);
    luaL_addsize(&b, PROBE_GROWN - PROBE_FIRST);
    luaL_pushresult(&b);
    return 1;
}

/* Record where lauxlib grows a buffer from: its first box, then a growth. */
static void probe_buffer_sites(void)
{
    struct heap h = {0, 0, 0, 0};
    lua_State *L = lua_newstate(cap_alloc, &h);

    if (L == NULL) {
        fputs("measure: cannot create a Lua state\n", stderr);
        exit(2);
    }
    g_probing = 1;
    lua_pushcfunction(L, probe_body);
    if (lua_pcall(L, 0, 1, 0) != LUA_OK || lua_rawlen(L, -1) != PROBE_GROWN) {
        fputs("measure: the buffer probe failed\n", stderr);
        exit(2);
    }
    g_probing = 0;
    lua_close(L);
    if (g_nsites == 0) {
        fputs("measure: found no call site of lauxlib's buffers\n", stderr);
        exit(2);
    }
}

/* ---- the hook: instructions, and the running thread ---- */

static uint64_t g_instructions;
static int      g_period = 1;

static void hook(lua_State *L, lua_Debug *ar)
{
    if (ar->event == LUA_HOOKCOUNT)
        g_instructions += (uint64_t)g_period;
    else
        g_running = L;
}

/* ---- the library surface ---- */

static int quiet_print(lua_State *L)
{
    int i, n = lua_gettop(L);
    luaL_Buffer b;

    luaL_buffinit(L, &b);
    for (i = 1; i <= n; i++) {
        if (i > 1)
            luaL_addchar(&b, '\t');
        luaL_tolstring(L, i, NULL);
        luaL_addvalue(&b);
    }
    luaL_addchar(&b, '\n');
    luaL_pushresult(&b);
    return 0;
}

static void open_surface(lua_State *L)
{
    static const char *const gone[] = {"io", "package", "require", "debug", "dofile",
                                       "loadfile", NULL};
    static const char *const os_kept[] = {"time", "clock", "date", "difftime", NULL};
    int i;

    luaL_openlibs(L);
    for (i = 0; gone[i] != NULL; i++) {
        lua_pushnil(L);
        lua_setglobal(L, gone[i]);
    }
    lua_getglobal(L, "string");
    lua_pushnil(L);
    lua_setfield(L, -2, "dump");
    lua_pop(L, 1);
    lua_getglobal(L, "os");
    lua_newtable(L);
    for (i = 0; os_kept[i] != NULL; i++) {
        lua_getfield(L, -2, os_kept[i]);
        lua_setfield(L, -2, os_kept[i]);
    }
    lua_setglobal(L, "os");
    lua_pop(L, 1);
    lua_getglobal(L, "table");
    lua_getfield(L, -1, "unpack");
    lua_setglobal(L, "unpack");
    lua_pop(L, 1);
    lua_pushcfunction(L, quiet_print);
    lua_setglobal(L, "print");
}

/* ---- values as JSON, by the rules of docs/protocol.md section 8 ---- */

static void json_number(struct text *t, lua_State *L, int idx)
{
    if (lua_isinteger(L, idx)) {
        text_printf(t, "%lld", (long long)lua_tointeger(L, idx));
    } else {
        double d = lua_tonumber(L, idx);
        if (isnan(d) || isinf(d))
            text_add(t, "null", 4);
        else {
            char buf[64];
            snprintf(buf, sizeof buf, "%.17g", d);
            if (strpbrk(buf, ".e") == NULL)
                strcat(buf, ".0");      /* a float stays a float */
            text_add(t, buf, strlen(buf));
        }
    }
}

static int json_value(struct text *t, lua_State *L, int idx, int depth);

/* 1 when the table at idx has exactly the keys 1..n, n >= 1 (or is empty). */
static int is_array(lua_State *L, int idx, lua_Integer *n)
{
    lua_Integer count = 0, max = 0;

    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        lua_pop(L, 1);
        count++;
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1) {
            lua_pop(L, 1);
            return 0;
        }
        if (lua_tointeger(L, -1) > max)
            max = lua_tointeger(L, -1);
    }
    *n = count;
    return max == count;
}

static int encodable(lua_State *L, int idx)
{
    int ty = lua_type(L, idx);
    return ty != LUA_TFUNCTION && ty != LUA_TUSERDATA && ty != LUA_TLIGHTUSERDATA
           && ty != LUA_TTHREAD;
}

struct member {
    struct text name, value;
};

static int member_cmp(const void *a, const void *b)
{
    const struct text *x = &((const struct member *)a)->name;
    const struct text *y = &((const struct member *)b)->name;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->s, y->s, n);
    return c != 0 ? c : (x->len > y->len) - (x->len < y->len);
}

static int json_table(struct text *t, lua_State *L, int idx, int depth)
{
    lua_Integer n, i;

    if (depth > 100 || !lua_checkstack(L, 4))
        return -1;
    if (is_array(L, idx, &n)) {
        text_add(t, "[", 1);
        for (i = 1; i <= n; i++) {
            lua_rawgeti(L, idx, i);
            if (i > 1)
                text_add(t, ",", 1);
            if (!encodable(L, -1))
                text_add(t, "null", 4);
            else if (json_value(t, L, lua_gettop(L), depth + 1) != 0)
                return -1;
            lua_pop(L, 1);
        }
        text_add(t, "]", 1);
        return 0;
    }
    /* Members in key order, so that equal tables encode equally (Lua's
     * table order changes with the string hash seed, from run to run). */
    {
        struct member *m = NULL;
        size_t count = 0, cap = 0, k;
        int rc = 0;

        lua_pushnil(L);
        while (lua_next(L, idx) != 0) {
            int key = lua_gettop(L) - 1, ty = lua_type(L, key);
            struct text name = {0}, value = {0};
            if (!encodable(L, -1) || ty == LUA_TTABLE || !encodable(L, key)) {
                lua_pop(L, 1);
                continue;
            }
            if (ty == LUA_TSTRING) {
                size_t len;
                const char *str = lua_tolstring(L, key, &len);
                text_quote(&name, str, len);
            } else if (ty == LUA_TNUMBER) {
                struct text raw = {0};
                if (lua_isinteger(L, key))
                    text_printf(&raw, "%lld", (long long)lua_tointeger(L, key));
                else
                    text_printf(&raw, "%.17g", lua_tonumber(L, key));
                text_quote(&name, raw.s, raw.len);
                free(raw.s);
            } else {
                text_add(&name, lua_toboolean(L, key) ? "\"true\"" : "\"false\"",
                         lua_toboolean(L, key) ? 6 : 7);
            }
            if (json_value(&value, L, lua_gettop(L), depth + 1) != 0)
                rc = -1;
            lua_pop(L, 1);
            if (count == cap) {
                cap = cap ? cap * 2 : 8;
                m = realloc(m, cap * sizeof *m);
                if (m == NULL) {
                    fputs("measure: out of memory\n", stderr);
                    exit(2);
                }
            }
            m[count].name = name;
            m[count].value = value;
            count++;
        }
        qsort(m, count, sizeof *m, member_cmp);
        text_add(t, "{", 1);
        for (k = 0; k < count; k++) {
            if (k > 0)
                text_add(t, ",", 1);
            text_add(t, m[k].name.s, m[k].name.len);
            text_add(t, ":", 1);
            text_add(t, m[k].value.s, m[k].value.len);
            free(m[k].name.s);
            free(m[k].value.s);
        }
        free(m);
        text_add(t, "}", 1);
        return rc;
    }
}

static int json_value(struct text *t, lua_State *L, int idx, int depth)
{
    switch (lua_type(L, idx)) {
    case LUA_TNIL:
        text_add(t, "null", 4);
        return 0;
    case LUA_TBOOLEAN:
        if (lua_toboolean(L, idx))
            text_add(t, "true", 4);
        else
            text_add(t, "false", 5);
        return 0;
    case LUA_TNUMBER:
        json_number(t, L, idx);
        return 0;
    case LUA_TSTRING: {
        size_t len;
        const char *s = lua_tolstring(L, idx, &len);
        text_quote(t, s, len);
        return 0;
    }
    case LUA_TTABLE:
        return json_table(t, L, idx, depth);
    default:
        text_add(t, "null", 4);
        return 0;
    }
}

/* ---- one run ---- */

struct run {
    /* in */
    const char *code;
    size_t      code_len;
    size_t      cap;
    int         hook;           /* count hook period, 0: none */
    /* out */
    int         ok;             /* completed */
    int         memory;         /* failed on a refused allocation */
    struct text value;          /* JSON of the results, when ok */
    struct text error;          /* the error message, when not */
    uint64_t    instructions, charges, buffer_collections;
    size_t      peak, base;
    double      cpu_ms;
};

static double cpu_ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int is_memory_message(const char *s)
{
    return strstr(s, "not enough memory") != NULL;
}

static void run_once(struct run *r)
{
    struct heap h = {0, 0, 0, 0};
    lua_State *L = lua_newstate(cap_alloc, &h);
    int status, top, n, i, mask;
    double t0;

    if (L == NULL) {
        fputs("measure: cannot create a Lua state\n", stderr);
        exit(2);
    }
    open_surface(L);
    lua_gc(L, LUA_GCCOLLECT, 0);
    r->base = h.used;
    r->charges = 0;
    charges_install(L, &r->charges);
    r->value.len = r->error.len = 0;
    h.peak = h.used;
    h.cap = r->cap;
    g_instructions = 0;
    g_period = r->hook;
    top = lua_gettop(L);
    t0 = cpu_ms_now();
    status = luaL_loadbufferx(L, r->code, r->code_len, "=input", "t");
    if (status == LUA_OK) {
        mask = LUA_MASKCALL | LUA_MASKRET | (r->hook > 0 ? LUA_MASKCOUNT : 0);
        g_running = L;
        lua_sethook(L, hook, mask, r->hook > 0 ? r->hook : 0);
        charges_running(1);
        status = lua_pcall(L, 0, LUA_MULTRET, 0);
        charges_running(0);
        lua_sethook(L, NULL, 0, 0);
        g_running = NULL;
    }
    r->cpu_ms = cpu_ms_now() - t0;
    r->instructions = g_instructions;
    r->peak = h.peak;
    r->buffer_collections = h.buffer_collections;
    h.cap = 0;                  /* encoding the results is not the program's work */
    r->ok = status == LUA_OK;
    r->memory = 0;
    if (r->ok) {
        n = lua_gettop(L) - top;
        if (n == 0) {
            text_add(&r->value, "null", 4);
        } else if (n == 1) {
            if (json_value(&r->value, L, top + 1, 1) != 0)
                r->ok = 0;
        } else {
            text_add(&r->value, "[", 1);
            for (i = 1; i <= n && r->ok; i++) {
                if (i > 1)
                    text_add(&r->value, ",", 1);
                if (json_value(&r->value, L, top + i, 1) != 0)
                    r->ok = 0;
            }
            text_add(&r->value, "]", 1);
        }
        if (!r->ok)
            text_add(&r->error, "cannot encode the value", 23);
    } else {
        const char *msg = lua_tostring(L, -1);
        if (msg == NULL)
            msg = "(error object is not a string)";
        text_add(&r->error, msg, strlen(msg));
        r->memory = status == LUA_ERRMEM || is_memory_message(msg);
    }
    lua_close(L);
}

/* Completes, with the value `want`. */
static int completes(struct run *r, size_t cap, const struct text *want)
{
    r->cap = cap;
    r->hook = 0;
    run_once(r);
    return r->ok && r->value.len == want->len && memcmp(r->value.s, want->s, want->len) == 0;
}

/* ---- commands ---- */

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    struct text t = {0};
    char buf[65536];
    size_t n;

    if (f == NULL) {
        fprintf(stderr, "measure: %s: %s\n", path, strerror(errno));
        exit(2);
    }
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        text_add(&t, buf, n);
    fclose(f);
    text_grow(&t, 0);
    *len = t.len;
    return t.s;
}

static void print_run(const struct run *r)
{
    struct text out = {0};

    text_printf(&out, "{\"ok\":%s,", r->ok ? "true" : "false");
    if (r->ok) {
        text_add(&out, "\"value\":", 8);
        text_add(&out, r->value.s, r->value.len);
    } else {
        text_add(&out, "\"error\":", 8);
        text_quote(&out, r->error.s, r->error.len);
        text_printf(&out, ",\"memory\":%s", r->memory ? "true" : "false");
    }
    text_printf(&out, ",\"instructions\":%llu", (unsigned long long)r->instructions);
    text_printf(&out, ",\"charges\":%llu", (unsigned long long)r->charges);
    text_printf(&out, ",\"peak\":%zu,\"base\":%zu", r->peak, r->base);
    text_printf(&out, ",\"buffer_collections\":%llu", (unsigned long long)r->buffer_collections);
    text_printf(&out, ",\"cpu_ms\":%.1f}\n", r->cpu_ms);
    fputs(out.s, stdout);
    free(out.s);
}

/* The bisection's resolution: the heap need is exact to within this. */
static size_t resolution(size_t hi)
{
    size_t r = hi / 4096;
    return r < 256 ? 256 : r;
}

static int cmd_need(const char *code, size_t len)
{
    struct run ref = {0}, r = {0};
    struct text out = {0};
    size_t lo, hi, mid, need;
    int trials = 0, at_double, at_half;
    double cpu = 0;

    ref.code = r.code = code;
    ref.code_len = r.code_len = len;
    ref.hook = 1;
    run_once(&ref);
    cpu += ref.cpu_ms;
    if (!ref.ok) {
        print_run(&ref);
        return 1;
    }
    /* The uncapped run never reaches its own peak as a cap, so that cap
     * completes; the base state alone fills a cap of its size. */
    hi = ref.peak;
    lo = ref.base;
    while (hi - lo > resolution(hi)) {
        mid = lo + (hi - lo) / 2;
        trials++;
        if (completes(&r, mid, &ref.value))
            hi = mid;
        else
            lo = mid;
        cpu += r.cpu_ms;
    }
    need = hi;
    at_double = completes(&r, need * 2, &ref.value);
    cpu += r.cpu_ms;
    at_half = completes(&r, need / 2, &ref.value);
    cpu += r.cpu_ms;

    text_add(&out, "{\"value\":", 9);
    text_add(&out, ref.value.s, ref.value.len);
    text_printf(&out, ",\"instructions\":%llu", (unsigned long long)ref.instructions);
    text_printf(&out, ",\"charges\":%llu", (unsigned long long)ref.charges);
    text_printf(&out, ",\"reductions_need\":%llu",
                (unsigned long long)(ref.instructions + ref.charges));
    text_printf(&out, ",\"heap_need\":%zu,\"peak_uncapped\":%zu,\"base\":%zu", need, ref.peak,
                ref.base);
    text_printf(&out, ",\"trials\":%d,\"cpu_ms\":%.1f,\"run_cpu_ms\":%.1f", trials, cpu,
                ref.cpu_ms);
    text_printf(&out, ",\"completes_at_double\":%s,\"completes_at_half\":%s}\n",
                at_double ? "true" : "false", at_half ? "true" : "false");
    fputs(out.s, stdout);
    free(out.s);
    return 0;
}

static void usage(void)
{
    fputs("usage: measure version\n"
          "       measure run [--cap BYTES] [--hook N] FILE\n"
          "       measure need FILE\n", stderr);
    exit(2);
}

static size_t parse_size(const char *s)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || *s == '\0' || *end != '\0')
        usage();
    return (size_t)v;
}

int main(int argc, char **argv)
{
    size_t len;
    char *code;

    probe_buffer_sites();
    if (argc >= 2 && strcmp(argv[1], "version") == 0) {
        printf("{\"lua\":\"%s\",\"charges\":\"%s\"}\n", LUA_RELEASE, charges_rates);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "need") == 0) {
        code = read_file(argv[2], &len);
        return cmd_need(code, len);
    }
    if (argc >= 3 && strcmp(argv[1], "run") == 0) {
        struct run r = {0};
        int i;
        r.hook = 1;
        for (i = 2; i < argc - 1; i += 2) {
            if (i + 1 >= argc - 1)
                usage();
            if (strcmp(argv[i], "--cap") == 0)
                r.cap = parse_size(argv[i + 1]);
            else if (strcmp(argv[i], "--hook") == 0)
                r.hook = (int)parse_size(argv[i + 1]);
            else
                usage();
        }
        code = read_file(argv[argc - 1], &len);
        r.code = code;
        r.code_len = len;
        run_once(&r);
        print_run(&r);
        return r.ok ? 0 : 1;
    }
    usage();
    return 2;
}
