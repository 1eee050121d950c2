/* systemd's socket activation and notification protocols; see systemd.h. The protocols are
 * documented in sd_listen_fds(3) and sd_notify(3); both are a few environment variables and
 * datagrams, so a library would add a dependency for less code than this file. */
#include "server/systemd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int parse_num(const char *s, long *out)
{
    char *end;
    if (!s || *s < '0' || *s > '9')
        return -EINVAL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end)
        return -EINVAL;
    *out = v;
    return 0;
}

int systemd_listen_fds(int *fds, int max, char *names, size_t names_len, char *why, size_t why_len)
{
    long pid, n;
    int rc = 0;
    const char *fdnames = getenv("LISTEN_FDNAMES");

    snprintf(names, names_len, "%s", fdnames ? fdnames : "");
    if (parse_num(getenv("LISTEN_PID"), &pid) != 0 || pid != (long)getpid() ||
        parse_num(getenv("LISTEN_FDS"), &n) != 0 || n <= 0)
        goto out; /* not for us (LISTEN_PID is how a child tells it inherited the variables) */
    if (n > max) {
        snprintf(why, why_len, "LISTEN_FDS=%ld: at most %d sockets", n, max);
        rc = -EINVAL;
        goto out;
    }
    for (int i = 0; i < n; i++) {
        int fd = SYSTEMD_LISTEN_FDS_START + i, type = 0, listening = 0;
        socklen_t len = sizeof(type);
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM ||
            getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) {
            snprintf(why, why_len,
                     "socket activation: fd %d is not a listening stream socket "
                     "(ListenStream= in the .socket unit)",
                     fd);
            rc = -ENOTSOCK;
            goto out;
        }
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0 ||
            fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
            rc = -errno;
            snprintf(why, why_len, "socket activation: fd %d: %s", fd, strerror(-rc));
            goto out;
        }
        fds[i] = fd;
    }
    rc = (int)n;
out:
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    return rc;
}

int systemd_notify_open(void)
{
    const char *path = getenv("NOTIFY_SOCKET");
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len;

    if (!path || (path[0] != '/' && path[0] != '@') || (len = strlen(path)) >= sizeof(sa.sun_path))
        return -1;
    memcpy(sa.sun_path, path, len);
    if (path[0] == '@')
        sa.sun_path[0] = '\0'; /* abstract namespace */
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    /* Connected once now, so a later Landlock confinement or user change cannot stop it. */
    if (connect(fd, (struct sockaddr *)&sa,
                (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

void systemd_notify(int fd, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    if (fd < 0)
        return;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (n > 0)
        (void)!send(fd, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1, MSG_NOSIGNAL);
}
