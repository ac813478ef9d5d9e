/*
 * alloc.c - the injectable allocator: malloc/free with counters and failure
 * injection.  See alloc.h.
 *
 * The counters are per thread: every allocation and free adds to the calling
 * thread's own block of counters, and a reader sums every block.  One shared
 * set of counters cost three locked read-modify-writes per allocation (7% of
 * a bulk build) and, on free-threaded Python, a cache line that every
 * updating thread fought over.
 *
 * Invariants:
 *  1. A block has at most one owner thread at a time (claimed by CAS on
 *     `owned`), and only its owner writes its counters; so a plain relaxed
 *     load + store is a correct increment, and no update is lost.
 *  2. Blocks are never freed: a thread that exits gives its block up (a
 *     thread-exit destructor clears `owned`) and a later thread takes it over,
 *     counts and all.  The counters are sums over blocks, so which thread made
 *     a count does not matter.  The number of blocks is the largest number of
 *     threads that ever allocated at the same time.
 *  3. A sum read while other threads allocate is a momentary estimate (each
 *     term is read once, relaxed); read when no thread allocates (what the
 *     leak tests do, after joining their threads) it is exact.
 */
#include "alloc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

typedef struct counters {
    _Atomic int64_t live_count;
    _Atomic int64_t live_bytes;
    _Atomic int64_t total_count;
    _Atomic int64_t total_frees;
    _Atomic int owned;
    struct counters *next; /* immutable once the block is published */
    char pad[80];          /* 128 bytes: no two owners share a cache line */
} counters;
_Static_assert(sizeof(counters) >= 128, "a counters block spans two cache lines");

/* Every block ever made, newest first (a push-only list). */
static _Atomic(counters *) blocks;
static _Thread_local counters *mine;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
/* Used when no block can be had (out of memory for the block itself, or the
 * thread-exit key could not be made): shared, so updated atomically. */
static counters fallback;

/* -1 = never fail; otherwise the number of allocations still allowed. */
static _Atomic int64_t fail_budget = -1;

static void give_up(void *p)
{
    /* A destructor that runs after this one and frees engine memory claims a
     * block again (and gives it up again: POSIX repeats destructors). */
    mine = NULL;
    /* release: the owner's last counter stores happen before the next owner's
     * (which acquires `owned` in claim) start from them. */
    atomic_store_explicit(&((counters *)p)->owned, 0, memory_order_release);
}

static void make_key(void)
{
    if (pthread_key_create(&exit_key, give_up) != 0)
        exit_key = (pthread_key_t)-1;
}

static counters *claim(void)
{
    pthread_once(&exit_once, make_key);
    if (exit_key == (pthread_key_t)-1)
        return &fallback;
    /* acquire: see the list links (and a given-up block's counters) as
     * published. */
    counters *c = atomic_load_explicit(&blocks, memory_order_acquire);
    for (; c != NULL; c = c->next) {
        int free_ = 0;
        /* acquire: the previous owner's counter stores (before its release in
         * give_up) happen before ours. */
        if (atomic_compare_exchange_strong_explicit(&c->owned, &free_, 1, memory_order_acquire,
                                                    memory_order_relaxed))
            break;
    }
    if (c == NULL) {
        c = calloc(1, sizeof *c);
        if (c == NULL)
            return &fallback;
        atomic_store_explicit(&c->owned, 1, memory_order_relaxed);
        c->next = atomic_load_explicit(&blocks, memory_order_relaxed);
        /* release: the block's fields are initialised before readers (which
         * acquire the head) can reach it. */
        while (!atomic_compare_exchange_weak_explicit(&blocks, &c->next, c, memory_order_release,
                                                      memory_order_relaxed))
            ;
    }
    if (pthread_setspecific(exit_key, c) != 0) {
        give_up(c);
        return &fallback;
    }
    return c;
}

static counters *my_counters(void)
{
    counters *c = mine;
    if (c == NULL)
        c = mine = claim();
    return c;
}

static void add(counters *c, _Atomic int64_t *field, int64_t d)
{
    if (c == &fallback)
        atomic_fetch_add_explicit(field, d, memory_order_relaxed);
    else /* invariant 1: this thread is the only writer */
        atomic_store_explicit(field, atomic_load_explicit(field, memory_order_relaxed) + d,
                              memory_order_relaxed);
}

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
    counters *c = my_counters();
    add(c, &c->live_count, 1);
    add(c, &c->live_bytes, (int64_t)size);
    add(c, &c->total_count, 1);
    return p;
}

void cst_dealloc(void *p, size_t size)
{
    if (p == NULL)
        return;
    counters *c = my_counters();
    add(c, &c->live_count, -1);
    add(c, &c->live_bytes, -(int64_t)size);
    add(c, &c->total_frees, 1);
    free(p);
}

static int64_t sum(size_t field)
{
    int64_t s = atomic_load_explicit(
        (_Atomic int64_t *)((char *)&fallback + field), memory_order_relaxed);
    /* acquire: pairs with the release that published each block. */
    for (counters *c = atomic_load_explicit(&blocks, memory_order_acquire); c != NULL; c = c->next)
        s += atomic_load_explicit((_Atomic int64_t *)((char *)c + field), memory_order_relaxed);
    return s;
}

int64_t cst_alloc_live_count(void) { return sum(offsetof(counters, live_count)); }
int64_t cst_alloc_live_bytes(void) { return sum(offsetof(counters, live_bytes)); }
int64_t cst_alloc_total_count(void) { return sum(offsetof(counters, total_count)); }
int64_t cst_alloc_total_frees(void) { return sum(offsetof(counters, total_frees)); }

void cst_alloc_fail_after(int64_t after)
{
    atomic_store_explicit(&fail_budget, after < 0 ? -1 : after, memory_order_relaxed);
}
