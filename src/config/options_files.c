/* The options of what a URL maps to and how files go out: listings, headers, error pages, clean
 * URLs, the file cache: their rows of the one table (options.c walks the areas in --help's order)
 * and their own setters. See options.h; options_int.h has what the areas share. */
#include "config/options.h"
#include "config/options_int.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/path.h"
#include "core/token.h"

static int append_header(struct config *cfg, const char *name, size_t name_len, const char *value)
{
    size_t value_len = strlen(value);
    size_t add = name_len + 2 + value_len + 2;
    char *p = realloc(cfg->extra_headers, cfg->extra_headers_len + add + 1);
    if (!p)
        return -ENOMEM;
    cfg->extra_headers = p;
    p += cfg->extra_headers_len;
    memcpy(p, name, name_len);
    memcpy(p + name_len, ": ", 2);
    memcpy(p + name_len + 2, value, value_len);
    memcpy(p + name_len + 2 + value_len, "\r\n", 3);
    cfg->extra_headers_len += add;
    return 0;
}

static int set_cache_control(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    if (!*arg || !options_field_value_ok(arg))
        return usage_error("--cache-control: invalid value '%s'", arg);
    if (append_header(cfg, "Cache-Control", 13, arg) != 0)
        return 2;
    return 0;
}

static int set_header(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    const char *colon = strchr(arg, ':');
    if (!colon || colon == arg)
        return usage_error("--header wants 'Name: value', got '%s'", arg);
    for (const char *p = arg; p < colon; p++)
        if (!token_is_tchar((unsigned char)*p))
            return usage_error("--header: invalid field name in '%s'", arg);
    const char *value = colon + 1;
    while (token_is_ows(*value))
        value++;
    if (!options_field_value_ok(value))
        return usage_error("--header: control character in '%s'", arg);
    if (append_header(cfg, arg, (size_t)(colon - arg), value) != 0)
        return usage_error("--header: out of memory for '%s'", arg);
    return 0;
}

/* Error pages and the fallback name a URL path; it is normalised here, once, the same way a
 * request's path is, so the file they name is looked up exactly like a request for it. */
static const char *url_path_option(const struct config *cfg, const char *opt, const char *value,
                                   int *rc)
{
    char buf[PATH_MAX];
    struct path_result res;
    struct http_str target = {value, strlen(value)};
    if (value[0] != '/' || path_normalize(target, buf, sizeof(buf) - 1, &res) != 0 ||
        res.len == 0 || res.query.p) {
        *rc =
            usage_error("%s wants a file path below the root like /404.html, got '%s'", opt, value);
        return NULL;
    }
    buf[res.len] = '\0';
    char *copy = strdup(buf);
    if (!copy)
        *rc = 2;
    return copy;
}

static int set_error_page(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    const char *eq = strchr(arg, '=');
    unsigned long code;
    char num[8];
    if (!eq || (size_t)(eq - arg) >= sizeof(num))
        return usage_error("--error-page wants CODE=PATH, got '%s'", arg);
    memcpy(num, arg, (size_t)(eq - arg));
    num[eq - arg] = '\0';
    if (options_parse_uint(num, 400, 599, &code) != 0)
        return usage_error("--error-page: CODE must be 400..599 in '%s'", arg);
    if (cfg->num_error_pages == CONFIG_MAX_ERROR_PAGES)
        return usage_error("--error-page: at most 16, '%s' is one too many", arg);
    int rc = 0;
    const char *path = url_path_option(cfg, "--error-page", eq + 1, &rc);
    if (!path)
        return rc;
    cfg->error_pages[cfg->num_error_pages].status = (int)code;
    cfg->error_pages[cfg->num_error_pages].path = path;
    cfg->num_error_pages++;
    return 0;
}

/* The normalised URL path value names, in the pool: a file's (url_path_option's rules), or with
 * prefix any path below the root, the root itself ("/", "/../") being "". */
static const char *pool_url_path(struct config *cfg, const char *opt, const char *value,
                                 bool prefix, int *rc)
{
    if (prefix) {
        char buf[PATH_MAX];
        struct path_result res;
        if (value[0] != '/' ||
            path_normalize((struct http_str){value, strlen(value)}, buf, sizeof(buf) - 1, &res) !=
                0 ||
            res.query.p) {
            *rc = usage_error("%s wants [PREFIX=]PATH, PREFIX a URL path like /app/, got '%s'", opt,
                              value);
            return NULL;
        }
        const char *kept = options_strdup(cfg, buf, res.len);
        if (!kept)
            *rc = 2;
        return kept;
    }
    char *path = (char *)url_path_option(cfg, opt, value, rc);
    if (!path)
        return NULL;
    const char *kept = options_strdup(cfg, path, strlen(path));
    free(path);
    if (!kept)
        *rc = 2;
    return kept;
}

/* [PREFIX=]PATH. One for a prefix already listed replaces it: the last one wins, as the single
 * --fallback did; a site's list replaces the one it inherited from the top level. */
static int set_fallback(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    int rc = 0;
    char *eq = arg[0] == '/' ? strchr(arg, '=') : NULL;
    const char *prefix = "";
    if (eq) {
        *eq = '\0';
        prefix = pool_url_path(cfg, "--fallback", arg, true, &rc);
        *eq = '=';
        if (!prefix)
            return rc;
    }
    const char *path = pool_url_path(cfg, "--fallback", eq ? eq + 1 : arg, false, &rc);
    if (!path)
        return rc;
    int i = 0;
    while (i < cfg->num_fallbacks && strcmp(cfg->fallbacks[i].prefix, prefix) != 0)
        i++;
    if (i == CONFIG_MAX_FALLBACKS)
        return usage_error("--fallback: at most %d prefixes, '%s' is one too many",
                           CONFIG_MAX_FALLBACKS, arg);
    cfg->fallbacks[i] = (struct config_fallback){prefix, strlen(prefix), path};
    if (i == cfg->num_fallbacks)
        cfg->num_fallbacks++;
    return 0;
}

/* --index NAME...: file names tried in a directory, in order (nginx's index); a name is one
 * path segment, so it can name no file outside the directory. Several may come in one value,
 * separated by spaces. */
static int set_index(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    int n = 0;
    /* arg is not cut in place: a reload applies the same command line again */
    for (const char *p = arg + strspn(arg, " \t"); *p; p += strspn(p, " \t")) {
        size_t len = strcspn(p, " \t");
        if (p[0] == '.' || memchr(p, '/', len) || len > NAME_MAX)
            return usage_error("--index wants file names like index.html (no '/', no leading "
                               "'.'), got '%s'",
                               arg);
        if (cfg->num_index == CONFIG_MAX_INDEX)
            return usage_error("--index: at most %d names, '%s' is one too many", CONFIG_MAX_INDEX,
                               arg);
        const char *name = options_strdup(cfg, p, len);
        if (!name || !options_field_value_ok(name))
            return usage_error("--index: invalid name in '%s'", arg);
        cfg->index_names[cfg->num_index++] = name;
        n++;
        p += len;
    }
    if (!n)
        return usage_error("--index wants file names like index.html, got '%s'", arg);
    return 0;
}

/* --pages: Pages-style handling. It also makes clean URLs (with the .html redirect) and the
 * root's rules files the default of a layer where clean-urls or rules-files was not given:
 * given, that value stands, wherever it came. */
static int set_pages(struct config *cfg, const struct option_info *o, char *arg)
{
    options_set_flag(cfg, o, arg);
    if (!options_given(cfg, "clean-urls"))
        cfg->clean_urls = cfg->pages ? CLEAN_URLS_REDIRECT : CLEAN_URLS_OFF;
    if (!options_given(cfg, "rules-files"))
        cfg->rules_files = cfg->pages;
    return 0;
}

static const struct option_info rows[] = {
    {.name = "autoindex",
     SITE,
     FIELD(FIELD_BOOL, autoindex),
     .set = options_set_flag,
     .help = "list directories that have no index.html"},
    {.name = "autoindex-limit",
     .metavar = "N",
     SITE,
     FIELD(FIELD_UNSIGNED, autoindex_limit),
     .set = options_set_number,
     .min = 1,
     .max = 1u << 24,
     .wants = "",
     .help = "entries a listing shows, the rest counted in a note (10000)"},
    {.name = "cache-control",
     .metavar = "VALUE",
     SITE,
     .list = LIST_HEADERS,
     .set = set_cache_control,
     .help = "Cache-Control header for successful responses"},
    {.name = "header",
     .metavar = "'NAME: VALUE'",
     SITE,
     .list = LIST_HEADERS,
     .set = set_header,
     .help = "extra header for successful responses (repeatable)"},
    {.name = "mime-types",
     .names_file = OPTFILE_WHOLE,
     .metavar = "FILE",
     SITE,
     FIELD(FIELD_STRING, mime_file),
     .set = options_set_string,
     .help = "extra types in /etc/mime.types format"},
    {.name = "error-page",
     .metavar = "CODE=PATH",
     SITE,
     .list = LIST_ERROR_PAGES,
     .set = set_error_page,
     .help = "serve PATH (below DOCROOT) as the body of CODE errors"},
    {.name = "fallback",
     .metavar = "[PREFIX=]PATH",
     SITE,
     .list = LIST_FALLBACKS,
     .set = set_fallback,
     .help = "serve PATH with 200 when a file is missing and the client\n"
             "accepts text/html (single-page applications); with PREFIX\n"
             "only below it, the longest prefix first (repeatable)"},
    {.name = "pages",
     SITE,
     FIELD(FIELD_BOOL, pages),
     .set = set_pages,
     .help = "Pages-style static site: clean URLs (as --clean-urls\n"
             "redirect), the nearest 404.html up the tree for a missing\n"
             "file, the site's _redirects and _headers"},
    {.name = "clean-urls",
     .metavar = "on|off|redirect",
     SITE,
     FIELD(FIELD_INT, clean_urls),
     .set = options_set_choice,
     .choices = (const struct option_choice[]){{"off", CLEAN_URLS_OFF},
                                               {"false", CLEAN_URLS_OFF},
                                               {"no", CLEAN_URLS_OFF},
                                               {"on", CLEAN_URLS_ON},
                                               {"true", CLEAN_URLS_ON},
                                               {"yes", CLEAN_URLS_ON},
                                               {"redirect", CLEAN_URLS_REDIRECT},
                                               {NULL, 0}},
     .wants = "on, off or redirect",
     .help = "on: /x serves x.html when there is no file x; redirect:\n"
             "also 301 /x.html to /x and /dir/index.html to /dir/ (off)"},
    {.name = "index",
     .metavar = "NAME",
     SITE,
     .list = LIST_INDEX,
     .set = set_index,
     .help = "a directory's index file, tried in order (repeatable;\n"
             "default index.html)"},
    {.name = "trailing-slash",
     .metavar = "MODE",
     SITE,
     FIELD(FIELD_INT, trailing_slash),
     .set = options_set_choice,
     .choices =
         (const struct option_choice[]){
             {"auto", SLASH_AUTO}, {"always", SLASH_ALWAYS}, {"never", SLASH_NEVER}, {NULL, 0}},
     .wants = "auto, always or never",
     .help = "auto (301 /dir to /dir/), always (also /x to /x/ for a\n"
             "clean URL) or never (301 /dir/ to /dir, which serves the\n"
             "index)"},
    {.name = "cache-size",
     .metavar = "BYTES",
     PROCESS,
     FIELD(FIELD_SIZE, cache_size),
     BYTES(0, SIZE_MAX, " like 64M"),
     .help = "file contents each worker keeps in memory (64M; K/M/G)"},
    {.name = "cache-max-file",
     .metavar = "BYTES",
     PROCESS,
     FIELD(FIELD_SIZE, cache_max_file),
     BYTES(0, SIZE_MAX, " like 256K"),
     .help = "largest file kept in memory (256K; K/M/G)"},
    {.name = "file-send",
     .metavar = "MODE",
     PROCESS,
     FIELD(FIELD_INT, file_send),
     .set = options_set_choice,
     .choices = (const struct option_choice[]){{"splice", FILE_SEND_SPLICE},
                                               {"sendfile", FILE_SEND_SENDFILE},
                                               {NULL, 0}},
     .wants = "splice or sendfile",
     .help = "how io_uring sends larger files: splice (file -> pipe ->\n"
             "socket as io_uring operations: the file is read off the loop)\n"
             "or sendfile (from the loop); default splice. epoll: sendfile"},
    {.name = "splice-pipes",
     .metavar = "N",
     PROCESS,
     FIELD(FIELD_UNSIGNED, splice_pipes),
     .set = options_set_number,
     .min = 1,
     .max = 4096,
     .wants = "",
     .help = "most pipes per worker, for io_uring's --file-send splice and\n"
             "for HTTP/2 DATA frames of files on both engines (64; fewer\n"
             "or smaller when the pipe and fd limits say so, see -v); more\n"
             "concurrent downloads wait their turn, none fails"},
    {.name = "send-lowat",
     .metavar = "BYTES",
     PROCESS,
     FIELD(FIELD_SIZE, send_lowat),
     BYTES(0, INT_MAX, " like 128K (0 for none)"),
     .help = "most unsent bytes queued on a socket (TCP_NOTSENT_LOWAT,\n"
             "128K; K/M/G); 0 leaves the kernel's unlimited default"},
};
const struct option_area options_files = {rows, sizeof(rows) / sizeof(rows[0])};
