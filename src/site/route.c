/* Which site a request is for, on its worker: the Host routed among the sites (the last one
 * remembered), a {host} root's directory, and the 421 verdict on a secure connection's
 * certificate; and site's per-worker state, made and freed here (site_int.h). See site.h. */
#include "site/site.h"
#include "site/site_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "rt/fcache.h"
#include "rt/runtime.h"
#include "rt/file.h"
#include "conn/transport.h"

/* {host} roots (issue 40): the directories of the hosts asked for lately, per worker, in a
 * direct-mapped table (a host evicts the one in its slot: bounded, and a flood of random names
 * costs a slot each, never memory). Each (host, directory) gets a cache id of its own, never
 * reused, so no host is ever served another's cached file. */
#define HOST_ROOTS 256
#define HOST_ROOT_ID0 0x80000000u /* above every vhost id (sites are counted below 2^23) */

struct host_root {
    const struct vhost *v; /* the {host} site it is for, under gen */
    unsigned gen;
    int64_t checked; /* w->now when it was opened or looked up (again each second) */
    int fd;          /* its directory, or -1: none there */
    uint32_t id;
    dev_t dev;
    ino_t ino;
    uint8_t len;
    char name[HOST_ROOT_NAME_MAX];
};

struct site_worker *site_worker_new(void)
{
    return calloc(1, sizeof(struct site_worker));
}

void site_worker_free(struct site_worker *sw)
{
    for (int i = 0; sw && sw->host_roots && i < HOST_ROOTS; i++)
        if (sw->host_roots[i].fd >= 0)
            close(sw->host_roots[i].fd);
    if (sw)
        free(sw->host_roots);
    free(sw);
}

/* Whether key[0..n) (vhost_key's: lower case, no port, no trailing dot, only host bytes) may
 * name a directory: one path component, not hidden, not "." or "..", a DNS name's length. */
static bool host_component(const char *key, size_t n)
{
    return n > 0 && n < HOST_ROOT_NAME_MAX && key[0] != '.' && !memchr(key, '/', n);
}

int site_host_root(struct runtime *w, const struct vhost *v, const struct http_request *req)
{
    struct site_worker *sw = w->sitew;
    char key[VHOST_NAME_MAX + 1];
    struct http_str h = req ? vhost_request_host(req) : (struct http_str){NULL, 0};
    size_t n = h.p ? vhost_key(h, key) : 0;
    if (!host_component(key, n))
        return -EINVAL;
    if (!sw->host_roots) {
        if (!(sw->host_roots = calloc(HOST_ROOTS, sizeof(*sw->host_roots))))
            return -ENOMEM;
        for (int i = 0; i < HOST_ROOTS; i++)
            sw->host_roots[i].fd = -1;
        sw->next_id = HOST_ROOT_ID0;
    }
    uint32_t hash = 2166136261u;
    for (size_t i = 0; i < n; i++)
        hash = (hash ^ (unsigned char)key[i]) * 16777619u;
    struct host_root *r = &sw->host_roots[hash & (HOST_ROOTS - 1)];
    bool same = r->v == v && r->gen == w->site_gen && r->len == n && memcmp(r->name, key, n) == 0;
    /* Looked up again once a second: a host's directory made (or removed) since is seen then,
     * as the file cache sees its files change. */
    if (!same || r->checked != w->now) {
        char path[HOST_ROOT_NAME_MAX + PATH_MAX];
        int len = snprintf(path, sizeof(path), "%.*s%s", (int)n, key, v->cfg->host_root);
        int fd = len > 0 && (size_t)len < sizeof(path)
                     ? file_open_beneath(v->root_fd, path, O_DIRECTORY)
                     : -ENAMETOOLONG;
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) != 0) {
            close(fd);
            fd = -errno;
        }
        bool kept = same && r->fd >= 0 && fd >= 0 && st.st_dev == r->dev && st.st_ino == r->ino;
        if (r->fd >= 0)
            close(r->fd);
        *r = (struct host_root){.v = v,
                                .gen = w->site_gen,
                                .checked = w->now,
                                .fd = fd,
                                .id = kept ? r->id : sw->next_id++,
                                .len = (uint8_t)n};
        if (sw->next_id < HOST_ROOT_ID0) /* wrapped, after 2^31 directories: start again */
            sw->next_id = HOST_ROOT_ID0;
        memcpy(r->name, key, n);
        if (fd >= 0) {
            r->dev = st.st_dev;
            r->ino = st.st_ino;
        } else {
            r->fd = -1;
        }
    }
    if (r->fd < 0)
        return -ENOENT;
    fcache_root(w->cache, r->id, r->fd, v->types);
    return 0;
}

/* The vhost a request's Host names among several sites; out of line so that the one-site path's
 * frame has no Host key buffer to set up. */
__attribute__((noinline)) static const struct vhost *route_host(struct runtime *w,
                                                                const struct http_request *req)
{
    const struct site *s = w->site;
    struct site_worker *sw = w->sitew;
    const struct vhost *v = &s->vh[s->dflt];
    struct http_str h = vhost_request_host(req);
    if (h.p && h.len == sw->route.len && sw->route.gen == w->site_gen &&
        memcmp(h.p, sw->route.host, h.len) == 0) {
        v = &s->vh[sw->route.vh];
    } else {
        char key[VHOST_NAME_MAX + 1];
        size_t n = vhost_key(h, key);
        int i = n ? vhost_lookup(&s->hosts, key, n) : -1;
        if (i >= 0)
            v = &s->vh[i];
        if (h.p && h.len <= sizeof(sw->route.host)) {
            memcpy(sw->route.host, h.p, h.len);
            sw->route.len = (uint8_t)h.len;
            sw->route.vh = (int32_t)(v - s->vh);
            sw->route.gen = w->site_gen;
        }
    }
    return v;
}

const struct vhost *site_route(struct runtime *w, const struct http_request *req)
{
    const struct site *s = w->site;
    const struct vhost *v = req && s->nvh > 1 ? route_host(w, req) : &s->vh[s->dflt];
    fcache_root(w->cache, v->id, v->root_fd, v->types);
    return v;
}

/* Whether a process-level certificate x may answer for req's Host: none, an address (IPv6's
 * in brackets), the last host found named (inet_pton and the certificate's check cost ~200
 * instructions and more), or a name the certificate holds. */
static bool host_named(struct conn_cert *x, const struct http_request *req)
{
    char key[VHOST_NAME_MAX + 1];
    size_t n = vhost_key(vhost_request_host(req), key);
    if (n == 0 || key[0] == '[' || (n == x->ok_host_len && memcmp(key, x->ok_host, n) == 0))
        return true;
    struct in_addr a4;
    key[n] = '\0';
    if (inet_pton(AF_INET, key, &a4) != 1 && !x->ops->names(x->t, key, n))
        return false;
    if (n <= sizeof(x->ok_host)) {
        memcpy(x->ok_host, key, n);
        x->ok_host_len = (uint8_t)n;
    }
    return true;
}

/* A connection's first request to v (or any, with process-level pairs among several). Kept out
 * of line so that the fast path's frame has no Host key buffer to set up. */
__attribute__((noinline)) static bool misdirected(struct runtime *w, const struct vhost *v,
                                                  const struct http_request *req,
                                                  struct conn_cert *x)
{
    const struct site *s = w->site;
    const char *name = x->ops->site_name ? x->ops->site_name(x->t) : NULL;
    bool ok;
    if (name) { /* a site's own certificate: the request must be routed to that site */
        char key[VHOST_NAME_MAX + 1];
        size_t n = vhost_key((struct http_str){name, strlen(name)}, key);
        int i = n ? vhost_lookup(&s->hosts, key, n) : -1;
        ok = v == &s->vh[i >= 0 ? i : s->dflt];
    } else if (x->ops->only(x->t)) { /* no other certificate to be had: never 421 */
        ok = true;
    } else { /* a process-level certificate among several: it must name the Host */
        return !host_named(x, req); /* which caches its own verdict */
    }
    if (ok) {
        x->ok_site = v;
        x->ok_gen = w->site_gen;
    }
    return !ok;
}

bool site_misdirected(struct runtime *w, const struct vhost *v, const struct http_request *req,
                      struct conn_cert *x)
{
    if (v == x->ok_site && x->ok_gen == w->site_gen)
        return false; /* the connection's every request after its first */
    return misdirected(w, v, req, x);
}
