/* notify.c - see notify.h. */
#include "daemon/notify.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon/log.h"

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
    if (sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&addr, alen) < 0)
        log_debug("notify %s: failed", state);
    close(fd);
}
