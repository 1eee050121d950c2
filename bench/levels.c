/* levels: CPU time and ratio of each coding and level on a prefix of a file, the measurement
 * behind src/rt/compress.c's levels and cost model (README "Compression").
 *   cc -O2 bench/levels.c -o build/levels -lz -lbrotlienc -lzstd -ldeflate
 *   build/levels /usr/share/javascript/jquery/jquery.js 32768
 * zlib (zlib1g-dev) is here only as nginx's yardstick; the server uses libdeflate. Times are
 * CLOCK_PROCESS_CPUTIME_ID per call, averaged over 0.2 s of repeats, so a loaded machine
 * changes them less than wall-clock time would. */
#include <brotli/encode.h>
#include <libdeflate.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <zlib.h>
#include <zstd.h>

enum lib { ZLIB, LIBDEFLATE, BROTLI, ZSTD };

static double cpu_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static size_t once(enum lib lib, int level, const char *in, size_t n, unsigned char *out,
                   size_t cap)
{
    switch (lib) {
    case ZLIB: {
        uLongf len = cap;
        return compress2(out, &len, (const Bytef *)in, n, level) == Z_OK ? len : 0;
    }
    case LIBDEFLATE: {
        struct libdeflate_compressor *c = libdeflate_alloc_compressor(level);
        size_t len = c ? libdeflate_gzip_compress(c, in, n, out, cap) : 0;
        libdeflate_free_compressor(c);
        return len;
    }
    case BROTLI: {
        size_t len = cap;
        return BrotliEncoderCompress(level, BROTLI_DEFAULT_WINDOW, BROTLI_MODE_GENERIC, n,
                                     (const uint8_t *)in, &len, out) ? len : 0;
    }
    case ZSTD: {
        size_t len = ZSTD_compress(out, cap, in, n, level);
        return ZSTD_isError(len) ? 0 : len;
    }
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const struct {
        enum lib lib;
        const char *name;
        int levels[6];
    } runs[] = {
        {ZLIB, "zlib", {1, 6, 9}},
        {LIBDEFLATE, "libdeflate", {1, 6, 9, 12}},
        {BROTLI, "brotli", {1, 4, 5, 6, 9, 11}},
        {ZSTD, "zstd", {3, 9, 12, 15, 19}},
    };
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE [BYTES]\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    size_t want = argc > 2 ? strtoul(argv[2], NULL, 10) : (size_t)1 << 30;
    char *in = malloc(want < (1u << 30) ? want : (1u << 30));
    size_t n = fread(in, 1, want < (1u << 30) ? want : (1u << 30), f);
    fclose(f);
    size_t cap = n + n / 2 + 1024;
    unsigned char *out = malloc(cap);
    printf("%s: %zu bytes\n", argv[1], n);
    for (size_t r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
        for (int i = 0; i < 6 && runs[r].levels[i]; i++) {
            int reps = 0;
            size_t len;
            double t0 = cpu_seconds();
            do {
                len = once(runs[r].lib, runs[r].levels[i], in, n, out, cap);
                reps++;
            } while (cpu_seconds() - t0 < 0.2);
            printf("%-10s %2d: %8zu bytes (%5.1f%%) %8.3f ms\n", runs[r].name,
                   runs[r].levels[i], len, 100.0 * (double)len / (double)n,
                   (cpu_seconds() - t0) / reps * 1e3);
        }
    }
    free(out);
    free(in);
    return 0;
}
