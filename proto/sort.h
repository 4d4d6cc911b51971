/* Runs in: shared */
/*
 * sort.h - an in-place sort that makes no system call and allocates
 * nothing, for code that runs under the worker's seccomp filter.
 *
 * libc's qsort() may allocate a buffer and ask the kernel how much memory
 * the machine has before choosing it (glibc: sysinfo(2), once the array is
 * large enough), and the worker's filter forbids both the question and any
 * dependence on it.  sort_array() is a heapsort: at most about 2 n log2 n
 * comparisons for any input, no recursion, a fixed stack frame.
 *
 * Contract: sorts the n elements of size bytes at base into ascending
 * order of cmp (negative, zero, positive as for qsort; it must be a total
 * preorder and must not change the array).  Not stable: elements that
 * compare equal end in an unspecified order.  n < 2 or size == 0 is a
 * no-op.  Keeps no state; safe in any process.
 */
#ifndef SANDBOXD_SORT_H
#define SANDBOXD_SORT_H

#include <stddef.h>

void sort_array(void *base, size_t n, size_t size,
                int (*cmp)(const void *a, const void *b));

#endif
