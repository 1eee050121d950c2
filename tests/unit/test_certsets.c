/* Unit tests for rt/certsets: pairs of one name set are one set wherever they stand in the
 * list (issue 37), sets numbered by their first pair, and the key sees subject and
 * subjectAltName both. */
#include "rt/certsets.h"

#include "unit.h"

TEST(certsets_group_apart_pairs_in_first_order)
{
    unsigned char a[CERTSET_KEY_LEN], b[CERTSET_KEY_LEN], c[CERTSET_KEY_LEN];
    certset_key("CN=a", 4, "DNS:a", 5, a);
    certset_key("CN=b", 4, "DNS:b", 5, b);
    certset_key("CN=c", 4, NULL, 0, c);
    struct certsets s;
    CHECK_INT(certsets_init(&s, 5), 0);
    CHECK_INT(certsets_add(&s, a), 0); /* a's RSA pair */
    CHECK_INT(certsets_add(&s, b), 1);
    CHECK_INT(certsets_add(&s, a), 0); /* a's ECDSA pair, b's between them */
    CHECK_INT(certsets_add(&s, c), 2);
    CHECK_INT(certsets_add(&s, b), 1);
    CHECK_INT(s.num, 3);
    certsets_free(&s);
}

TEST(certsets_key_reads_subject_and_san)
{
    unsigned char k1[CERTSET_KEY_LEN], k2[CERTSET_KEY_LEN], k3[CERTSET_KEY_LEN];
    certset_key("CN=a", 4, "DNS:a", 5, k1);
    certset_key("CN=a", 4, "DNS:x", 5, k2);
    certset_key("CN=x", 4, "DNS:a", 5, k3);
    CHECK(memcmp(k1, k2, sizeof(k1)) != 0);
    CHECK(memcmp(k1, k3, sizeof(k1)) != 0);
    certset_key("CN=a", 4, "DNS:a", 5, k2);
    CHECK(memcmp(k1, k2, sizeof(k1)) == 0);
}

TEST(certsets_many_pairs)
{
    /* 10,000 pairs (issue 40), every other one a second key type of the one before */
    struct certsets s;
    CHECK_INT(certsets_init(&s, 10000), 0);
    for (int i = 0; i < 10000; i++) {
        unsigned char k[CERTSET_KEY_LEN];
        int n = i / 2;
        certset_key(&n, sizeof(n), NULL, 0, k);
        CHECK_INT(certsets_add(&s, k), n);
    }
    CHECK_INT(s.num, 5000);
    certsets_free(&s);
}
