/*
 * trace.c - the stamps of trace.h, in a bench build (make trace) only.
 */
#include "common/trace.h"

#if SANDBOXD_BENCH_TRACE
uint64_t trace_t[TR_N];
#else
typedef int trace_unused;       /* ISO C wants a declaration in every unit */
#endif
