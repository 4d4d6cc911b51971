/*
 * look.c - a worker's look at its channel before it sleeps (see look.h).
 */
#include "worker/look.h"

#include <poll.h>
#include <time.h>

#include "proto/chan.h"
#include "proto/mutant.h"

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void look_init(struct look *l, unsigned us)
{
    l->ns = UINT64_MAX;
    look_bound(l, us);
}

void look_bound(struct look *l, long long us)
{
    if (us < 0)
        us = 0;
    if (us > CHAN_SPIN_US_MAX)
        us = CHAN_SPIN_US_MAX;
    l->max_ns = (uint64_t)us * 1000u;
    if (l->ns > l->max_ns)
        l->ns = l->max_ns;
}

uint64_t look_begin(const struct look *l, int fd)
{
    struct pollfd pf = { .fd = fd, .events = POLLIN };
    uint64_t t0;

    if (l->max_ns == 0)
        return 0;
    t0 = now_ns();
    if (l->ns > 0)
        while (poll(&pf, 1, 0) == 0 && now_ns() - t0 < l->ns)
            ;
    return t0;
}

void look_end(struct look *l, uint64_t t0)
{
    uint64_t waited;

    if (l->max_ns == 0 || t0 == 0)
        return;
    waited = now_ns() - t0;
    if (waited <= l->ns)
        return;                             /* caught while looking */
    if (waited <= l->max_ns) {              /* just missed: look longer */
        l->ns = l->ns ? l->ns * 2 : l->max_ns / 8;
        if (l->ns > l->max_ns)
            l->ns = l->max_ns;
    } else {                                /* a slow peer: look less */
        if (MUTANT(SPIN_SHRINK))
            return;                         /* mutant: a slow peer keeps the whole look */
        l->ns /= 2;
        if (l->ns < l->max_ns / 16)
            l->ns = 0;
    }
}
