/* Name sets of certificates; see certsets.h. */
#include "rt/certsets.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/sha256.h"

void certset_key(const void *subject, size_t subject_len, const void *san, size_t san_len,
                 unsigned char key[CERTSET_KEY_LEN])
{
    struct sha256 s;
    sha256_init(&s);
    sha256_update(&s, subject, subject_len);
    if (san_len)
        sha256_update(&s, san, san_len);
    sha256_final(&s, key);
}

int certsets_init(struct certsets *s, int pairs)
{
    size_t slots = 16;
    while (slots < 2 * (size_t)(pairs > 0 ? pairs : 1))
        slots *= 2;
    *s = (struct certsets){0};
    if (!(s->at = calloc(slots, sizeof(*s->at))) ||
        !(s->keys = calloc(pairs > 0 ? (size_t)pairs : 1, sizeof(*s->keys)))) {
        certsets_free(s);
        return -ENOMEM;
    }
    s->mask = (uint32_t)slots - 1;
    s->cap = pairs;
    return 0;
}

int certsets_add(struct certsets *s, const unsigned char key[CERTSET_KEY_LEN])
{
    uint32_t h;
    memcpy(&h, key, sizeof(h)); /* a SHA-256 is its own hash */
    for (uint32_t k = h & s->mask;; k = (k + 1) & s->mask) {
        if (!s->at[k]) {
            assert(s->num < s->cap);
            memcpy(s->keys[s->num], key, CERTSET_KEY_LEN);
            s->at[k] = (uint32_t)++s->num;
            return s->num - 1;
        }
        if (memcmp(s->keys[s->at[k] - 1], key, CERTSET_KEY_LEN) == 0)
            return (int)s->at[k] - 1;
    }
}

void certsets_free(struct certsets *s)
{
    free(s->at);
    free(s->keys);
    *s = (struct certsets){0};
}
