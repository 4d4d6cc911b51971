/* Runs in: supervisor */
/*
 * list.h - intrusive doubly linked lists (the classic circular kind).
 * A node belongs to at most one list at a time per embedded list_head;
 * list_del() leaves the node self-linked so a second del is harmless.
 */
#ifndef SANDBOXD_LIST_H
#define SANDBOXD_LIST_H

#include <stddef.h>

struct list_head {
    struct list_head *next, *prev;
};

static inline void list_init(struct list_head *h) { h->next = h->prev = h; }
static inline int  list_empty(const struct list_head *h) { return h->next == h; }
static inline int  list_linked(const struct list_head *n) { return n->next != n; }

static inline void list_add_tail(struct list_head *h, struct list_head *n)
{
    n->prev = h->prev;
    n->next = h;
    h->prev->next = n;
    h->prev = n;
}

static inline void list_add(struct list_head *h, struct list_head *n)
{
    list_add_tail(h->next, n);
}

static inline void list_del(struct list_head *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->next = n->prev = n;
}

#define list_entry(ptr, type, member) \
    ((type *)(void *)((char *)(ptr) - offsetof(type, member)))
#define list_first(h, type, member) list_entry((h)->next, type, member)
/* Iterate allowing deletion of the current node. */
#define list_for_each_safe(pos, tmp, h) \
    for ((pos) = (h)->next, (tmp) = (pos)->next; (pos) != (h); (pos) = (tmp), (tmp) = (pos)->next)

#endif
