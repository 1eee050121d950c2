/* Unit tests for core/sha256: the FIPS 180-4 examples and block-boundary lengths. */
#include "core/sha256.h"

#include "unit.h"

static const char *hex(const unsigned char *d)
{
    static char buf[2 * SHA256_LEN + 1];
    for (int i = 0; i < SHA256_LEN; i++)
        snprintf(buf + 2 * i, 3, "%02x", d[i]);
    return buf;
}

static const char *digest(const char *s, size_t len)
{
    unsigned char d[SHA256_LEN];
    sha256(unit_guard(s, len), len, d);
    return hex(d);
}

#define CHECK_SHA(s, len, want) CHECK_MEM(digest(s, len), 64, want)

TEST(sha256_vectors)
{
    CHECK_SHA("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK_SHA("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK_SHA("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    char a[1000];
    memset(a, 'a', sizeof(a));
    /* 1000 bytes crosses several blocks and leaves a partial one */
    CHECK_SHA(a, 1000, "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

TEST(sha256_incremental_equals_one_shot)
{
    unsigned char whole[SHA256_LEN], parts[SHA256_LEN];
    char data[300];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (char)(i * 7);
    sha256(data, sizeof(data), whole);
    for (size_t cut = 0; cut <= sizeof(data); cut += 13) {
        struct sha256 s;
        sha256_init(&s);
        sha256_update(&s, data, cut);
        sha256_update(&s, data + cut, sizeof(data) - cut);
        sha256_final(&s, parts);
        CHECK(memcmp(whole, parts, SHA256_LEN) == 0);
    }
}
