/* options: prints the option table (src/config/options.c), one option a line, for the tests
 * that compare it with --help, README and the man page (test_packaging.py, test_sites.py):
 *   NAME SCOPE RELOAD ARG WHERE
 * SCOPE process, site, site-own or argv; RELOAD reload or restart; ARG value or flag; WHERE
 * argv+file, file (a key of the file only) or argv. */
#include <stdio.h>

#include "config/options.h"

int main(void)
{
    static const char *const scopes[] = {
        [SCOPE_PROCESS] = "process",
        [SCOPE_SITE] = "site",
        [SCOPE_SITE_OWN] = "site-own",
        [SCOPE_ARGV] = "argv",
    };
    size_t n = options_count();
    const struct option_info *t[CONFIG_MAX_OPTIONS];
    if (n > CONFIG_MAX_OPTIONS) /* options_init's assertion, before t would overflow */
        n = CONFIG_MAX_OPTIONS;
    for (size_t i = 0; i < n; i++)
        t[i] = options_row(i);
    for (size_t i = 0; i < n; i++)
        printf("%s %s %s %s %s\n", t[i]->name, scopes[t[i]->scope],
               t[i]->reload ? "reload" : "restart", t[i]->metavar ? "value" : "flag",
               t[i]->file_only             ? "file"
               : t[i]->scope == SCOPE_ARGV ? "argv"
                                           : "argv+file");
    return 0;
}
