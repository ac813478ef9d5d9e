/*
 * alloc.c - the injectable allocator: malloc/free with counters and failure
 * injection.  See alloc.h.
 *
 * The counters are per thread: every allocation and free adds to the calling
 * thread's own counter set, and a reader sums every set.  One shared set of
 * counters cost three locked read-modify-writes per allocation (about 10% of
 * a bulk build's samples) and, on free-threaded Python, a cache line that
 * every updating thread fought over.
 *
 * Invariants:
 *  1. A counter set has at most one owner thread at a time (claimed by CAS on
 *     `owned`), and only its owner writes its counters; so a plain relaxed
 *     load + store is a correct increment, and no update is lost.
 *  2. Counter sets are never freed: a thread that exits gives its set up (a
 *     thread-exit destructor clears `owned`) and a later thread takes it over,
 *     counts and all.  The counters are sums over sets, so which thread made
 *     a count does not matter.  The number of sets is the largest number of
 *     threads that ever allocated at the same time.
 *  3. A sum read while other threads allocate is a momentary estimate (each
 *     term is read once, relaxed); read when no thread allocates (what the
 *     leak tests do, after joining their threads) it is exact.
 *
 * Node cache.  Reclamation frees nodes in batches (a limbo chunk at a time),
 * which overflows malloc's per-thread cache and sends frees and the next
 * allocations to its slower bins: a third of an update's allocator time.  So
 * each thread keeps a cache of freed engine memory per 16-byte size class up
 * to 512 bytes (CACHE_DEPTH blocks each, a few hundred KB in all at most), in
 * its counter set:
 *  7. Cached blocks are counted as freed (counters above): the live counts
 *     stay exact.  A block is allocated with its class's size, so any request
 *     of that class can reuse it; the classes follow malloc's chunk sizes
 *     (class_of), so that costs no memory beyond what malloc(size) would.
 *  8. A thread's cache is emptied (to free()) when it gives its counter set
 *     up at exit, so a set is always handed over with an empty cache; the
 *     shared fallback set never caches.  Under AddressSanitizer a cached
 *     block is poisoned, so a use after free is still reported.
 *
 * Node blocks.  A bulk build makes millions of nodes that live and die with
 * the trie, and malloc plus the page faults of fresh memory would be a third
 * of its time.  While a thread carves (cst_block_carve(1)), cst_block_alloc
 * cuts node memory out of 2 MiB blocks, aligned to their size and advised as
 * transparent huge pages: no per-node header, one page fault per block.  Any
 * thread frees such a node with cst_block_free, which finds the block by
 * masking the address.
 *
 * Block invariants:
 *  4. A block is released when its `live` count reaches zero.  It starts at
 *     BLOCK_BIAS, which the carving thread owns: frees from any thread subtract
 *     1 each and cannot reach zero while the bias is there.  When the carver
 *     leaves the block (it is full, or carving ends) it subtracts
 *     BLOCK_BIAS - carved, so `live` becomes the number of nodes still alive,
 *     and whoever brings it to zero releases it (the carver itself, when every
 *     node died already).  A block is never carved again once left.
 *  5. Carved nodes count as allocations in the counters above (and blocks do
 *     too, one each), so the leak tests see a leaked node or block.
 *  6. A block holds its memory until its last node dies: memory freed by
 *     later updates of a bulk-built trie returns to the system a block at a
 *     time.  The tail of each build's last block is unused (at most 2 MiB per
 *     build; builds below cst_build's threshold do not carve).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* MAP_ANONYMOUS, MADV_HUGEPAGE */
#endif
#include "alloc.h"

#include <pthread.h>
#include "tls.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#ifndef CACHE_CLASSES
#define CACHE_CLASSES 32 /* blocks of 8, 24, 40, ..., 504 bytes (class_bytes) */
#endif
/* Reclamation hands a thread its garbage in bursts (a limbo chunk per section
 * exit once an epoch step made a batch ready, ebr.c): up to a few thousand
 * nodes of one class come back before the next updates take them again. */
#define CACHE_DEPTH 2048

/* The cache class of a request, and the size its blocks are allocated with.
 * glibc's malloc gives a request of r bytes a chunk of (r + 8) rounded up to
 * 16: so class k (1-based) takes the requests that malloc would give the same
 * k * 16-byte chunk, and asks malloc for k * 16 - 8 bytes.  Caching a freed
 * node for reuse by a slightly larger one then costs no memory. */
static inline size_t class_of(size_t size) { return (size + 23) >> 4; }
static inline size_t class_bytes(size_t k) { return k * 16 - 8; }

typedef struct cached {
    struct cached *next;
} cached;

typedef struct counters {
    _Atomic int64_t live_count;
    _Atomic int64_t live_bytes;
    _Atomic int64_t total_count;
    _Atomic int64_t total_frees;
    _Atomic int owned;
    struct counters *next; /* immutable once the set is published */
    char pad[80];          /* 128 bytes: no two owners share a cache line */
    /* the owner's node cache (invariants 7, 8): only the owner touches it */
    cached *cache[CACHE_CLASSES];
    uint16_t ncache[CACHE_CLASSES];
} counters;
_Static_assert(sizeof(counters) >= 128, "a counter set spans two cache lines");

/* Every counter set ever made, newest first (a push-only list). */
static _Atomic(counters *) counter_sets;
static CST_TLS counters *mine;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
/* Used when no counter set can be had (out of memory for the set itself, or the
 * thread-exit key could not be made): shared, so updated atomically. */
static counters fallback;

/* -1 = never fail; otherwise the number of allocations still allowed. */
static _Atomic int64_t fail_budget = -1;

/* Give every cached block back to the system (invariant 8). */
static void cache_flush(counters *c)
{
    for (size_t k = 0; k < CACHE_CLASSES; k++) {
        while (c->cache[k] != NULL) {
            cached *b = c->cache[k];
            UNPOISON(b, class_bytes(k + 1));
            c->cache[k] = b->next;
            free(b);
        }
        c->ncache[k] = 0;
    }
}

static void give_up(void *p)
{
    /* A destructor that runs after this one and frees engine memory claims a
     * block again (and gives it up again: POSIX repeats destructors). */
    mine = NULL;
    cache_flush(p);
    /* release: the owner's last counter stores happen before the next owner's
     * (which acquires `owned` in claim) start from them. */
    atomic_store_explicit(&((counters *)p)->owned, 0, memory_order_release);
}

/* In the child of fork() only the forking thread exists: the other threads'
 * counter sets are free for reuse (their counts stay in the sums); their
 * caches are dropped, not walked (a thread may have been changing one). */
static void atfork_child(void)
{
    for (counters *c = atomic_load_explicit(&counter_sets, memory_order_acquire); c; c = c->next) {
        if (c == mine)
            continue;
        memset(c->cache, 0, sizeof c->cache);
        memset(c->ncache, 0, sizeof c->ncache);
        atomic_store_explicit(&c->owned, 0, memory_order_relaxed);
    }
}

static void make_key(void)
{
    if (pthread_key_create(&exit_key, give_up) != 0)
        exit_key = (pthread_key_t)-1;
    else
        pthread_atfork(NULL, NULL, atfork_child);
}

static counters *claim(void)
{
    pthread_once(&exit_once, make_key);
    if (exit_key == (pthread_key_t)-1)
        return &fallback;
    /* acquire: see the list links (and a given-up set's counters) as
     * published. */
    counters *c = atomic_load_explicit(&counter_sets, memory_order_acquire);
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
        c->next = atomic_load_explicit(&counter_sets, memory_order_relaxed);
        /* release: the set's fields are initialised before readers (which
         * acquire the head) can reach it. */
        while (!atomic_compare_exchange_weak_explicit(&counter_sets, &c->next, c, memory_order_release,
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

/* One allocation or free of `size` bytes, in this thread's counters. */
static void count_alloc(size_t size)
{
    counters *c = my_counters();
    add(c, &c->live_count, 1);
    add(c, &c->live_bytes, (int64_t)size);
    add(c, &c->total_count, 1);
}

static void count_free(size_t size)
{
    counters *c = my_counters();
    add(c, &c->live_count, -1);
    add(c, &c->live_bytes, -(int64_t)size);
    add(c, &c->total_frees, 1);
}

/* The failure injection's verdict for one more allocation. */
static int may_allocate(void)
{
    int64_t budget = atomic_load_explicit(&fail_budget, memory_order_relaxed);
    if (budget >= 0) {
        if (budget == 0)
            return 0;
        atomic_fetch_sub_explicit(&fail_budget, 1, memory_order_relaxed);
    }
    return 1;
}

void *cst_alloc(size_t size)
{
    if (!may_allocate())
        return NULL;
    counters *c = my_counters();
    size_t k = class_of(size); /* cache[k - 1] holds blocks of class_bytes(k) */
    void *p;
    if (k - 1 < CACHE_CLASSES && c != &fallback) {
        cached *b = c->cache[k - 1];
        if (b != NULL) {
            UNPOISON(b, class_bytes(k));
            c->cache[k - 1] = b->next;
            c->ncache[k - 1]--;
            p = b;
        } else {
            p = malloc(class_bytes(k));
        }
    } else {
        p = malloc(size);
    }
    if (p == NULL)
        return NULL;
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
    size_t k = class_of(size);
    if (k - 1 < CACHE_CLASSES && c != &fallback && c->ncache[k - 1] < CACHE_DEPTH) {
        cached *b = p;
        b->next = c->cache[k - 1];
        c->cache[k - 1] = b;
        c->ncache[k - 1]++;
        POISON((char *)b + sizeof *b, class_bytes(k) - sizeof *b); /* the link stays visible (LSan) */
        return;
    }
    free(p);
}

static int64_t sum(size_t field)
{
    int64_t s = atomic_load_explicit(
        (_Atomic int64_t *)((char *)&fallback + field), memory_order_relaxed);
    /* acquire: pairs with the release that published each set. */
    for (counters *c = atomic_load_explicit(&counter_sets, memory_order_acquire); c != NULL; c = c->next)
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

/* ------------------------------------------------------------------------
 * Node blocks
 * ---------------------------------------------------------------------- */

#define BLOCK_SIZE ((size_t)2 << 20)
#define BLOCK_HEAD 64                 /* the header's own cache line */
#define BLOCK_BIAS (INT64_C(1) << 62) /* the carver's hold (invariant 4) */
#define CARVE_MAX 4096                /* larger nodes come from malloc */

typedef struct block {
    _Atomic int64_t live;
} block;

static CST_TLS struct {
    int on;
    block *cur;
    char *next, *end;
    int64_t carved; /* nodes carved from cur */
} carve;

static block *block_new(void)
{
    char *raw = mmap(NULL, 2 * BLOCK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    /* keep the aligned BLOCK_SIZE inside, give the rest back */
    char *b = (char *)(((uintptr_t)raw + BLOCK_SIZE - 1) & ~(uintptr_t)(BLOCK_SIZE - 1));
    if (b > raw)
        munmap(raw, (size_t)(b - raw));
    if (b + BLOCK_SIZE < raw + 2 * BLOCK_SIZE)
        munmap(b + BLOCK_SIZE, (size_t)(raw + 2 * BLOCK_SIZE - (b + BLOCK_SIZE)));
#ifdef MADV_HUGEPAGE
    (void)madvise(b, BLOCK_SIZE, MADV_HUGEPAGE); /* advice only: fine if refused */
#endif
    block *blk = (block *)b;
    atomic_init(&blk->live, BLOCK_BIAS);
    POISON(b + BLOCK_HEAD, BLOCK_SIZE - BLOCK_HEAD);
    count_alloc(BLOCK_SIZE);
    return blk;
}

static void block_release(block *blk)
{
    count_free(BLOCK_SIZE);
    UNPOISON(blk, BLOCK_SIZE);
    munmap(blk, BLOCK_SIZE);
}

/* Subtract d from a block's count; release it at zero.  acq_rel: every
 * earlier free's (and the carver's) accesses to the block's nodes happen
 * before the release that unmaps it (the last subtraction acquires them all;
 * each subtraction releases its own). */
static void block_drop(block *blk, int64_t d)
{
    if (atomic_fetch_sub_explicit(&blk->live, d, memory_order_acq_rel) == d)
        block_release(blk);
}

/* The carver leaves its block (invariant 4). */
static void block_leave(void)
{
    if (carve.cur != NULL) {
        POISON(carve.next, (size_t)(carve.end - carve.next));
        block_drop(carve.cur, BLOCK_BIAS - carve.carved);
    }
    carve.cur = NULL;
    carve.next = carve.end = NULL;
    carve.carved = 0;
}

void cst_block_carve(int on)
{
    if (!on)
        block_leave();
    carve.on = on;
}

void *cst_block_alloc(size_t size, int *in_block)
{
    *in_block = 0;
    if (!carve.on || size > CARVE_MAX)
        return cst_alloc(size);
    if (!may_allocate())
        return NULL;
    size = (size + 15) & ~(size_t)15;
    if (carve.cur == NULL || (size_t)(carve.end - carve.next) < size) {
        block *blk = block_new();
        if (blk == NULL)
            return NULL;
        block_leave();
        carve.cur = blk;
        carve.next = (char *)blk + BLOCK_HEAD;
        carve.end = (char *)blk + BLOCK_SIZE;
    }
    void *p = carve.next;
    carve.next += size;
    carve.carved++;
    UNPOISON(p, size);
    count_alloc(size);
    *in_block = 1;
    return p;
}

void cst_block_free(void *p, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    count_free(size);
    POISON(p, size);
    block_drop((block *)((uintptr_t)p & ~(uintptr_t)(BLOCK_SIZE - 1)), 1);
}

/* ------------------------------------------------------------------------
 * Big scratch arrays
 * ---------------------------------------------------------------------- */

/* Each array starts after a header holding its mapped size (0: from calloc). */
#define BIG_HEAD 64
#define BIG_MIN ((size_t)1 << 20)

typedef struct big_head {
    size_t mapped;
} big_head;

void *cst_big_alloc(size_t size)
{
    size_t total = size + BIG_HEAD;
    if (total < size)
        return NULL;
    char *p;
    if (total < BIG_MIN) {
        p = calloc(1, total);
        if (p == NULL)
            return NULL;
        ((big_head *)p)->mapped = 0;
    } else {
        p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
#ifdef MADV_HUGEPAGE
        (void)madvise(p, total, MADV_HUGEPAGE); /* advice only */
#endif
        ((big_head *)p)->mapped = total;
    }
    return p + BIG_HEAD;
}

void cst_big_free(void *q)
{
    if (q == NULL)
        return;
    char *p = (char *)q - BIG_HEAD;
    size_t mapped = ((big_head *)p)->mapped;
    if (mapped)
        munmap(p, mapped);
    else
        free(p);
}

void *cst_big_realloc(void *q, size_t old_size, size_t size)
{
    void *n = cst_big_alloc(size);
    if (n == NULL)
        return NULL;
    if (q != NULL)
        memcpy(n, q, old_size < size ? old_size : size);
    cst_big_free(q);
    return n;
}
