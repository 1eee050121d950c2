/* The options of listening and connections: ports, addresses, workers, timeouts, memory: their
 * rows of the one table (options.c walks the areas in --help's order) and their own setters. See
 * options.h; options_int.h has what the areas share. */
#include "config/options.h"
#include "config/options_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A port word's value: 0 (the kernel's pick) to 65535. */
static int bind_port(const char *s, int *out)
{
    unsigned long v;
    if (options_parse_uint(s, 0, 65535, &v) != 0)
        return -EINVAL;
    *out = (int)v;
    return 0;
}

/* The address part of an IP entry, in place: "*", "*:PORT", "V4", "V4:PORT", "[V6]",
 * "[V6]:PORT" or a bare "V6" (two colons or more, no port: nginx wants brackets for one). */
static int bind_address(char *a, struct config_bind *b)
{
    char *port = NULL;
    if (a[0] == '[') {
        char *close = strchr(a, ']');
        if (!close || (close[1] && close[1] != ':'))
            return -EINVAL;
        *close = '\0';
        if (close[1] == ':')
            port = close + 2;
        a++;
    } else if (strchr(a, ':') == strrchr(a, ':') && strchr(a, ':')) { /* one colon: a port */
        port = strchr(a, ':');
        *port++ = '\0';
    }
    if (port && bind_port(port, &b->port) != 0)
        return -EINVAL;
    if (strcmp(a, "*") == 0)
        return 0; /* both families, as with no --bind */
    unsigned char buf[16];
    if (inet_pton(AF_INET, a, buf) != 1 && inet_pton(AF_INET6, a, buf) != 1)
        return -EINVAL;
    b->host = a;
    return 0;
}

/* --bind 'ADDR[:PORT] [tls=PORT] [proxy]' or 'unix:PATH [mode=0660] [owner=USER[:GROUP]]
 * [proxy]', repeatable: each entry a listener of its own (issue 38; a second -b used to replace
 * the first). Overlaps between entries are the server's to find (it knows --port). */
static int set_bind(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    static const char syntax[] =
        "'ADDR[:PORT] [tls=PORT] [proxy]' (127.0.0.1, [::1]:8080, * for every address) or "
        "'unix:PATH [mode=0660] [owner=USER[:GROUP]] [tls] [proxy]'";
    if (cfg->num_binds == CONFIG_MAX_BINDS)
        return usage_error("--bind: at most %d entries; '%s' is one more", CONFIG_MAX_BINDS, arg);
    struct config_bind b = {.port = -1, .tls_port = -1, .mode = -1};
    char first[128]; /* the address as given, for its message (parsing cuts it in place) */
    snprintf(first, sizeof(first), "%.*s", (int)strcspn(arg, " \t"), arg);
    char *save = NULL, *word = strtok_r(arg, " \t", &save);
    if (!word)
        return usage_error("--bind wants %s", syntax);
    if (strncmp(word, "unix:", 5) == 0) {
        b.path = word + 5;
        if (b.path[0] != '/' || strlen(b.path) > CONFIG_UNIX_PATH_MAX)
            return usage_error("--bind unix:PATH wants an absolute path of at most %d bytes, "
                               "got '%s'",
                               CONFIG_UNIX_PATH_MAX, word);
    } else if (bind_address(word, &b) != 0) {
        return usage_error("--bind: '%s' is not an IPv4 or IPv6 address (with an optional "
                           ":PORT; a host name is not resolved); it wants %s",
                           first, syntax);
    }
    while ((word = strtok_r(NULL, " \t", &save))) {
        unsigned long mode = 0;
        char *end = NULL;
        if (strcmp(word, "proxy") == 0 || strcmp(word, "proxy_protocol") == 0)
            b.proxy = true;
        else if (!b.path && strncmp(word, "tls=", 4) == 0 && bind_port(word + 4, &b.tls_port) == 0)
            continue;
        else if (b.path && strncmp(word, "mode=", 5) == 0 && word[5] >= '0' && word[5] <= '7' &&
                 (mode = strtoul(word + 5, &end, 8), *end == '\0') && mode <= 0777)
            b.mode = (int)mode;
        else if (b.path && strncmp(word, "owner=", 6) == 0 && word[6])
            b.owner = word + 6;
        else if (b.path && strcmp(word, "tls") == 0)
            b.tls = true;
        else
            return usage_error("--bind: '%s' is not a word it knows; it wants %s", word, syntax);
    }
    cfg->binds[cfg->num_binds++] = b;
    return 0;
}

static bool same_binds(const struct config *a, const struct config *b)
{
    if (a->num_binds != b->num_binds)
        return false;
    for (int i = 0; i < a->num_binds; i++) {
        const struct config_bind *x = &a->binds[i], *y = &b->binds[i];
        if (!options_same_string(x->host, y->host) || !options_same_string(x->path, y->path) ||
            x->port != y->port || x->tls_port != y->tls_port || x->proxy != y->proxy ||
            x->tls != y->tls || x->mode != y->mode || !options_same_string(x->owner, y->owner))
            return false;
    }
    return true;
}

static const struct option_info rows[] = {
    {.name = "port",
     .short_name = 'p',
     .metavar = "PORT",
     PROCESS,
     FIELD(FIELD_PORT, port),
     .set = options_set_number,
     .max = 65535,
     .wants = "",
     .help = "TCP port to listen on (default 8080; 0 picks a free one)"},
    {.name = "bind",
     .short_name = 'b',
     .metavar = "ADDR",
     PROCESS,
     .list = LIST_BINDS,
     .same = same_binds,
     .set = set_bind,
     .help = "an address to listen on, repeatable: ADDR[:PORT] [tls=PORT]\n"
             "[proxy], or unix:PATH [mode=0660] [owner=USER[:GROUP]] [tls] [proxy]\n"
             "(default: every IPv4 and IPv6 address, as one [::] socket;\n"
             "an address given is that one only)"},
    {.name = "threads",
     .short_name = 't',
     .metavar = "N",
     PROCESS,
     FIELD(FIELD_INT, threads),
     .set = options_set_number,
     .min = 1,
     .max = 1024,
     .wants = "",
     .help = "worker threads, one ring or epoll set each (default: CPUs)"},
    {.name = "engine",
     .metavar = "NAME",
     PROCESS,
     FIELD(FIELD_INT, engine),
     .set = options_set_choice,
     .choices = (const struct option_choice[]){{"auto", ENGINE_AUTO},
                                               {"uring", ENGINE_URING},
                                               {"io_uring", ENGINE_URING},
                                               {"epoll", ENGINE_EPOLL},
                                               {NULL, 0}},
     .wants = "auto, uring or epoll",
     .help = "auto, uring or epoll (default auto: io_uring when the\n"
             "kernel allows it, epoll otherwise)"},
    {.name = "keepalive-timeout",
     .metavar = "S",
     PROCESS,
     FIELD(FIELD_UNSIGNED, keepalive_timeout),
     SECONDS(1),
     .help = "close idle keep-alive connections after S seconds (15)"},
    {.name = "header-timeout",
     .metavar = "S",
     PROCESS,
     FIELD(FIELD_UNSIGNED, header_timeout),
     SECONDS(1),
     .help = "close connections whose request head takes longer (10)"},
    {.name = "body-timeout",
     .metavar = "S",
     PROCESS,
     FIELD(FIELD_UNSIGNED, body_timeout),
     SECONDS(1),
     .help = "a request whose body brings nothing for S seconds (60;\n"
             "PINGs and other streams do not count): HTTP/2 answers 408,\n"
             "HTTP/3 resets the stream"},
    {.name = "drain-timeout",
     .metavar = "S",
     PROCESS,
     FIELD(FIELD_UNSIGNED, drain_timeout),
     SECONDS(1),
     .help = "on SIGTERM, wait at most S seconds for responses (10)"},
    {.name = "max-conns",
     .metavar = "N",
     PROCESS,
     FIELD(FIELD_UNSIGNED, max_conns),
     .set = options_set_number,
     .min = 1,
     .max = 1u << 20,
     .wants = "",
     .help = "connections per worker (16384); when all are taken, idle\n"
             "keep-alive connections are closed for new ones, oldest first"},
    {.name = "head-memory",
     .metavar = "BYTES",
     PROCESS,
     FIELD(FIELD_SIZE, head_memory),
     BYTES(64u << 10, SIZE_MAX, " of at least 64K"),
     .help = "input buffers of partial request heads per worker (32M;\n"
             "K/M/G, at least 64K); past it the oldest partial heads close"},
};
const struct option_area options_net = {rows, sizeof(rows) / sizeof(rows[0])};
