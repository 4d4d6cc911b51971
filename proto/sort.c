/*
 * sort.c - heapsort without allocation or system calls (contract: sort.h).
 *
 * The array is first arranged as a max-heap (each element at i is at least
 * its children at 2i+1 and 2i+2), then its largest element is swapped to
 * the end, the heap shrinks by one and its new root sinks to its place,
 * until one element is left.
 */
#include "proto/sort.h"

#include <string.h>

typedef int (*sort_cmp)(const void *, const void *);

/* Exchange size bytes at a and b, through a small buffer on the stack. */
static void swap(unsigned char *a, unsigned char *b, size_t size)
{
    unsigned char t[64];
    size_t k;

    while (size > 0) {
        k = size < sizeof t ? size : sizeof t;
        memcpy(t, a, k);
        memcpy(a, b, k);
        memcpy(b, t, k);
        a += k;
        b += k;
        size -= k;
    }
}

/* Sink the element at root of the heap base[0..n) until neither child is
 * larger.  root has a child exactly when root <= (n - 2) / 2, which is how
 * the loop avoids computing 2 * root + 1 past the array (n >= 2). */
static void sink(unsigned char *base, size_t root, size_t n, size_t size, sort_cmp cmp)
{
    size_t child;

    while (root <= (n - 2) / 2) {
        child = 2 * root + 1;
        if (child + 1 < n && cmp(base + child * size, base + (child + 1) * size) < 0)
            child++;
        if (cmp(base + root * size, base + child * size) >= 0)
            return;
        swap(base + root * size, base + child * size, size);
        root = child;
    }
}

void sort_array(void *base, size_t n, size_t size, sort_cmp cmp)
{
    unsigned char *b = base;
    size_t i;

    if (n < 2 || size == 0)
        return;
    for (i = n / 2; i-- > 0;)           /* the heap, from the last parent up */
        sink(b, i, n, size, cmp);
    for (i = n - 1; i > 0; i--) {       /* the largest left goes to i */
        swap(b, b + i * size, size);
        if (i >= 2)
            sink(b, 0, i, size, cmp);
    }
}
