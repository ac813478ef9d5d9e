/*
 * alloc.c - the injectable allocator: malloc/free with counters and failure
 * injection.  See alloc.h.
 */
#include "alloc.h"

#include <stdatomic.h>
#include <stdlib.h>

static _Atomic int64_t live_count;
static _Atomic int64_t live_bytes;
static _Atomic int64_t total_count;
static _Atomic int64_t total_frees;
/* -1 = never fail; otherwise the number of allocations still allowed. */
static _Atomic int64_t fail_budget = -1;

void *cst_alloc(size_t size)
{
    int64_t budget = atomic_load_explicit(&fail_budget, memory_order_relaxed);
    if (budget >= 0) {
        if (budget == 0)
            return NULL;
        atomic_fetch_sub_explicit(&fail_budget, 1, memory_order_relaxed);
    }
    void *p = malloc(size);
    if (p == NULL)
        return NULL;
    atomic_fetch_add_explicit(&live_count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&live_bytes, (int64_t)size, memory_order_relaxed);
    atomic_fetch_add_explicit(&total_count, 1, memory_order_relaxed);
    return p;
}

void cst_dealloc(void *p, size_t size)
{
    if (p == NULL)
        return;
    atomic_fetch_sub_explicit(&live_count, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&live_bytes, (int64_t)size, memory_order_relaxed);
    atomic_fetch_add_explicit(&total_frees, 1, memory_order_relaxed);
    free(p);
}

int64_t cst_alloc_live_count(void) { return atomic_load_explicit(&live_count, memory_order_relaxed); }
int64_t cst_alloc_live_bytes(void) { return atomic_load_explicit(&live_bytes, memory_order_relaxed); }
int64_t cst_alloc_total_count(void) { return atomic_load_explicit(&total_count, memory_order_relaxed); }
int64_t cst_alloc_total_frees(void) { return atomic_load_explicit(&total_frees, memory_order_relaxed); }

void cst_alloc_fail_after(int64_t after)
{
    atomic_store_explicit(&fail_budget, after < 0 ? -1 : after, memory_order_relaxed);
}
