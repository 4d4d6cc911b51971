/* notify.c - see notify.h. */
#include "daemon/notify.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "proto/mutant.h"

void notify_send(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    size_t len;
    socklen_t alen;
    int fd;

    if (!path || !*path || (len = strlen(path)) >= sizeof addr.sun_path)
        return;
    memcpy(addr.sun_path, path, len);
    if (addr.sun_path[0] == '@')
        addr.sun_path[0] = '\0';
    alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    if ((fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
        return;
    if (sendto(fd, state, strlen(state), MSG_NOSIGNAL | (MUTANT(NOTIFY_WAIT) ? 0 : MSG_DONTWAIT),
               (struct sockaddr *)&addr, alen) < 0)
        log_debug("notify %s: failed", state);
    close(fd);
}

/* Reload and watchdog messages. */
void notify_reloading(void)
{
    struct timespec ts;
    char msg[64];

    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(msg, sizeof msg, "RELOADING=1\nMONOTONIC_USEC=%llu",
             (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000ULL);
    notify_send(msg);
}

unsigned long long notify_watchdog_usec(void)
{
    const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
    unsigned long long v;
    char *end;

    if (!usec || !*usec)
        return 0;
    if (pid && *pid && strtol(pid, NULL, 10) != (long)getpid())
        return 0;
    v = strtoull(usec, &end, 10);
    return *end ? 0 : v;
}
