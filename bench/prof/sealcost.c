/* bench/prof/sealcost: what the sealer's calls into OpenSSL 3.0 cost per TLS 1.3 record of
 * 1 KiB (AES-128-GCM), by mode (issue 41, stop 50; the figures are in bench/README.md):
 *   0  the nonce by EVP_EncryptInit_ex, the tag by EVP_CIPHER_CTX_ctrl, three updates
 *      (headers, body, the type byte), as tls_record.c sealed before
 *   1  the nonce by the TLS fixed-IV parameter at length -1, the tag by
 *      EVP_CIPHER_CTX_get_params, three updates
 *   2  as 1, the plaintext in one update
 * Every mode prints the same checksum of ciphertext and tags, or the modes differ in more than
 * cost. Usage: cc -O2 -o sealcost bench/prof/sealcost.c -lcrypto
 *              valgrind --tool=callgrind ./sealcost MODE 10000 (minus ./sealcost MODE 1) */
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char key[16], iv[12], pt[1100], ct[1200], tag[16];

static void seal(EVP_CIPHER_CTX *e, int mode, unsigned long seq)
{
    unsigned char nonce[12], aad[5] = {23, 3, 3, 4, 0x50}, type = 23;
    int n;
    memcpy(nonce, iv, 12);
    for (int k = 0; k < 8; k++)
        nonce[4 + k] ^= (unsigned char)(seq >> (56 - 8 * k));
    if (mode == 0) {
        EVP_EncryptInit_ex(e, NULL, NULL, NULL, nonce);
    } else {
        OSSL_PARAM p[2] = {OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TLS1_IV_FIXED,
                                                             nonce, (size_t)-1),
                           OSSL_PARAM_END};
        if (EVP_CIPHER_CTX_set_params(e, p) != 1) {
            fputs("the fixed-IV parameter was refused\n", stderr);
            exit(1);
        }
    }
    EVP_EncryptUpdate(e, NULL, &n, aad, 5);
    if (mode == 2) {
        memcpy(pt + 1061, &type, 1);
        EVP_EncryptUpdate(e, ct, &n, pt, 1062);
    } else {
        EVP_EncryptUpdate(e, ct, &n, pt, 1000);
        EVP_EncryptUpdate(e, ct + 1000, &n, pt + 1000, 61);
        EVP_EncryptUpdate(e, ct + 1061, &n, &type, 1);
    }
    EVP_EncryptFinal_ex(e, ct + 1062, &n);
    if (mode == 0) {
        EVP_CIPHER_CTX_ctrl(e, EVP_CTRL_AEAD_GET_TAG, 16, tag);
    } else {
        OSSL_PARAM p[2] = {OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, tag, 16),
                           OSSL_PARAM_END};
        EVP_CIPHER_CTX_get_params(e, p);
    }
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    int mode = atoi(argv[1]), n = atoi(argv[2]);
    for (int i = 0; i < 16; i++)
        key[i] = (unsigned char)i, iv[i % 12] = (unsigned char)(3 * i);
    for (int i = 0; i < 1100; i++)
        pt[i] = (unsigned char)i;
    pt[1061] = 23; /* mode 2's type byte, where the others pass it on its own */
    EVP_CIPHER_CTX *e = EVP_CIPHER_CTX_new();
    EVP_EncryptInit_ex(e, EVP_aes_128_gcm(), NULL, key, NULL);
    unsigned char sum[16] = {0};
    for (int i = 0; i < n; i++) {
        seal(e, mode, (unsigned long)i);
        for (int k = 0; k < 16; k++)
            sum[k] ^= tag[k] ^ ct[k * 60];
    }
    for (int k = 0; k < 16; k++)
        printf("%02x", sum[k]);
    puts("");
    EVP_CIPHER_CTX_free(e);
    return 0;
}
