/*
 * charge.c - the charges of library work (contract and rates: charge.h).
 * Depends on the Lua API only, never on the worker's state.
 */
#include "daemon/worker/charge.h"

#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>

#define PROBE_LEN 100

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
