/* Runs in: supervisor */
/*
 * notify.h - the systemd notification protocol, without libsystemd.
 *
 * notify_send("READY=1") sends one datagram to $NOTIFY_SOCKET (a path, or an
 * abstract socket when it starts with '@').  Without NOTIFY_SOCKET it does
 * nothing.  It never blocks: a receiver whose queue is full (one that
 * reads slowly or not at all; a datagram socket queues only
 * net.unix.max_dgram_qlen messages, 10 by default) loses the message, and
 * the supervisor goes on serving.  Failures are logged at debug level and
 * otherwise ignored: the daemon must work the same without systemd.
 */
#ifndef SANDBOXD_NOTIFY_H
#define SANDBOXD_NOTIFY_H

void notify_send(const char *state);

/* systemd readiness, reload and watchdog messages. */
/* "RELOADING=1" with MONOTONIC_USEC=<CLOCK_MONOTONIC now>, which
 * Type=notify-reload (systemd >= 253) requires and older systemd ignores. */
void notify_reloading(void);
/* The watchdog interval systemd asks for, in microseconds: $WATCHDOG_USEC
 * when set and $WATCHDOG_PID is unset or names this process; else 0.  The
 * caller sends "WATCHDOG=1" at less than half of it. */
unsigned long long notify_watchdog_usec(void);

#endif
