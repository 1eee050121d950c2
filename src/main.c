/* ringhttpd: argv -> config -> server. Nothing else lives here. */
#include "config/config.h"
#include "server/server.h"
#include "site/site.h"

int main(int argc, char **argv)
{
    struct config cfg;
    int rc = config_parse(&cfg, argc, argv, server_config_checks());
    if (rc == CONFIG_DONE && cfg.check_only) {
        if (site_check_rules(&cfg) != 0)
            rc = 1; /* a site's _redirects or _headers has lines it cannot use (printed) */
        else
            config_ok(&cfg);
    }
    if (rc == 0)
        rc = server_run(&cfg, NULL); /* no test seams: see tests/seams/main.c */
    config_free(&cfg); /* also after a refused option: the file's strings were allocated */
    return rc == CONFIG_DONE ? 0 : rc;
}
