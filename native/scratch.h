/*
 * scratch.h - per-thread scratch buffers: growable arrays that an engine call
 * borrows from its thread, so that its working space costs no allocation
 * once the thread has grown them (system allocator; freed at thread exit).
 * A buffer whose element type is named `struct x` here is used by the file
 * named next to it, which defines that type.
 */
#ifndef CSTRIE_SCRATCH_H
#define CSTRIE_SCRATCH_H

#include <stddef.h>
#include <stdint.h>

#include "nodes.h"
#include "tls.h"

typedef struct scratch {
    struct word *w;            /* a topic or pattern split (words.c) */
    size_t wcap;
    uint64_t *ids;
    size_t idcap;
    uint64_t *uniq;            /* open-addressing set for deduplication */
    size_t uniqcap;
    snode **matched;           /* the S-nodes a lookup matched (match.c) */
    size_t matchedcap;
    struct share_ref *shares;  /* a route's share-group S-nodes (match.c) */
    size_t shcap;
    struct share_ref *shares_tmp; /* the radix sort's other half */
    size_t shtmpcap;
    snode **path;
    size_t pathcap;
    struct upd_frame *upath;   /* the path of an update (trie.c) */
    size_t upathcap;
    struct mframe *mstack;     /* the pending states of a lookup (match.c) */
    size_t mstackcap;
    /* a lookup's index-set walks (match.c): frames, the stack arenas of their
     * index sets and literal branches, position bitmaps, the topic's words */
    struct sframe *sstack;
    size_t sstackcap;
    uint64_t *bits;
    size_t bitscap;
    struct skid *kids;
    size_t kidscap;
    uint64_t *pbits;
    size_t pbitscap;
    uint32_t *twid;            /* topic word i's number (equal words, one number) */
    size_t twidcap;
    uint32_t *tnext;           /* the next index with the same word */
    size_t tnextcap;
    struct tword *tw;          /* per number: first index, occurrences, positions */
    size_t twcap;
    uint32_t *tstamp;
    size_t tstampcap;
    uint32_t *thash;           /* open addressing: word -> number + 1 */
    size_t thashcap;
    struct main_read *reads;   /* what a lookup's walk read (match.c) */
    size_t rdcap;
    struct word *warm_w;       /* cst_warm's topics' words and frontiers (match.c) */
    size_t warm_wcap;
    struct wentry *warm_front;
    size_t warm_frontcap;
    struct rmatch *rmatch;     /* the matches of walks in rounds (match.c) */
    size_t rmatchcap;
    snode **bmatched;          /* ... grouped by topic, for a batch */
    size_t bmatchedcap;
    int64_t last_steps;        /* cst_debug_last_walk_steps */
    /* where the last parse_words that failed found its fault: the byte
     * offset (the bad byte, or the start of the bad word) and the word */
    int64_t fault_at, fault_word;
} scratch;

/* This thread's scratch buffers, once made (scratch_make). */
extern CST_TLS scratch *cst_tls_scratch;
/* Make this thread's scratch buffers (its first engine call); NULL when out
 * of memory. */
scratch *scratch_make(void);

/* This thread's scratch buffers (made on its first call); NULL when out of
 * memory.  Inline: every engine call takes it, and one %fs load is all it
 * costs once the buffers exist. */
static inline scratch *scratch_get(void)
{
    scratch *sc = cst_tls_scratch;
    return sc != NULL ? sc : scratch_make();
}
/* Grow *buf, of *cap elements of elem bytes, to at least need elements
 * (doubling): 0, or -1 when out of memory (the buffer is left as it was). */
int scratch_reserve(void **buf, size_t *cap, size_t need, size_t elem);

#endif
