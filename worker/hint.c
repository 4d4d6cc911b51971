/*
 * hint.c - whether a chunk that failed to compile ends in a bare expression
 * (contract: hint.h).
 */
#include "worker/hint.h"

#include <lua.h>
#include <stdlib.h>

#include "proto/mutant.h"

struct trial {
    const char *piece[3];
    size_t      len[3];
    int         next;
    size_t      used;
};

static void *trial_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    struct trial *t = ud;
    size_t old = ptr ? osize : 0;
    void *p;

    if (nsize == 0) {
        free(ptr);
        t->used -= old;
        return NULL;
    }
    if (!MUTANT(HINT_HEAP) && nsize > old && nsize - old > HINT_HEAP - t->used)
        return NULL;
    p = realloc(ptr, nsize);
    if (p == NULL)
        return nsize <= old ? ptr : NULL;       /* a shrink never fails */
    t->used = t->used - old + nsize;
    return p;
}

static const char *trial_read(lua_State *L, void *ud, size_t *size)
{
    struct trial *t = ud;

    (void)L;
    while (t->next < 3) {
        int i = t->next++;
        if (t->len[i] > 0) {
            *size = t->len[i];
            return t->piece[i];
        }
    }
    *size = 0;
    return NULL;
}

/* Does the chunk compile with `return ` inserted at offset `at`? */
static int compiles_with_return(const char *code, size_t len, size_t at)
{
    struct trial t = {
        .piece = {code, "return ", code + at},
        .len = {at, 7, len - at},
    };
    lua_State *L = lua_newstate(trial_alloc, &t);
    int ok;

    if (L == NULL)
        return 0;
    ok = lua_load(L, trial_read, &t, "=input", "t") == LUA_OK;
    lua_close(L);
    return ok;
}

int hint_bare_expression(const char *code, size_t len, long line)
{
    size_t at[HINT_TRIALS - 1];         /* starts of the last non-blank lines */
    size_t start = 0, i = 0;
    int n = 0, k;
    long ln = 1;

    while (line > 0 && ln <= line && start < len) {
        size_t e = start;
        int blank = 1;
        while (e < len && code[e] != '\n' && code[e] != '\r') {
            if (code[e] != ' ' && code[e] != '\t' && code[e] != '\f' && code[e] != '\v')
                blank = 0;
            e++;
        }
        if (!blank && start > 0) {
            at[n % (HINT_TRIALS - 1)] = start;
            n++;
        }
        /* one line break as Lua's lexer counts it: \n, \r, \r\n or \n\r */
        if (e + 1 < len && (code[e + 1] == '\n' || code[e + 1] == '\r') && code[e + 1] != code[e])
            e++;
        start = e + 1;
        ln++;
    }
    for (k = 0; k < n && k < HINT_TRIALS - 1; k++) {
        i = at[(size_t)(n - 1 - k) % (HINT_TRIALS - 1)];
        if (compiles_with_return(code, len, i))
            return 1;
    }
    return compiles_with_return(code, len, 0);
}
