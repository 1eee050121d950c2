/* A connection's client address; see peer.h. */
#include "core/peer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

void peer_set(struct peer *p, const struct sockaddr *sa, unsigned len)
{
    memset(p, 0, sizeof(*p));
    memcpy(p->text, "-", 2);
    if (sa && sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)sa;
        memcpy(p->addr, &v4->sin_addr, 4);
        inet_ntop(AF_INET, &v4->sin_addr, p->text, sizeof(p->text));
    } else if (sa && sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)sa;
        /* An IPv4 client of a socket that takes both families (the default listeners) is
         * the IPv4 client it is: logged as such, and limited by its /32, not by the one /64
         * that every mapped address shares. */
        if (IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) {
            memcpy(p->addr, v6->sin6_addr.s6_addr + 12, 4);
            inet_ntop(AF_INET, p->addr, p->text, sizeof(p->text));
            p->family = AF_INET;
            p->known = true;
            return;
        }
        memcpy(p->addr, &v6->sin6_addr, 16);
        inet_ntop(AF_INET6, &v6->sin6_addr, p->text, sizeof(p->text));
    } else {
        /* A Unix socket's client has no address: logged as nginx does ("unix:"), and counted
         * by the limits as one client with every other (rt/guard.c keys unknown peers alike) */
        if (sa && sa->sa_family == AF_UNIX)
            memcpy(p->text, "unix:", 6);
        return;
    }
    p->family = (int8_t)sa->sa_family;
    p->known = true;
}
