/* The option table (src/config/options.c): what its columns promise of each other, --help as
 * the table prints it, the reload's "needs a restart" comparison, and the file's flags. */
#include <stdlib.h>

#include "config/options.h"
#include "unit.h"

TEST(options_table_is_consistent)
{
    size_t n = options_count();
    CHECK(n <= CONFIG_MAX_OPTIONS); /* struct config's key_lines has a slot per row */
    const struct option_info *t[CONFIG_MAX_OPTIONS];
    if (n > CONFIG_MAX_OPTIONS) /* options_init's assertion, before t would overflow */
        n = CONFIG_MAX_OPTIONS;
    for (size_t i = 0; i < n; i++)
        t[i] = options_row(i);
    CHECK(n > 50);
    for (size_t i = 0; i < n; i++) {
        const struct option_info *o = t[i];
        CHECK(o->set != NULL);
        CHECK((o->help == NULL) == o->file_only); /* every command-line option has a line */
        for (size_t j = 0; j < i; j++) {
            CHECK(strcmp(o->name, t[j]->name) != 0);
            CHECK(!o->short_name || o->short_name != t[j]->short_name);
        }
        if (i > 0 && t[i - 1]->file_only)
            CHECK(o->file_only); /* the file's own keys last: --help keeps the table's order */
        /* A site's options are read through the site a reload builds; everything the process
         * holds is kept, so a change must be comparable to be reported. */
        if (o->scope == SCOPE_SITE || o->scope == SCOPE_SITE_OWN)
            CHECK(o->reload);
        /* ... except --limit-conn, which the workers read from a reload's top level (issue 28) */
        if (o->scope == SCOPE_PROCESS && strcmp(o->name, "limit-conn") != 0)
            CHECK(!o->reload && (o->kind != FIELD_NONE || o->same != NULL));
        if (o->choices)
            CHECK(o->wants != NULL && o->choices[0].name != NULL);
        CHECK(!o->first || o->scope == SCOPE_ARGV || strcmp(o->name, "config") == 0);
    }
    CHECK(options_find("root") && options_find("root")->file_only);
    CHECK(options_find("no-such-option") == NULL);
}

TEST(options_help_lists_every_option_within_100_columns)
{
    char *text = NULL;
    size_t len = 0, n = options_count();
    FILE *f = open_memstream(&text, &len);
    options_help(f);
    fclose(f);
    const struct option_info *t[CONFIG_MAX_OPTIONS];
    if (n > CONFIG_MAX_OPTIONS) /* options_init's assertion, before t would overflow */
        n = CONFIG_MAX_OPTIONS;
    for (size_t i = 0; i < n; i++)
        t[i] = options_row(i);
    for (size_t i = 0; i < n; i++) {
        char want[64];
        snprintf(want, sizeof(want), "--%s ", t[i]->name);
        CHECK((strstr(text, want) != NULL) == !t[i]->file_only);
    }
    for (char *line = text, *end; *line; line = end + 1) {
        end = strchr(line, '\n');
        CHECK(end && end - line <= 100);
        if (!end)
            break;
    }
    CHECK(strncmp(text, "Usage: ringhttpd [options] [DOCROOT]\n", 37) == 0);
    CHECK(strstr(text, "  -p, --port PORT            TCP port") != NULL);
    CHECK(strstr(text, "      --redirect 'FROM TO [STATUS]'  redirect FROM") != NULL);
    free(text);
}

TEST(options_restart_needed_names_what_changed)
{
    struct config a, b;
    char what[256];
    options_init(&a);
    options_init(&b);
    CHECK(!options_restart_needed(&a, &b, what, sizeof(what)));
    b.splice_pipes = 3;
    b.verbose = true;
    b.autoindex = true; /* a site's: a reload applies it */
    CHECK(options_restart_needed(&a, &b, what, sizeof(what)));
    CHECK(strcmp(what, "splice-pipes/verbose") == 0);
    b = a;
    b.landlock = false; /* --no-landlock */
    b.access_log = "/var/log/x.log";
    CHECK(options_restart_needed(&a, &b, what, sizeof(what)));
    CHECK(strcmp(what, "access-log/no-landlock") == 0);
    /* tls-port 0 in the re-read file asks for no other port than the one the server got */
    a.tls = b.tls = true;
    b = a;
    a.tls_port = 8443;
    CHECK(!options_restart_needed(&a, &b, what, sizeof(what)));
    b.tls_port = 9443;
    CHECK(options_restart_needed(&a, &b, what, sizeof(what)) && strcmp(what, "tls-port") == 0);
}

TEST(options_set_flags_and_scopes)
{
    struct config top, site;
    struct config_src src = {.file = "f.yaml", .line = 1, .key = "autoindex"};
    options_init(&top);
    top.src = &src;
    CHECK_INT(options_set(&top, "autoindex", "yes"), 0);
    CHECK(top.autoindex);
    CHECK_INT(options_set(&top, "no-landlock", "on"), 0);
    CHECK(!top.landlock);
    CHECK_INT(options_set(&top, "no-landlock", "false"), 0);
    CHECK(top.landlock);
    CHECK_INT(options_set(&top, "autoindex", "maybe"), 2);
    CHECK_INT(options_set(&top, "hosts", "a.test"), 2); /* a site's own */
    CHECK_INT(options_set(&top, "help", "true"), 2);    /* the command line's only */
    CHECK_INT(options_set(&top, "engine", "epoll"), 0);
    CHECK_INT(top.engine, ENGINE_EPOLL);
    CHECK_INT(options_set(&top, "engine", "io_uring"), 0);
    CHECK_INT(top.engine, ENGINE_URING);
    CHECK_INT(options_set(&top, "threads", "0"), 2);
    CHECK_INT(options_set(&top, "send-lowat", "3G"), 2); /* past INT_MAX */
    CHECK_INT(options_site_init(&site, &top), 0);
    struct config_src in_site = {.file = "f.yaml", .line = 3, .key = "port", .site = true};
    site.src = &in_site;
    CHECK_INT(options_set(&site, "port", "81"), 2); /* the process's */
    CHECK_INT(options_set(&site, "hosts", "A.Test"), 0);
    CHECK(site.num_hosts == 1 && strcmp(site.hosts[0], "a.test") == 0);
    CHECK_INT(options_set(&site, "autoindex", "false"), 0); /* the opposite of its parent's */
    CHECK(!site.autoindex && top.autoindex);
    site.src = top.src = NULL;
    top.sites = malloc(sizeof(site)); /* options_free releases a site with its top level */
    CHECK(top.sites != NULL);
    top.sites[0] = site;
    top.num_sites = 1;
    options_free(&top);
}

/* Issue 36: YAML's booleans for every on/off value, a file's relative names found in its
 * directory (the command line's left alone), each key's line kept, "did you mean". */
TEST(options_booleans_relative_names_lines_and_near)
{
    struct config top;
    struct config_src src = {.file = "/etc/r/r.yaml", .dir = "/etc/r/", .line = 4, .key = "k"};
    options_init(&top);
    top.src = &src;
    CHECK_INT(options_set(&top, "compress", "False"), 0);
    CHECK(!top.compress);
    CHECK_INT(options_set(&top, "compress", "YES"), 0);
    CHECK(top.compress);
    CHECK_INT(options_set(&top, "compress", "maybe"), 2);
    CHECK_INT(options_set(&top, "root", "www"), 0);
    CHECK(strcmp(top.docroot, "/etc/r/www") == 0);
    CHECK_INT(options_set(&top, "root", "/srv/www"), 0);
    CHECK(strcmp(top.docroot, "/srv/www") == 0);
    CHECK_INT(options_set(&top, "access-log", "-"), 0);
    CHECK(strcmp(top.access_log, "-") == 0);
    CHECK_INT(options_set(&top, "access-log", "logs/a.log"), 0);
    CHECK(strcmp(top.access_log, "/etc/r/logs/a.log") == 0);
    src.line = 7;
    CHECK_INT(options_set(&top, "basic-auth", "/staff/=staff.htpasswd"), 0);
    CHECK(strcmp(top.auths[0].htpasswd, "/etc/r/staff.htpasswd") == 0);
    CHECK(strcmp(top.auths[0].prefix, "/staff/") == 0);
    CHECK_INT(options_line(&top, "basic-auth"), 7);
    CHECK_INT(options_line(&top, "root"), 4);
    CHECK_INT(options_line(&top, "port"), 0);
    CHECK(!options_given(&top, "port") && options_given(&top, "root"));
    struct config_src argv = {0}; /* the command line's names stay as given */
    top.src = &argv;
    CHECK_INT(options_apply(&top, options_find("root"), "here"), 0);
    CHECK(strcmp(top.docroot, "here") == 0);
    CHECK_INT(options_line(&top, "root"), 0);
    CHECK(options_given(&top, "root"));
    top.src = NULL;
    CHECK(strcmp(options_near("autoindx", false), "autoindex") == 0);
    CHECK(strcmp(options_near("compres-types", false), "compress-types") == 0);
    CHECK(strcmp(options_near("tls-prot", false), "tls-port") == 0);
    CHECK(options_near("bogus", false) == NULL);
    CHECK(options_near("rot", false) == NULL); /* root is the file's only */
    CHECK(strcmp(options_near("rot", true), "root") == 0);
    options_free(&top);
}

/* Issue 39: --pages makes clean-urls redirect the default only where clean-urls was not given;
 * --index names are single file names, several to a value; --fallback's prefixes are
 * normalised and one per prefix (the last wins), a site's list replacing its parent's. */
TEST(options_pages_index_and_fallback_prefixes)
{
    struct config top, site;
    struct config_src src = {.file = "f.yaml", .line = 1, .key = "pages"};
    options_init(&top);
    top.src = &src;
    CHECK_INT(top.clean_urls, CLEAN_URLS_OFF);
    CHECK_INT(options_set(&top, "pages", "yes"), 0);
    CHECK(top.pages);
    CHECK_INT(top.clean_urls, CLEAN_URLS_REDIRECT);
    CHECK_INT(options_set(&top, "clean-urls", "on"), 0);
    CHECK_INT(options_set(&top, "pages", "true"), 0); /* given: it stands */
    CHECK_INT(top.clean_urls, CLEAN_URLS_ON);
    CHECK_INT(options_set(&top, "clean-urls", "yes"), 0);
    CHECK_INT(top.clean_urls, CLEAN_URLS_ON);
    CHECK_INT(options_set(&top, "clean-urls", "sometimes"), 2);
    CHECK_INT(options_set(&top, "trailing-slash", "never"), 0);
    CHECK_INT(top.trailing_slash, SLASH_NEVER);
    CHECK_INT(options_set(&top, "index", " index.html  index.htm "), 0);
    CHECK(top.num_index == 2 && strcmp(top.index_names[1], "index.htm") == 0);
    CHECK_INT(options_set(&top, "index", "../up.html"), 2);
    CHECK_INT(options_set(&top, "index", ".index.html"), 2);
    CHECK_INT(options_set(&top, "index", "   "), 2);
    CHECK_INT(options_set(&top, "fallback", "/app/=/app/index.html"), 0);
    CHECK_INT(options_set(&top, "fallback", "/index.html"), 0);
    CHECK_INT(options_set(&top, "fallback", "/./app//=/app/shell.html"), 0); /* the same prefix */
    CHECK_INT(top.num_fallbacks, 2);
    CHECK(strcmp(top.fallbacks[0].prefix, "app") == 0 && top.fallbacks[0].prefix_len == 3);
    CHECK(strcmp(top.fallbacks[0].path, "app/shell.html") == 0);
    CHECK(strcmp(top.fallbacks[1].prefix, "") == 0);
    CHECK_INT(options_set(&top, "fallback", "/app/=relative.html"), 2);
    CHECK_INT(options_set(&top, "fallback", "/../=/x.html"), 0); /* climbs nowhere: the root */
    CHECK(strcmp(top.fallbacks[1].path, "x.html") == 0);
    CHECK_INT(options_site_init(&site, &top), 0);
    struct config_src in_site = {.file = "f.yaml", .line = 3, .key = "fallback", .site = true};
    site.src = &in_site;
    CHECK_INT(site.num_fallbacks, 2); /* inherited */
    CHECK_INT(options_set(&site, "fallback", "/docs=/docs/index.html"), 0);
    CHECK_INT(site.num_fallbacks, 1); /* the site's first replaces the list */
    CHECK_INT(options_set(&site, "pages", "false"), 0);
    CHECK(!site.pages && site.clean_urls == CLEAN_URLS_ON); /* clean-urls was given above */
    site.src = top.src = NULL;
    top.sites = malloc(sizeof(site));
    CHECK(top.sites != NULL);
    top.sites[0] = site;
    top.num_sites = 1;
    options_free(&top);
}

/* Issue 38: --bind's entries, parsed in place (the pool's copy of the argument). */
TEST(options_bind_entries_and_their_words)
{
    struct config c;
    struct config_src src = {.file = "f.yaml", .line = 1, .key = "bind"};
    options_init(&c);
    c.src = &src;
    char a[] = "127.0.0.1", b[] = "[::1]:8081 tls=8444 proxy",
         u[] = "unix:/run/r.sock mode=0660 "
               "owner=www-data:haproxy",
         s[] = "*:90", v6[] = "::1", n[] = "proxy_protocol", t[] = "unix:/run/t.sock tls proxy";
    CHECK_INT(options_set(&c, "bind", a), 0);
    CHECK_INT(options_set(&c, "bind", b), 0);
    CHECK_INT(options_set(&c, "bind", u), 0);
    CHECK_INT(options_set(&c, "bind", s), 0);
    CHECK_INT(options_set(&c, "bind", v6), 0);
    CHECK_INT(options_set(&c, "bind", t), 0);
    CHECK_INT(c.num_binds, 6);
    const struct config_bind *e = c.binds;
    CHECK(strcmp(e[0].host, "127.0.0.1") == 0 && e[0].port == -1 && e[0].tls_port == -1 &&
          !e[0].proxy && !e[0].path);
    CHECK(strcmp(e[1].host, "::1") == 0 && e[1].port == 8081 && e[1].tls_port == 8444 &&
          e[1].proxy);
    CHECK(strcmp(e[2].path, "/run/r.sock") == 0 && e[2].mode == 0660 &&
          strcmp(e[2].owner, "www-data:haproxy") == 0 && !e[2].host);
    CHECK(!e[3].host && !e[3].path && e[3].port == 90);      /* both families */
    CHECK(strcmp(e[4].host, "::1") == 0 && e[4].port == -1); /* bare IPv6: no port */
    CHECK(e[5].tls && e[5].proxy && !e[2].tls && strcmp(e[5].path, "/run/t.sock") == 0);
    CHECK_INT(options_set(&c, "bind", n), 2); /* a word is not an address */
    const char *bad[] = {"",
                         "example.com",
                         "127.0.0.1:65536",
                         "[::1",
                         "[::1]x",
                         "127.0.0.1 mode=0600",
                         "unix:/r.sock tls=1",
                         "unix:/r.sock mode=0800",
                         "unix:/r.sock mode=",
                         "unix:r.sock",
                         "127.0.0.1 tls=x",
                         "127.0.0.1 tls",
                         "127.0.0.1 prox"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char copy[64];
        snprintf(copy, sizeof(copy), "%s", bad[i]);
        CHECK_INT(options_set(&c, "bind", copy), 2);
    }
    char w[] = "10.0.0.1";
    for (int i = c.num_binds; i < CONFIG_MAX_BINDS; i++)
        CHECK_INT(options_set(&c, "bind", w), 0);
    CHECK_INT(options_set(&c, "bind", w), 2); /* one more than the table holds */
    c.src = NULL;
    struct config d = c;
    CHECK(!options_restart_needed(&c, &d, (char[64]){0}, 64));
    d.binds[1].proxy = false;
    char what[64];
    CHECK(options_restart_needed(&c, &d, what, sizeof(what)) && strcmp(what, "bind") == 0);
    options_free(&c); /* d is a shallow copy of it */
}
