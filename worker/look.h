/* Runs in: worker */
/*
 * look.h - a worker's look at its channel before it sleeps in read(2).
 *
 * Runs in the untrusted worker, after containment.  On a machine whose idle
 * CPUs halt (a VM without guest halt polling), waking a sleeping process
 * costs an inter-processor interrupt and a halted CPU's exit, on both sides
 * of the channel: a worker that is still looking when its frame comes
 * spares the supervisor the wake-up, and the supervisor's read of the
 * worker's last frame no longer wakes it for nothing (a reader blocked in
 * read(2) is woken by any change of its socket).
 *
 * The looking is the worker's own CPU time, so the window adapts as the
 * kernel's halt polling does: a frame that came just after the window
 * doubles it (up to the bound), one that came much later halves it, down to
 * no look at all, so a slow peer costs about twice the bound in all.  The
 * supervisor sets the bound (0 while every CPU has work: then the look
 * would only take time from another execution).  poll(2) is allowed with
 * one descriptor and a zero timeout only: it can look, never sleep
 * (policy/seccomp.c).
 */
#ifndef SANDBOXD_LOOK_H
#define SANDBOXD_LOOK_H

#include <stdint.h>

struct look {
    uint64_t max_ns;            /* the supervisor's bound */
    uint64_t ns;                /* the current window, <= max_ns */
};

/* A window that starts at its bound of us microseconds. */
void look_init(struct look *l, unsigned us);

/* A new bound from the supervisor, clamped to 0..CHAN_SPIN_US_MAX; the
 * window shrinks to it if it is larger. */
void look_bound(struct look *l, long long us);

/* Look at fd until it is readable or the window has passed.  Returns when
 * the wait began, for look_end(); 0 when there is no bound. */
uint64_t look_begin(const struct look *l, int fd);

/* The frame has been read: adapt the window to how long it took. */
void look_end(struct look *l, uint64_t t0);

#endif
