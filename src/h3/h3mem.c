/* nghttp3's allocator; see h3mem.h. */
#include "h3/h3mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define H3MEM_POOL 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define H3MEM_POOL 0
#endif
#endif
#ifndef H3MEM_POOL
#define H3MEM_POOL 1
#endif

#define SMALLEST 64u
#define LARGE H3MEM_CLASSES /* the class of a block from malloc, freed to malloc */

/* Every block starts with this header (16 bytes, so what follows keeps malloc's alignment). */
struct h3mem_block {
    union {
        struct h3mem_block *next; /* on a free list */
        size_t size;              /* in use: the bytes it can hold */
    };
    size_t cls;
};
_Static_assert(sizeof(struct h3mem_block) == 16, "the header keeps 16-byte alignment");

static size_t class_of(size_t size)
{
    size_t cls = 0;
    for (size_t cap = SMALLEST; cls < H3MEM_CLASSES; cls++, cap <<= 1)
        if (size <= cap)
            return cls;
    return LARGE;
}

static void *pool_malloc(size_t size, void *user)
{
    struct h3mem *m = user;
    size_t cls = class_of(size);
    struct h3mem_block *b;
    if (cls != LARGE && m->free[cls]) {
        b = m->free[cls];
        m->free[cls] = b->next;
        m->nfree[cls]--;
    } else {
        size_t cap = cls == LARGE ? size : (size_t)SMALLEST << cls;
        if (!(b = malloc(sizeof(*b) + cap)))
            return NULL;
    }
    b->size = cls == LARGE ? size : (size_t)SMALLEST << cls;
    b->cls = cls;
    return b + 1;
}

static void pool_free(void *ptr, void *user)
{
    struct h3mem *m = user;
    if (!ptr)
        return;
    struct h3mem_block *b = (struct h3mem_block *)ptr - 1;
    size_t cls = b->cls;
    if (cls == LARGE || m->nfree[cls] == H3MEM_KEEP) {
        free(b);
        return;
    }
    b->next = m->free[cls];
    m->free[cls] = b;
    m->nfree[cls]++;
}

static void *pool_calloc(size_t nmemb, size_t size, void *user)
{
    if (size && nmemb > SIZE_MAX / size)
        return NULL;
    void *p = pool_malloc(nmemb * size, user);
    if (p)
        memset(p, 0, nmemb * size);
    return p;
}

static void *pool_realloc(void *ptr, size_t size, void *user)
{
    if (!ptr)
        return pool_malloc(size, user);
    struct h3mem_block *b = (struct h3mem_block *)ptr - 1;
    if (size <= b->size)
        return ptr;
    void *p = pool_malloc(size, user);
    if (p) {
        memcpy(p, ptr, b->size);
        pool_free(ptr, user);
    }
    return p;
}

static void *sys_malloc(size_t size, void *user)
{
    (void)user;
    return malloc(size);
}

static void sys_free(void *ptr, void *user)
{
    (void)user;
    free(ptr);
}

static void *sys_calloc(size_t nmemb, size_t size, void *user)
{
    (void)user;
    return calloc(nmemb, size);
}

static void *sys_realloc(void *ptr, size_t size, void *user)
{
    (void)user;
    return realloc(ptr, size);
}

void h3mem_init(struct h3mem *m)
{
    memset(m, 0, sizeof(*m));
    m->mem = H3MEM_POOL ? (nghttp3_mem){m, pool_malloc, pool_free, pool_calloc, pool_realloc}
                        : (nghttp3_mem){m, sys_malloc, sys_free, sys_calloc, sys_realloc};
}

void h3mem_fini(struct h3mem *m)
{
    for (size_t cls = 0; cls < H3MEM_CLASSES; cls++)
        while (m->free[cls]) {
            struct h3mem_block *b = m->free[cls];
            m->free[cls] = b->next;
            free(b);
        }
}
