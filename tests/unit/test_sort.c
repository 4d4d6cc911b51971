/* test_sort.c - the heapsort without system calls (proto/sort.c), against qsort's order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto/sort.h"

/* A fixed-seed generator (xorshift64), so every run sorts the same inputs. */
static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A record whose key decides the order and whose tag tells equal keys
 * apart, padded to a size that makes the swap take several passes of its
 * 64-byte buffer. */
struct rec {
    int32_t key;
    uint32_t tag;
    unsigned char pad[92];
};

static int by_key(const void *pa, const void *pb)
{
    const struct rec *a = pa, *b = pb;
    return a->key < b->key ? -1 : a->key > b->key;
}

/* The whole record, to compare two arrays as multisets. */
static int by_bytes(const void *a, const void *b)
{
    return memcmp(a, b, sizeof(struct rec));
}

static int by_byte(const void *a, const void *b)
{
    return *(const unsigned char *)a - *(const unsigned char *)b;
}

/* Sort n random records with keys in [0, range) both ways: the keys must
 * come out in qsort's order, and the records must be a permutation of the
 * input (nothing lost, duplicated or torn by a partial swap). */
static void check_one(uint64_t *seed, size_t n, uint32_t range)
{
    struct rec *in = calloc(n ? n : 1, sizeof *in);
    struct rec *ours = calloc(n ? n : 1, sizeof *ours);
    struct rec *ref = calloc(n ? n : 1, sizeof *ref);
    size_t i;

    assert_non_null(in);
    assert_non_null(ours);
    assert_non_null(ref);
    for (i = 0; i < n; i++) {
        in[i].key = (int32_t)(next(seed) % range) - (int32_t)(range / 2);
        in[i].tag = (uint32_t)i;
        memset(in[i].pad, (int)(next(seed) & 0xff), sizeof in[i].pad);
    }
    memcpy(ours, in, n * sizeof *in);
    memcpy(ref, in, n * sizeof *in);
    sort_array(ours, n, sizeof *ours, by_key);
    qsort(ref, n, sizeof *ref, by_key);
    for (i = 0; i < n; i++)
        assert_int_equal(ours[i].key, ref[i].key);
    qsort(ours, n, sizeof *ours, by_bytes);
    qsort(ref, n, sizeof *ref, by_bytes);
    assert_memory_equal(ours, ref, n * sizeof *ours);
    free(in);
    free(ours);
    free(ref);
}

static void test_random_inputs_with_ties_match_qsort(void **state)
{
    static const uint32_t ranges[] = { 1, 2, 3, 10, 1000, 1u << 30 };
    uint64_t seed = 0x5eed5eed5eedULL;
    size_t n, r;

    (void)state;
    for (n = 0; n <= 70; n++)                /* every small size, the heap's edges */
        for (r = 0; r < sizeof ranges / sizeof ranges[0]; r++)
            check_one(&seed, n, ranges[r]);
    for (r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
        check_one(&seed, 1000, ranges[r]);
        check_one(&seed, 100000, ranges[r]); /* where glibc's qsort asks sysinfo */
    }
}

static void test_sorted_reversed_and_equal_runs(void **state)
{
    enum { N = 4097 };
    static struct rec a[N];
    size_t i;

    (void)state;
    for (i = 0; i < N; i++)
        a[i] = (struct rec){ .key = (int32_t)i, .tag = 0 };
    sort_array(a, N, sizeof *a, by_key);
    for (i = 0; i < N; i++)
        assert_int_equal(a[i].key, (int32_t)i);
    for (i = 0; i < N; i++)
        a[i].key = (int32_t)(N - i);
    sort_array(a, N, sizeof *a, by_key);
    for (i = 0; i < N; i++)
        assert_int_equal(a[i].key, (int32_t)i + 1);
    for (i = 0; i < N; i++)
        a[i].key = 7;
    sort_array(a, N, sizeof *a, by_key);
    for (i = 0; i < N; i++)
        assert_int_equal(a[i].key, 7);
}

/* Size 1 (bytes) and sizes around the swap buffer's 64 bytes. */
static void test_element_sizes(void **state)
{
    unsigned char b[257], ref[257];
    uint64_t seed = 42;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof b; i++)
        b[i] = (unsigned char)next(&seed);
    memcpy(ref, b, sizeof b);
    sort_array(b, sizeof b, 1, by_byte);
    qsort(ref, sizeof ref, 1, by_byte);
    assert_memory_equal(b, ref, sizeof b);

    /* 64-, 65- and 128-byte elements whose first byte is the key */
    static const size_t sizes[] = { 63, 64, 65, 128 };
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        unsigned char x[40 * 128], y[40 * 128];
        size_t sz = sizes[s];
        for (i = 0; i < 40 * sz; i++)
            x[i] = (unsigned char)next(&seed);
        for (i = 0; i < 40; i++)         /* the tail of each element follows its key */
            memset(x + i * sz + 1, x[i * sz], sz - 1);
        memcpy(y, x, 40 * sz);
        sort_array(x, 40, sz, by_byte);
        qsort(y, 40, sz, by_byte);
        assert_memory_equal(x, y, 40 * sz);
    }
}

static void test_nothing_to_sort(void **state)
{
    int one = 5;

    (void)state;
    sort_array(NULL, 0, sizeof one, by_byte);
    sort_array(&one, 1, sizeof one, by_byte);
    sort_array(&one, 3, 0, by_byte);
    assert_int_equal(one, 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_inputs_with_ties_match_qsort),
        cmocka_unit_test(test_sorted_reversed_and_equal_runs),
        cmocka_unit_test(test_element_sizes),
        cmocka_unit_test(test_nothing_to_sort),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
