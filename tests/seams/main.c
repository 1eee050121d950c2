/* ringhttpd-test: ringhttpd with the seams' test doubles, which the environment picks:
 * RINGHTTPD_TEST_TRANSPORT=copy (src/transport_copy.c) on the HTTP port and
 * RINGHTTPD_TEST_PROTO=lines (src/proto_lines.c) after the HTTP/2 preface. Built beside the
 * server (build/ringhttpd-test) for tests/integration/test_transport.py; the binary a user runs
 * (src/main.c) links neither double and reads neither variable. */
#include "config/config.h"
#include "site/site.h"
#include "conn/proto.h"
#include "server/server.h"
#include "conn/transport.h"

int main(int argc, char **argv)
{
    const struct server_seams seams = {.xport = transport_test_hook(), .proto = proto_test_hook()};
    struct config cfg;
    int rc = config_parse(&cfg, argc, argv, server_config_checks());
    if (rc == CONFIG_DONE && cfg.check_only)
        config_ok(&cfg);
    if (rc == 0)
        rc = server_run(&cfg, &seams);
    config_free(&cfg);
    return rc == CONFIG_DONE ? 0 : rc;
}
