/*
 * patterns.c - the pattern functions' time against stock Lua's: class-heavy,
 * set-heavy, anchored and backtracking patterns over a 1 MB subject, with
 * stock's string library, worker/pattern.c with counting off (payments
 * dropped, no room) and on (every charge added to a budget that a room
 * callback reports, as the worker's does), and, when bench/Makefile could
 * build it from git history, the engine pattern.c replaced (old_match.c)
 * with counting on.  Each figure is the best CPU time of ROUNDS runs of a
 * scenario, the variants interleaved; the table gives the ratios measured in this run.
 *
 *   patterns [--size BYTES] [--rounds N]
 *
 * Targets: the new engine at most 1.0x stock's time with counting off, and
 * at most 1.0x the old engine's with counting on.  Exit status 0 unless a
 * run failed or the variants' results differ (the figures are reported,
 * not judged: the machine may be shared).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "worker/charge.h"

#if OLD_ENGINE
int old_str_find(lua_State *L);
int old_str_match(lua_State *L);
int old_str_gmatch(lua_State *L);
int old_str_gsub(lua_State *L);
#endif

struct budget {
    uint64_t paid, max;
};

static void pay_off(lua_State *L, void *ud, uint64_t n)
{
    (void)L;
    (void)ud;
    (void)n;
}

static void pay_on(lua_State *L, void *ud, uint64_t n)
{
    struct budget *b = ud;

    b->paid += n;
    if (b->paid > b->max)
        luaL_error(L, "budget spent");
}

static uint64_t room_on(lua_State *L, void *ud)
{
    struct budget *b = ud;

    (void)L;
    return b->paid < b->max ? b->max - b->paid : 0;
}

/* The process's CPU time: on a shared machine, less sensitive than the
 * wall clock to what else runs. */
static double cpu_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void add(lua_State *L, const char *name, struct charge *c, lua_CFunction f[4])
{
    static const char *const fn[] = {"find", "match", "gmatch", "gsub"};

    lua_newtable(L);
    for (int i = 0; i < 4; i++) {
        lua_pushlightuserdata(L, c);
        lua_pushcclosure(L, f[i], 1);
        lua_setfield(L, -2, fn[i]);
    }
    lua_setglobal(L, name);
}

/* Each scenario: a name and a chunk run with F (the functions) and S (the
 * subject); it returns a value that must be the same for every variant. */
static const struct {
    const char *name, *code;
} scenarios[] = {
    {"class: gmatch %a+",
     "local n = 0 for w in F.gmatch(S, '%a+') do n = n + 1 end return n"},
    {"class: gsub %d",
     "local r, n = F.gsub(S, '%d', '#') return n"},
    {"set: gmatch [%w_%.%-]+",
     "local n = 0 for w in F.gmatch(S, '[%w_%.%-]+') do n = n + #w end return n"},
    {"set: find [^%s]+ to the end",
     "local i, n = 1, 0 while true do local a, b = F.find(S, '[^%s]+', i) "
     "if not a then return n end n = n + 1 i = b + 1 end"},
    {"anchored: match ^[%w%s%p]*$",
     "return #F.match(S, '^[%w%s%p]*$')"},
    {"anchored: match ^(.-)%s*$",
     "return #F.match(S, '^(.-)%s*$')"},
    {"backtracking: gsub %w*%d",
     "local r, n = F.gsub(S, '%w*%d', '') return n"},
    {"backtracking: find (%a+) %1",
     "local i, n = 1, 0 while true do local a, b = F.find(S, '(%a+) %1', i) "
     "if not a then return n end n = n + 1 i = b + 1 end"},
};
#define NSCEN (sizeof scenarios / sizeof scenarios[0])

static const char *const variants[] = {"string", "new_off", "new_on", "old_on"};

/* A subject of size bytes: words, numbers, names with '_', '.', '-', and
 * now and then a word repeated. */
static char *subject(size_t size)
{
    static const char *const words[] = {
        "alpha", "beta", "user_42", "x.y-z", "1234", "the", "quick", "brown", "fox",
        "v2.0", "end", "ok", "user_name", "9", "data-set", "tab\t", "line\n",
    };
    char *s = malloc(size + 1);
    uint64_t x = 88172645463325252ULL;
    size_t n = 0;

    if (s == NULL)
        exit(1);
    while (n < size) {
        const char *w;
        size_t l;

        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        w = words[x % (sizeof words / sizeof words[0])];
        l = strlen(w);
        for (int rep = (x >> 20) % 9 == 0 ? 2 : 1; rep > 0 && n < size; rep--) {
            for (size_t i = 0; i < l && n < size; i++)
                s[n++] = w[i];
            if (n < size)
                s[n++] = ' ';
        }
    }
    s[size] = '\0';
    return s;
}

int main(int argc, char **argv)
{
    size_t size = 1 << 20;
    int rounds = 5, nvar = 3, status = 0;
    struct charge off = {.pay = pay_off};
    struct budget bud = {0, UINT64_MAX / 2}, old_bud = {0, UINT64_MAX / 2};
    struct charge on = {.pay = pay_on, .ud = &bud, .room = room_on};
    lua_CFunction mine[4] = {charge_str_find, charge_str_match, charge_str_gmatch, charge_str_gsub};
    double best[NSCEN][4];
    lua_Integer result[NSCEN][4];
    lua_State *L;
    char *s;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--size") == 0 && i + 1 < argc)
            size = (size_t)atol(argv[++i]);
        else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: patterns [--size BYTES] [--rounds N]\n");
            return 2;
        }
    }
    L = luaL_newstate();
    luaL_openlibs(L);
    add(L, "new_off", &off, mine);
    add(L, "new_on", &on, mine);
#if OLD_ENGINE
    {
        static struct charge old_on = {.pay = pay_on};
        lua_CFunction old[4] = {old_str_find, old_str_match, old_str_gmatch, old_str_gsub};

        old_on.ud = &old_bud;
        add(L, "old_on", &old_on, old);
        nvar = 4;
    }
#endif
    s = subject(size);
    lua_pushlstring(L, s, size);
    lua_setglobal(L, "S");
    free(s);
    for (size_t k = 0; k < NSCEN; k++)
        for (int v = 0; v < 4; v++)
            best[k][v] = 1e30;
    for (int r = 0; r < rounds; r++) {
        for (size_t k = 0; k < NSCEN; k++) {
            for (int v = 0; v < nvar; v++) {
                double t0;

                if (luaL_loadstring(L, scenarios[k].code) != LUA_OK) {
                    fprintf(stderr, "patterns: %s\n", lua_tostring(L, -1));
                    return 1;
                }
                lua_createtable(L, 0, 2);               /* _ENV: F and S */
                lua_getglobal(L, variants[v]);
                lua_setfield(L, -2, "F");
                lua_getglobal(L, "S");
                lua_setfield(L, -2, "S");
                lua_getglobal(L, "math");
                lua_setfield(L, -2, "math");
                lua_setupvalue(L, -2, 1);
                lua_gc(L, LUA_GCCOLLECT, 0);
                t0 = cpu_us();
                if (lua_pcall(L, 0, 1, 0) != LUA_OK) {
                    fprintf(stderr, "patterns: %s (%s): %s\n", scenarios[k].name, variants[v],
                            lua_tostring(L, -1));
                    return 1;
                }
                t0 = cpu_us() - t0;
                if (t0 < best[k][v])
                    best[k][v] = t0;
                result[k][v] = lua_tointeger(L, -1);
                lua_pop(L, 1);
            }
        }
    }
    printf("pattern functions over a %zu-byte subject, best CPU time of %d rounds (ms)\n", size, rounds);
    printf("%-32s %9s %9s %7s %9s %9s %7s\n", "scenario", "stock", "new off", "ratio",
           "old on", "new on", "ratio");
    for (size_t k = 0; k < NSCEN; k++) {
        for (int v = 1; v < nvar; v++) {
            if (result[k][v] != result[k][0]) {
                printf("%s: %s gives %lld, stock %lld\n", scenarios[k].name, variants[v],
                       (long long)result[k][v], (long long)result[k][0]);
                status = 1;
            }
        }
        if (nvar == 4)
            printf("%-32s %9.2f %9.2f %6.2fx %9.2f %9.2f %6.2fx\n", scenarios[k].name,
                   best[k][0] / 1e3, best[k][1] / 1e3, best[k][1] / best[k][0],
                   best[k][3] / 1e3, best[k][2] / 1e3, best[k][2] / best[k][3]);
        else
            printf("%-32s %9.2f %9.2f %6.2fx %9s %9.2f %7s\n", scenarios[k].name,
                   best[k][0] / 1e3, best[k][1] / 1e3, best[k][1] / best[k][0],
                   "-", best[k][2] / 1e3, "-");
    }
    printf("charged: new %llu, old %llu reductions (all rounds)\n",
           (unsigned long long)bud.paid, (unsigned long long)old_bud.paid);
    lua_close(L);
    return status;
}
