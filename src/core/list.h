/* list: one intrusive doubly linked list (a ring through a head link of its own), for the
 * records that sit on several lists at once (HTTP/2 and HTTP/3 streams, HTTP/3 connections).
 * Must not: allocate, or know what it links (LIST_ITEM finds the record from its link).
 * Ownership: the records are their owner's; a list only threads them. An unlinked link has
 * next == NULL (list_link_init, list_remove), so "is it on a list" needs no flag beside it. */
#ifndef CORE_LIST_H
#define CORE_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct list {
    struct list *prev, *next;
};

/* The record of type `type` whose member `member` is the link l. */
#define LIST_ITEM(l, type, member) ((type *)(void *)((char *)(l)-offsetof(type, member)))

/* An empty list: its head links to itself. */
static inline void list_init(struct list *head)
{
    head->prev = head->next = head;
}

/* A record's link, on no list. */
static inline void list_link_init(struct list *l)
{
    l->prev = l->next = NULL;
}

static inline bool list_empty(const struct list *head)
{
    return head->next == head;
}

static inline bool list_linked(const struct list *l)
{
    return l->next != NULL;
}

/* The first record's link, or NULL for an empty list. */
static inline struct list *list_first(const struct list *head)
{
    return head->next == head ? NULL : head->next;
}

/* The link after l on the list headed by head, or NULL at its end. */
static inline struct list *list_after(const struct list *head, const struct list *l)
{
    return l->next == head ? NULL : l->next;
}

/* Links l just before pos (pos == head: at the end). */
static inline void list_insert_before(struct list *pos, struct list *l)
{
    l->prev = pos->prev;
    l->next = pos;
    pos->prev->next = l;
    pos->prev = l;
}

static inline void list_push_back(struct list *head, struct list *l)
{
    list_insert_before(head, l);
}

static inline void list_push_front(struct list *head, struct list *l)
{
    list_insert_before(head->next, l);
}

/* The record after link l of a list headed by head (by the offset of its link), or NULL at the
 * end or for an unlinked l; LIST_EACH's step. */
static inline void *list_item_after(const struct list *head, const struct list *l, size_t off)
{
    return l && l->next && l->next != head ? (char *)l->next - off : NULL;
}

/* Each record on the list headed by head, as `type *var` (member: its link); the next record
 * is taken before the body runs, so var may leave the list (or be freed) in it. */
#define LIST_EACH(type, var, head, member)                                                         \
    for (type *var = list_item_after((head), (head), offsetof(type, member)),                      \
              *var##_next = var ? list_item_after((head), &var->member, offsetof(type, member))    \
                                : NULL;                                                            \
         var; var = var##_next,                                                                    \
              var##_next = var ? list_item_after((head), &var->member, offsetof(type, member))     \
                               : NULL)

/* Unlinks l (which must be linked). */
static inline void list_remove(struct list *l)
{
    l->prev->next = l->next;
    l->next->prev = l->prev;
    l->prev = l->next = NULL;
}

#endif
