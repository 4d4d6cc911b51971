/*
 * sup.c - the supervisor context's own functions: the counters' guarded
 * decrement and the heap trim.  See sup.h.
 */
#include "daemon/sup.h"

#include <malloc.h>

#include "common/log.h"
#include "proto/mutant.h"

void sup_count_down(unsigned *counter, const char *name)
{
    if (*counter == 0) {
        log_err("internal: counter %s would go below zero; kept at 0", name);
        return;
    }
    (*counter)--;
}

void sup_trim(void)
{
    if (!MUTANT(MALLOC_TRIM))
        malloc_trim(0);
}
