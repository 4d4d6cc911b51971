/*
 * notify.h - the systemd notification protocol, without libsystemd.
 *
 * notify_send("READY=1") sends one datagram to $NOTIFY_SOCKET (a path, or an
 * abstract socket when it starts with '@').  Without NOTIFY_SOCKET it does
 * nothing.  Failures are logged at debug level and otherwise ignored: the
 * daemon must work the same without systemd.
 */
#ifndef SANDBOXD_NOTIFY_H
#define SANDBOXD_NOTIFY_H

void notify_send(const char *state);

#endif
