/*
 * inproc.c - the floor: Lua 5.3 run inside this process, no isolation at
 * all.  Each execution gets a fresh lua_State with the standard libraries
 * (what a sandbox must at least do), runs the chunk and closes the state.
 * Prints "key=value" lines like loadgen.
 *
 *   inproc latency -n N          fresh state + `return 1+1`, one after another
 *   inproc tput -c PROCS -n N    the same in PROCS forked processes, total rate
 *   inproc tools -n CALLS        a Lua loop calling a C function CALLS times
 *   inproc cpu -n REPEAT -e CODE wall and CPU time of CODE in a fresh state
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "timing.h"

static void fail(const char *what)
{
    fprintf(stderr, "inproc: %s\n", what);
    exit(1);
}

/* One execution: a fresh state, the libraries, the chunk, the close. */
static lua_Integer run_once(const char *code)
{
    lua_State *L = luaL_newstate();
    lua_Integer v;

    if (!L)
        fail("out of memory");
    luaL_openlibs(L);
    if (luaL_loadstring(L, code) != LUA_OK || lua_pcall(L, 0, 1, 0) != LUA_OK)
        fail(lua_tostring(L, -1));
    v = lua_tointeger(L, -1);
    lua_close(L);
    return v;
}

static void m_latency(long n)
{
    double *lat = calloc((size_t)n, sizeof *lat);
    long i;

    if (!lat)
        fail("out of memory");
    for (i = -(n / 10 + 5); i < n; i++) {
        double t0 = now_us();
        if (run_once("return 1+1") != 2)
            fail("wrong value");
        if (i >= 0)
            lat[i] = now_us() - t0;
    }
    print_latencies(lat, (size_t)n);
    free(lat);
}

static void m_tput(int procs, long n)
{
    double t0 = now_us(), el;
    long each = (n + procs - 1) / procs;
    int i, st, bad = 0;

    for (i = 0; i < procs; i++) {
        pid_t pid = fork();
        if (pid < 0)
            fail("fork");
        if (pid == 0) {
            for (long k = 0; k < each; k++)
                if (run_once("return 1+1") != 2)
                    _exit(1);
            _exit(0);
        }
    }
    for (i = 0; i < procs; i++)
        if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            bad = 1;
    if (bad)
        fail("a worker failed");
    el = now_us() - t0;
    printf("procs=%d\nrate=%.1f\nelapsed_s=%.3f\n", procs, (double)(each * procs) / (el / 1e6),
           el / 1e6);
}

static int tool_f(lua_State *L)
{
    (void)L;
    lua_pushinteger(L, 1);
    return 1;
}

static void m_tools(long calls)
{
    lua_State *L = luaL_newstate();
    char code[256];
    double t0, el;

    luaL_openlibs(L);
    lua_newtable(L);
    lua_pushcfunction(L, tool_f);
    lua_setfield(L, -2, "f");
    lua_setglobal(L, "T");
    snprintf(code, sizeof code, "local s = 0 for i = 1, %ld do s = s + T.f(i) end return s", calls);
    t0 = now_us();
    if (luaL_loadstring(L, code) != LUA_OK || lua_pcall(L, 0, 1, 0) != LUA_OK)
        fail(lua_tostring(L, -1));
    el = now_us() - t0;
    if (lua_tointeger(L, -1) != calls)
        fail("wrong value");
    lua_close(L);
    printf("calls=%ld\nrate=%.1f\nper_call_us=%.4f\n", calls, (double)calls / (el / 1e6),
           el / (double)calls);
}

static double cpu_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void m_cpu(long repeat, const char *code)
{
    double *t = calloc((size_t)repeat, sizeof *t), *cpu = calloc((size_t)repeat, sizeof *cpu);
    long i;

    if (!t || !cpu)
        fail("out of memory");
    for (i = 0; i < repeat; i++) {
        double t0 = now_us(), c0 = cpu_us();
        lua_Integer v = run_once(code);
        t[i] = now_us() - t0;
        cpu[i] = cpu_us() - c0;
        if (i == 0)
            printf("value=%lld\n", (long long)v);
    }
    print_runs(t, cpu, (size_t)repeat);
    free(t);
    free(cpu);
}

int main(int argc, char **argv)
{
    const char *mode, *code = NULL;
    long n = 1000;
    int procs = 1, opt;

    if (argc < 2)
        fail("usage: inproc latency|tput|tools|cpu [-n N] [-c PROCS] [-e CODE]");
    mode = argv[1];
    optind = 2;
    while ((opt = getopt(argc, argv, "n:c:e:")) != -1) {
        switch (opt) {
        case 'n': n = atol(optarg); break;
        case 'c': procs = atoi(optarg); break;
        case 'e': code = optarg; break;
        default: fail("bad option");
        }
    }
    if (n < 1 || procs < 1)
        fail("bad count");
    if (strcmp(mode, "latency") == 0)
        m_latency(n);
    else if (strcmp(mode, "tput") == 0)
        m_tput(procs, n);
    else if (strcmp(mode, "tools") == 0)
        m_tools(n);
    else if (strcmp(mode, "cpu") == 0 && code)
        m_cpu(n, code);
    else
        fail("unknown mode");
    return 0;
}
