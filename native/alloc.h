/*
 * alloc.h - the injectable allocator of the cstrie engine.
 *
 * Every byte the engine owns comes from cst_alloc() and goes back through
 * cst_dealloc().  Tests install an allocator that fails on demand (to prove that
 * an out-of-memory error leaves every structure as it was) and read the live
 * allocation counters (to prove that nothing leaks under churn).
 */
#ifndef CSTRIE_ALLOC_H
#define CSTRIE_ALLOC_H

#include <stddef.h>
#include <stdint.h>

void *cst_alloc(size_t size);
void cst_dealloc(void *p, size_t size);

/* Counters; relaxed atomics (statistics only, they order nothing). */
int64_t cst_alloc_live_count(void);
int64_t cst_alloc_live_bytes(void);
int64_t cst_alloc_total_count(void);
int64_t cst_alloc_total_frees(void);

/*
 * Failure injection: after `after` more successful allocations, every
 * allocation fails until cst_alloc_fail_after(-1) is called.  Global, meant for
 * single-threaded tests.
 */
void cst_alloc_fail_after(int64_t after);

/*
 * Node blocks (see alloc.c): while this thread carves, cst_block_alloc takes
 * node memory (up to 4 KiB) from 2 MiB blocks and sets *in_block; otherwise,
 * or for a larger size, it is cst_alloc.  Memory with *in_block set must be
 * freed with cst_block_free (from any thread), the rest with cst_dealloc.
 * Both honour the failure injection and the counters.
 */
void cst_block_carve(int on);
void *cst_block_alloc(size_t size, int *in_block);
void cst_block_free(void *p, size_t size);

/*
 * Big scratch arrays of bulk operations (not engine memory: not counted, no
 * failure injection, like the malloc they replace): zeroed; from 1 MiB up
 * they are fresh mappings advised as huge pages, so a build's hundreds of MB
 * of temporaries fault in 2 MiB at a time.  NULL when out of memory.
 */
void *cst_big_alloc(size_t size);
void *cst_big_realloc(void *p, size_t old_size, size_t size);
void cst_big_free(void *p);

#endif
