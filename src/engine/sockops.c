/* The socket operations both engines share; see sockops.h. */
#include "engine/sockops.h"

#include <sys/socket.h>
#include <unistd.h>

#include "core/peer.h"
#include "engine/engine.h"
#include "engine/ktls.h"

bool sockops_peer(struct runtime *w, struct engine_conn *c, struct peer *out)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    (void)w;
    if (getpeername(c->fd, (struct sockaddr *)&ss, &len) < 0) {
        peer_set(out, NULL, 0);
        return false; /* ENOTCONN: reset while it waited to be accepted */
    }
    peer_set(out, (const struct sockaddr *)&ss, len);
    return true;
}

int sockops_ktls(struct runtime *w, struct engine_conn *c, const void *keys, size_t len)
{
    (void)w;
    return keys ? ktls_send_keys(c->fd, keys, len) : ktls_attach(c->fd);
}

void sockops_drop(struct runtime *w, int fd)
{
    (void)w;
    close(fd);
}
