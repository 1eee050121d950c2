/* test_huff: the Huffman code both HPACK and QPACK use (core/huff.c), at every length its
 * word-at-a-time loops treat differently: round trips whose input ends at a guard page (a load
 * past the string's end crashes), and huff_encode_short's limit, never written past. */
#include "core/huff.h"

#include <errno.h>
#include <string.h>

#include "unit.h"

TEST(huff_round_trip_at_every_length)
{
    char text[80], back[160];
    uint8_t code[320];
    for (size_t n = 0; n <= sizeof(text); n++) {
        for (size_t i = 0; i < n;
             i++) /* letters, digits, punctuation and a rare byte now and then */
            text[i] = (char)(i % 13 == 12 ? 0xfe : "aZ0/-.;\" ex"[(i * 7 + n) % 11]);
        size_t len = huff_encoded_len(text, n);
        CHECK_INT(huff_encode(code, text, n), len);
        const uint8_t *in = (const uint8_t *)unit_guard(code, len);
        CHECK_INT(huff_decode(in, len, back, sizeof(back)), n); /* the fast path (room) */
        CHECK(memcmp(back, text, n) == 0);
        CHECK_INT(huff_decode(in, len, back, n), n); /* exactly the room: the careful path */
        CHECK(memcmp(back, text, n) == 0);
        CHECK_INT(huff_decode(in, len, NULL, 0), n);
        if (n)
            CHECK_INT(huff_decode(in, len, back, n - 1), -ENOSPC);
    }
}

TEST(huff_encode_short_keeps_to_its_limit)
{
    char text[64];
    uint8_t out[128];
    for (size_t n = 1; n <= sizeof(text); n++) {
        for (size_t i = 0; i < n; i++)
            text[i] = (char)(i % 5 == 4 ? '{' : 'e'); /* '{' is 15 bits, 'e' 5 */
        size_t len = huff_encoded_len(text, n);
        for (size_t limit = len > 6 ? len - 6 : 0; limit <= len + 1; limit++) {
            memset(out, 0xa5, sizeof(out));
            size_t k = huff_encode_short(out, text, n, limit);
            CHECK_INT(k, limit >= len ? len : 0);
            for (size_t i = limit; i < sizeof(out); i++)
                if (out[i] != 0xa5) {
                    CHECK(out[i] == 0xa5); /* written at or past the limit */
                    break;
                }
        }
    }
}

TEST(huff_decode_rejects_eos_inside_a_long_string)
{
    /* EOS (30 ones) after eight bytes of 'a': past the word-at-a-time loop's first refill */
    uint8_t code[32];
    char text[16], back[64];
    memset(text, 'a', sizeof(text));
    size_t len = huff_encode(code, text, 10); /* 'a' is 00011: 50 bits, 7 bytes, 6 of padding */
    code[len - 1] &= 0xc0;                    /* the padding cleared... */
    memset(code + len, 0xff, 4);              /* ...then EOS and more ones */
    const uint8_t *in = (const uint8_t *)unit_guard(code, len + 4);
    CHECK_INT(huff_decode(in, len + 4, back, sizeof(back)), -EPROTO);
}
