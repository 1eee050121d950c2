/* libFuzzer target for server/acme/dnsmsg (issue 40): the input as a DNS answer (with the
 * question's TXT name and value to look for), its TSIG verified when it has one, and as a TSIG
 * key file. Every accepted answer's findings stay inside the input; the input is copied to a
 * buffer of its exact size so ASan sees any read past its end. */
#include "server/acme/dnsmsg.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *m = malloc(size ? size : 1);
    memcpy(m, data, size);
    struct dnsmsg_reply r;
    static const struct dnsmsg_key k = {
        .name = "ringhttpd-test", .secret = "0123456789", .len = 10};
    static const uint8_t mac[32] = {1};
    if (dnsmsg_parse(m, size, "_acme-challenge.example.test", "value", &r) == 0) {
        assert(strlen(r.zone) < DNSMSG_NAME_MAX);
        if (r.tsig_at) {
            assert(r.tsig_at < size);
            assert(r.tsig_mac >= m && r.tsig_mac + r.tsig_mac_len <= m + size);
            assert(r.tsig_other >= m && r.tsig_other + r.tsig_other_len <= m + size);
            (void)dnsmsg_tsig_verify(m, size, &r, &k, mac, 1700000000);
        }
    }
    struct dnsmsg_key parsed;
    char why[256];
    if (dnsmsg_key_parse((const char *)m, size, &parsed, why, sizeof(why)) == 0)
        assert(parsed.len > 0 && parsed.len <= sizeof(parsed.secret) && parsed.name[0]);
    free(m);
    return 0;
}
