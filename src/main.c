/* ringhttpd: argv -> config -> server. Nothing else lives here. */
#include "config/config.h"
#include "server/server.h"

int main(int argc, char **argv)
{
    struct config cfg;
    int rc = config_parse_checked(&cfg, argc, argv, server_config_checks());
    if (rc == 0)
        rc = server_run(&cfg, NULL); /* no test seams: see tests/seams/main.c */
    config_free(&cfg); /* also after a refused option: the file's strings were allocated */
    return rc == CONFIG_DONE ? 0 : rc;
}
