/* The unit test runner: runs every registered test, prints "N passed, N failed". */
#include "unit.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_TESTS 1024

#define MAX_GUARDS 16384 /* guarded copies alive at once within one test */

struct registry {
    const char *name[MAX_TESTS];
    void (*fn[MAX_TESTS])(void);
    int count;
    int failed_checks;
    /* unit_guard mappings of the running test, unmapped when it ends: kept for the whole run
     * they would exhaust vm.max_map_count */
    void *guard_map[MAX_GUARDS];
    size_t guard_len[MAX_GUARDS];
    int guards;
};

/* Tests register from constructors before main runs, so the registry has to be reachable
 * without an argument; this is test code, not the server. */
static struct registry reg;

void unit_register(const char *name, void (*fn)(void))
{
    if (reg.count == MAX_TESTS) {
        fprintf(stderr, "unit: more than %d tests\n", MAX_TESTS);
        exit(2);
    }
    reg.name[reg.count] = name;
    reg.fn[reg.count] = fn;
    reg.count++;
}

void unit_fail(const char *file, int line, const char *expr)
{
    fprintf(stderr, "  FAIL %s:%d: %s\n", file, line, expr);
    reg.failed_checks++;
}

const char *unit_guard(const void *data, size_t len)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t pages = (len + page - 1) / page + 1;
    char *map =
        mmap(NULL, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
        perror("unit_guard: mmap");
        exit(2);
    }
    if (reg.guards == MAX_GUARDS) {
        fprintf(stderr, "unit_guard: more than %d copies in one test\n", MAX_GUARDS);
        exit(2);
    }
    reg.guard_map[reg.guards] = map;
    reg.guard_len[reg.guards++] = pages * page;
    char *guard = map + (pages - 1) * page;
    if (mprotect(guard, page, PROT_NONE) != 0) {
        perror("unit_guard: mprotect");
        exit(2);
    }
    char *copy = guard - len;
    if (len)
        memcpy(copy, data, len);
    return copy;
}

/* Hex to bytes ("8286 8441" -> 82 86 84 41); returns the length. */
size_t unit_unhex(const char *hex, uint8_t *out)
{
    size_t n = 0;
    for (const char *p = hex; *p;) {
        if (*p == ' ') {
            p++;
            continue;
        }
        unsigned v;
        sscanf(p, "%2x", &v);
        out[n++] = (uint8_t)v;
        p += 2;
    }
    return n;
}

const char *unit_guard_str(const char *s)
{
    return unit_guard(s, strlen(s));
}

int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL;
    int passed = 0, failed = 0;

    for (int i = 0; i < reg.count; i++) {
        if (only && !strstr(reg.name[i], only))
            continue;
        int before = reg.failed_checks;
        reg.fn[i]();
        while (reg.guards > 0) {
            reg.guards--;
            munmap(reg.guard_map[reg.guards], reg.guard_len[reg.guards]);
        }
        if (reg.failed_checks == before) {
            passed++;
        } else {
            fprintf(stderr, "FAILED: %s\n", reg.name[i]);
            failed++;
        }
    }
    printf("unit: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
