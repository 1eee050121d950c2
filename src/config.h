/* config: command-line options, their defaults and validation, and the --help text.
 * Must not: change after server_run starts; every thread reads it without locks.
 * Ownership: main owns the one struct config for the whole process lifetime. */
#ifndef CONFIG_H
#define CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/mime.h"

#define RINGHTTPD_VERSION "0.1.0"
#define CONFIG_MAX_ERROR_PAGES 16

enum engine_kind { ENGINE_AUTO, ENGINE_URING, ENGINE_EPOLL };

/* How the io_uring engine sends file ranges (the epoll engine always uses sendfile). */
enum file_send { FILE_SEND_SPLICE, FILE_SEND_SENDFILE };

struct error_page {
    int status;
    const char *path; /* URL path below the document root, without the leading '/' */
};

struct config {
    const char *docroot;
    int docroot_fd; /* O_PATH directory fd every file is opened beneath */
    const char *bind;
    uint16_t port;
    int threads;
    enum engine_kind engine;
    unsigned keepalive_timeout; /* seconds */
    unsigned header_timeout;    /* seconds */
    unsigned drain_timeout;     /* seconds a SIGTERM waits for responses in flight */
    unsigned max_conns;         /* per worker */
    bool verbose;
    bool autoindex;
    unsigned autoindex_limit;   /* entries a listing shows; the rest are counted in a note */
    size_t cache_size;     /* bytes of file contents each worker may hold in memory */
    size_t cache_max_file; /* files up to this size are held in memory */
    enum file_send file_send;
    unsigned splice_pipes; /* per worker: the most file ranges spliced at once */
    size_t send_lowat;     /* TCP_NOTSENT_LOWAT of every connection; 0: the kernel's default */
    /* "Name: value\r\n" lines sent with every successful response (--header, --cache-control) */
    char *extra_headers;
    size_t extra_headers_len;
    struct mime_table mime_extra;
    struct error_page error_pages[CONFIG_MAX_ERROR_PAGES];
    int num_error_pages;
    const char *fallback; /* URL path below the root, without the leading '/', or NULL */
};

/* config_parse's answer when it printed --help or --version: nothing to run, exit 0. */
#define CONFIG_DONE (-1)

/* Fills cfg from argv. Returns 0 to run, or an exit status after printing one line to stderr
 * (2 for a usage error, 1 for an unusable document root or option file), or CONFIG_DONE after
 * printing --help or --version. */
int config_parse(struct config *cfg, int argc, char **argv);

/* Releases what config_parse allocated and closes the document root. */
void config_free(struct config *cfg);

#endif
