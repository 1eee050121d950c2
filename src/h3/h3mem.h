/* h3mem: the allocator a worker's nghttp3 connections use (nghttp3_mem): blocks in six size
 * classes (64 B to 2 KiB) kept on free lists for the next stream, larger ones from malloc.
 * nghttp3 allocates and frees about eight blocks per request (streams, frames, queues), which
 * cost ~2,500 instructions a request through malloc (bench/README.md, "HTTP/3").
 * Must not: be shared between threads; keep more than H3MEM_KEEP blocks of a class.
 * Ownership: the worker's h3 state owns it; every nghttp3 connection using it must be deleted
 * before h3mem_fini. Under AddressSanitizer it is plain malloc, so ASan sees every block. */
#ifndef H3_H3MEM_H
#define H3_H3MEM_H

#include <nghttp3/nghttp3.h>

#define H3MEM_CLASSES 6
#define H3MEM_KEEP 256 /* free blocks kept per class at most: ~1 MiB a worker */

struct h3mem {
    nghttp3_mem mem; /* what nghttp3_conn_server_new takes */
    struct h3mem_block *free[H3MEM_CLASSES];
    unsigned nfree[H3MEM_CLASSES];
};

void h3mem_init(struct h3mem *m);
void h3mem_fini(struct h3mem *m);

#endif
