/*
 * lua_meter - what a chunk needs, measured with the stock liblua5.3: its
 * instructions (a count hook of period 1, every thread), the charges of its
 * library work (worker/charge.h, applied as that header describes),
 * and its peak heap (a counting allocator).  sandboxd bills the
 * instructions plus the charges as reductions; a chunk that this meter
 * measures at B reductions and H bytes completes in sandboxd under
 * max_reductions 2B and max_heap 2H.
 *
 *   lua_meter [--stock] [--pause N] [-e CODE | FILE]
 *
 * Prints one line of JSON: {"ok": true|false, "instructions": N,
 * "charges": N, "reductions": N, "heap_peak": N, "results": [...]} where
 * results are the chunk's return values (strings, numbers, booleans, null;
 * other values as their type name) or, when ok is false, [the error as a
 * string], and "heap_base": the heap when the chunk starts (the standard
 * libraries; sandboxd's environment is about the same size).  heap_peak
 * counts from there.  --stock leaves the stock library functions in place
 * (and charges nothing, strings included; for comparing results).  --pause N sets the collector's pause
 * (stock: 200; sandboxd runs 100 under a heap cap, so its peak is lower).
 *
 * Everything here but charge.c and pattern.c is stock Lua.
 */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/charge.h"

struct meter {
    uint64_t instructions, charges;
    size_t   used, peak, base;
    size_t   header;
    int      running;               /* the chunk runs: strings are charged */
    int      stock;                 /* --stock: no charges at all */
};

static struct meter M;

static void *meter_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    struct meter *m = ud;
    size_t old = ptr ? osize : 0;
    void *p;

    if (nsize == 0) {
        free(ptr);
        m->used -= old;
        return NULL;
    }
    p = realloc(ptr, nsize);
    if (p == NULL)
        return NULL;
    if (ptr == NULL && osize == LUA_TSTRING && m->running && !m->stock)
        m->charges += charge_string(nsize - m->header - 1);
    m->used = m->used - old + nsize;
    if (m->used > m->peak)
        m->peak = m->used;
    return p;
}

static void meter_pay(lua_State *L, void *ud, uint64_t n)
{
    (void)L;
    ((struct meter *)ud)->charges += n;
}

static void count_hook(lua_State *L, lua_Debug *ar)
{
    (void)L;
    (void)ar;
    M.instructions++;
}

/* Whether s[0..len) is UTF-8 (any code point up to 0x10FFFF). */
static int is_utf8(const unsigned char *s, size_t len)
{
    size_t i = 0;

    while (i < len) {
        int n = s[i] < 0x80 ? 0 : s[i] >= 0xc2 && s[i] < 0xe0 ? 1 : s[i] >= 0xe0 && s[i] < 0xf0 ? 2
              : s[i] >= 0xf0 && s[i] < 0xf5 ? 3 : -1;
        if (n < 0 || len - i <= (size_t)n)
            return n == 0;
        for (int k = 1; k <= n; k++)
            if ((s[i + k] & 0xc0) != 0x80)
                return 0;
        i += (size_t)n + 1;
    }
    return 1;
}

/* A string as JSON: UTF-8 text as itself, other bytes as {"bytes": hex}. */
static void put_string(const char *s, size_t len)
{
    if (!is_utf8((const unsigned char *)s, len)) {
        printf("{\"bytes\": \"");
        for (size_t i = 0; i < len; i++)
            printf("%02x", (unsigned char)s[i]);
        printf("\"}");
        return;
    }
    putchar('"');
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void put_value(lua_State *L, int i)
{
    size_t len;
    const char *s;

    switch (lua_type(L, i)) {
    case LUA_TNIL: printf("null"); break;
    case LUA_TBOOLEAN: printf(lua_toboolean(L, i) ? "true" : "false"); break;
    case LUA_TNUMBER:
        if (lua_isinteger(L, i))
            printf(LUA_INTEGER_FMT, (LUAI_UACINT)lua_tointeger(L, i));
        else {
            char buf[64];
            double d = (double)lua_tonumber(L, i);
            if (d != d || d - d != 0) {         /* NaN, infinity: no JSON */
                printf("null");
                break;
            }
            snprintf(buf, sizeof buf, "%.17g", d);
            printf("%s%s", buf, strpbrk(buf, ".e") ? "" : ".0");
        }
        break;
    case LUA_TSTRING:
        s = lua_tolstring(L, i, &len);
        put_string(s, len);
        break;
    default:
        s = luaL_typename(L, i);
        put_string(s, strlen(s));
        break;
    }
}

int main(int argc, char **argv)
{
    static struct charge c = {.pay = meter_pay, .ud = &M};
    int stock = 0, i = 1, status, top, pause = 0;
    const char *code = NULL, *file = NULL;
    lua_State *L;

    if (i < argc && strcmp(argv[i], "--stock") == 0) {
        stock = 1;
        M.stock = 1;
        i++;
    }
    if (i + 1 < argc && strcmp(argv[i], "--pause") == 0) {
        pause = atoi(argv[i + 1]);
        i += 2;
    }
    if (i + 1 < argc && strcmp(argv[i], "-e") == 0)
        code = argv[i + 1];
    else if (i < argc)
        file = argv[i];
    else {
        fprintf(stderr, "usage: lua_meter [--stock] [-e CODE | FILE]\n");
        return 2;
    }
    M.header = charge_string_header();
    L = lua_newstate(meter_alloc, &M);
    if (L == NULL || M.header == 0)
        return 2;
    luaL_openlibs(L);
    if (!stock)
        charge_open(L, &c);
    if (pause > 0)
        lua_gc(L, LUA_GCSETPAUSE, pause);
    status = code ? luaL_loadbuffer(L, code, strlen(code), "=input") : luaL_loadfile(L, file);
    if (status != LUA_OK) {
        printf("{\"ok\": false, \"instructions\": 0, \"charges\": 0, \"reductions\": 0, "
               "\"heap_base\": 0, \"heap_peak\": 0, \"results\": [");
        put_value(L, -1);
        printf("]}\n");
        return 0;
    }
    top = lua_gettop(L) - 1;
    M.base = M.used;
    M.peak = M.used;
    M.running = 1;
    lua_sethook(L, count_hook, LUA_MASKCOUNT, 1);
    status = lua_pcall(L, 0, LUA_MULTRET, 0);
    lua_sethook(L, NULL, 0, 0);
    M.running = 0;
    printf("{\"ok\": %s, \"instructions\": %llu, \"charges\": %llu, \"reductions\": %llu, "
           "\"heap_base\": %zu, \"heap_peak\": %zu, \"results\": [",
           status == LUA_OK ? "true" : "false", (unsigned long long)M.instructions,
           (unsigned long long)M.charges, (unsigned long long)(M.instructions + M.charges),
           M.base, M.peak - M.base);
    for (int k = top + 1; k <= lua_gettop(L); k++) {
        if (k > top + 1)
            printf(", ");
        put_value(L, k);
    }
    printf("]}\n");
    return 0;
}
