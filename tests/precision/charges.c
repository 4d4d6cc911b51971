/*
 * charges.c - library-work charges for the precision harness (charges.h):
 * sandboxd's own charge module (worker/charge.c, pattern.c,
 * which use the Lua API only), applied as worker/charge.h says a
 * program linked with the stock liblua5.3 applies them: the library
 * functions replaced by charging ones after the libraries are open, and
 * every new string the running chunk makes charged by its length.
 */
#include "tests/precision/charges.h"

#include "worker/charge.h"

/* The rates are charge.h's; the measurement cache's key hashes charge.h,
 * charge.c and pattern.c themselves (tests/precision/harness.py). */
const char charges_rates[] = "worker/charge.h";

static uint64_t *g_charged;
static size_t    g_header;
static int       g_running;

static void pay(lua_State *L, void *ud, uint64_t n)
{
    (void)L;
    *(uint64_t *)ud += n;
}

void charges_install(lua_State *L, uint64_t *total)
{
    static struct charge c;

    if (g_header == 0)
        g_header = charge_string_header();
    c.pay = pay;
    c.ud = g_charged = total;
    charge_open(L, &c);
}

void charges_running(int on)
{
    g_running = on;
}

void charges_allocated(int fresh, size_t osize, size_t nsize)
{
    if (fresh && osize == LUA_TSTRING && g_running && g_charged != NULL
        && nsize > g_header)
        *g_charged += charge_string(nsize - g_header - 1);
}
