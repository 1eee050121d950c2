/* SQEs that are never NULL; see sqe.h. */
#include "engine/sqe.h"

#include <stdio.h>
#include <stdlib.h>

struct io_uring_sqe *sqe_get_slow(struct io_uring *ring, struct sqe_spill *s)
{
    if (!s->spilling) {
        io_uring_submit(ring); /* SQ full mid-turn: flush it early */
        struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
        if (sqe)
            return sqe;
    }
    struct sqe_spilled *sp = s->free;
    if (sp) {
        s->free = sp->next;
    } else if (!(sp = malloc(sizeof(*sp)))) {
        /* Neither the kernel nor the allocator takes 64 bytes: an operation promised to a
         * connection cannot be kept, and pretending would leave it hanging forever. */
        fprintf(stderr, "ringhttpd: io_uring: no room for an SQE and out of memory\n");
        abort();
    }
    s->spilling = true;
    sp->next = NULL;
    if (s->tail)
        s->tail->next = sp;
    else
        s->head = sp;
    s->tail = sp;
    return &sp->sqe;
}

void sqe_reserve(struct io_uring *ring, struct sqe_spill *s, unsigned n)
{
    if (s->spilling || io_uring_sq_space_left(ring) >= n)
        return;
    io_uring_submit(ring);
    if (io_uring_sq_space_left(ring) < n)
        s->spilling = true; /* still no room: spill from now on, keeping the chain whole */
}

void sqe_flush(struct io_uring *ring, struct sqe_spill *s)
{
    while (s->head) {
        unsigned need = (s->head->sqe.flags & IOSQE_IO_LINK) && s->head->next ? 2 : 1;
        if (io_uring_sq_space_left(ring) < need &&
            (io_uring_submit(ring) < 0 || io_uring_sq_space_left(ring) < need))
            return;
        for (unsigned i = 0; i < need; i++) {
            struct sqe_spilled *sp = s->head;
            *io_uring_get_sqe(ring) = sp->sqe; /* room was checked above */
            s->head = sp->next;
            sp->next = s->free;
            s->free = sp;
        }
        if (!s->head)
            s->tail = NULL;
    }
    s->spilling = false;
}

static void free_list(struct sqe_spilled *sp)
{
    while (sp) {
        struct sqe_spilled *next = sp->next;
        free(sp);
        sp = next;
    }
}

void sqe_spill_free(struct sqe_spill *s)
{
    free_list(s->head);
    free_list(s->free);
    *s = (struct sqe_spill){0};
}
