/*
 * internal.h - shared internals of the engine's translation units: the trie
 * handle, the operation context, words and the node primitives (reference
 * counts, GCAS, RDCSS) defined in trie.c.
 */
#ifndef CSTRIE_INTERNAL_H
#define CSTRIE_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "alloc.h"
#include "cstrie.h"
#include "ebr.h"
#include "nodes.h"
#include "idset.h"
#include "scratch.h"

#define LOOKUP_STRIPES 16
/* Lines written by different threads are kept 128 bytes apart: x86 CPUs
 * fetch cache lines in aligned pairs (the adjacent-line prefetcher), so two
 * counters 64 bytes apart still bounce between cores together. */
#define CST_SPACING 128
#define STRIPE_WORDS 16 /* 128 bytes between stripes */
#define ROOT_DESC_BIT ((uintptr_t)1)
/* The deepest hash level with bits of the hash left (60 at CN_BITS 5 or 6);
 * deeper: L-nodes. */
#define MAX_HASH_LEVEL ((63 / CN_BITS) * CN_BITS)

/* Byte classes of a dialect (words.c), for single-byte separators. */
enum { BC_SEP = 1, BC_WILD = 2, BC_NUL = 4, BC_FORBIDDEN = 8 };

/* A handle.  The first lines are read by every call and written almost
 * never (the root moves at snapshots); the lookup counters sit on lines of
 * their own, and a writable handle's update counters in a block of their
 * own (upd), one pair of lines per stripe: nothing a call writes shares a
 * line with what every call reads.  Allocated CST_SPACING-aligned. */
struct cst_trie {
    _Atomic(uintptr_t) root;   /* inode*, or an RDCSS descriptor | ROOT_DESC_BIT */
    int readonly;
    cst_dialect d;             /* token strings point into `tokens` */
    char *tokens;
    size_t tokens_len;
    uint8_t bytecls[256];      /* BC_* of every byte value under d */
    /* The update counts of "one walk, one state" (trie.c gcas, match.c
     * walk_topic), one per stripe (UPD_STRIPES, see upd_stripe_of): the low
     * UPD_BITS bits count the GCAS calls in flight, the rest the finished
     * ones.  NULL on a read-only handle (it is never written). */
    _Atomic uint64_t *upd;
    void *upd_block;           /* what cst_alloc gave for upd */
    uint64_t serial;           /* this handle's number, never reused (an
                                * address is: cst_warm_wanted's memo) */
    int64_t pairs;             /* a read-only handle's size, roughly (pairs_estimate) */
    /* A writable handle's latest frozen root, while its root's main is still
     * the frozen root's: read-only snapshots of an unchanged trie share it
     * (trie.c, "Shared frozen roots").  A snapshot handle that shares one
     * holds a count in its shard instead of a reference to its root. */
    _Atomic(struct frozen *) frozen;
    struct frozen *holder;     /* a snapshot's shared frozen root, or NULL */
    unsigned shard;            /* the holder's shard this snapshot counts in */
    void *block;               /* what cst_alloc gave for this handle */
    _Atomic(struct cst_cache *) cache; /* a writable handle's result cache, or NULL */
    _Alignas(CST_SPACING) _Atomic uint64_t lookups[LOOKUP_STRIPES * STRIPE_WORDS];
};
#define UPD_BITS 24
#define UPD_BEGIN UINT64_C(1)
#define UPD_END ((UINT64_C(1) << UPD_BITS) - 1) /* one fewer in flight, one more done */
#define UPD_IN_FLIGHT ((UINT64_C(1) << UPD_BITS) - 1)

/* Update stripes.  An update counts in the stripe of its pattern's first
 * word: a literal word by its hash, the one-level wildcard, the many-level
 * wildcard and the zero-word pattern in stripes of their own; operations on
 * the whole trie (clear, compaction) in UPD_GLOBAL.  A walk for a topic
 * whose first word is w reads only the stripes of the patterns that can
 * match it (w's, the wildcards', the zero-word pattern's for an empty topic,
 * and UPD_GLOBAL): an update under another first word cannot change its
 * answer (match.c, "One state of the trie for the whole walk"), so updates
 * on disjoint parts of a trie write disjoint lines. */
#define UPD_LITERAL_STRIPES 128
#define UPD_SINGLE (UPD_LITERAL_STRIPES + 0)
#define UPD_MULTI (UPD_LITERAL_STRIPES + 1)
#define UPD_EMPTY (UPD_LITERAL_STRIPES + 2)
#define UPD_GLOBAL (UPD_LITERAL_STRIPES + 3)
#define UPD_STRIPES (UPD_LITERAL_STRIPES + 4)
#define UPD_STRIPE_WORDS 16    /* 128 bytes between stripes (CST_SPACING) */

/* One engine operation: the handle and the caller's open epoch section. */
typedef struct ctx {
    cst_trie *t;
    ebr_record *rec;
    int prompt;                /* retire() asks EBR for prompt reclamation */
    unsigned stripe;           /* the update stripe its GCAS calls count in */
} ctx;

typedef struct word {
    const char *p;
    uint32_t len;
    uint8_t kind;              /* enum word_kind */
    uint64_t hash;             /* literals only */
} word;

/* words.c */
uint64_t word_hash(const char *p, size_t len);
int64_t parse_words(const cst_trie *t, const char *s, size_t len, int is_pattern, scratch *sc);
void words_seed_init(void);
void words_classes_init(cst_trie *t);

/* cache.c: the result cache (see there for the protocol) */
typedef struct cst_cache cst_cache;
/* What a lookup learned from the cache before its walk, for its fill. */
typedef struct cache_probe {
    int on;                    /* the cache has a budget */
    int seen;                  /* the doorkeeper knew the topic (admission) */
    uint64_t hash;             /* the topic's */
    int hashed;                /* hash already taken (cache_prefetch) */
    uint64_t writes, gen;      /* R1 of the fill protocol */
    int ready;                 /* R0: the updates that saw no cache are over */
} cache_probe;
/* 0 .. n: a hit (n ids, the first cap of them in out); -1: a miss or off */
int64_t cache_get(cst_cache *k, const char *topic, size_t len, uint64_t *out, size_t cap,
                  cache_probe *p);
void cache_read_state(cst_cache *k, cache_probe *p);
/* Request the cache line that cache_get will read for topic (a hint); the
 * topic's hash is kept in p for that cache_get. */
void cache_prefetch(cst_cache *k, const char *topic, size_t len, cache_probe *p);
void cache_fill(ctx *c, cst_cache *k, const char *topic, size_t len, const uint64_t *ids,
                size_t n, const cache_probe *p);
void cache_write_begin(cst_cache *k);
void cache_write_end(cst_cache *k);
void cache_invalidate(cst_cache *k, const char *pattern, size_t len);
void cache_invalidate_all(cst_cache *k);
void cache_free(cst_cache *k);

/* trie.c: primitives shared with match.c and walk.c */
void node_retain(cst_hdr *h);
void node_release(cst_hdr *h);
/* Give a node's memory back (node blocks or the allocator, by its header). */
void node_free(cst_hdr *h, size_t size);
void retire(ctx *c, cst_hdr *h);
mainnode *gcas_commit(ctx *c, inode *in, mainnode *m);
inode *root_read(ctx *c);
/* Freeze the live generation (a read-only snapshot's RDCSS) and return its
 * root, retained: the caller retires it.  NULL when out of memory. */
inode *root_freeze(ctx *c);
int ctx_enter(ctx *c, cst_trie *t);
uint64_t new_gen(void);
inode *inode_new(uint64_t gen, mainnode *main, int padded);
cnode *cnode_alloc(uint32_t n, unsigned lev, uint64_t gen);
lnode *lnode_alloc(uint32_t n);
/* A new S-node; ids (nsubs <= SUBS_INLINE) are copied, the references of set
 * (nsubs > SUBS_INLINE) and child are taken over. */
snode *snode_make(const char *p, uint32_t wlen, uint8_t kind, uint64_t hash, uint32_t nsubs,
                  const uint64_t *ids, setnode *set, inode *child);
/* A handle over root; bytecls: the byte classes of a handle of the same
 * dialect (a snapshot's source), or NULL to compute them. */
cst_trie *handle_new(const cst_dialect *d, inode *root, int readonly, const uint8_t *bytecls);
void ctx_exit(ctx *c);

/* Share groups (nodes.h): a group id is the 8-byte little-endian word below
 * a share marker. */
static inline void share_id_write(char *p, uint64_t id)
{
    for (int i = 0; i < SHARE_ID_BYTES; i++)
        p[i] = (char)(uint8_t)(id >> (8 * i));
}

static inline uint64_t share_id_read(const char *p)
{
    uint64_t id = 0;
    for (int i = SHARE_ID_BYTES; i-- > 0;)
        id = (id << 8) | (uint8_t)p[i];
    return id;
}

/* match.c: the ids of exactly the n words in sc->w (one path). */
int64_t words_subscribers(cst_trie *t, scratch *sc, int64_t n, uint64_t *out, size_t cap);
/* trie.c: the update of exactly the n words in sc->w (parsed and
 * validated): subscribe sub (insert 1), unsubscribe it (0), or a topic
 * index's put (UPD_PUT: the word's ids become {sub}; *old receives the id
 * it replaced, or 0).  old may be NULL.  1/0 as cst_subscribe and
 * cst_topic_put, or a CST_E* code. */
#define UPD_PUT 2
int words_update(cst_trie *t, scratch *sc, int64_t n, uint64_t sub, int insert, uint64_t *old);
/* sc->w = the words of pattern, then the share marker and the word of group
 * `share` (idbuf holds its bytes while the words are used); the number of
 * words or a CST_E* code (trie.c). */
int64_t share_words(cst_trie *t, const char *pattern, size_t len, uint64_t share,
                    char idbuf[SHARE_ID_BYTES], scratch *sc);

static inline uint32_t frag(uint64_t h, unsigned lev)
{
    return (uint32_t)(h >> lev) & ((1u << CN_BITS) - 1);
}

/* The update stripe of a pattern or topic whose first word is w (n words). */
static inline unsigned upd_stripe_of(const word *w, int64_t n)
{
    if (n <= 0 || w[0].kind == W_EMPTY_PATTERN)
        return UPD_EMPTY;
    if (w[0].kind == W_SINGLE)
        return UPD_SINGLE;
    if (w[0].kind == W_MULTI)
        return UPD_MULTI;
    /* the top bits: frag() uses the low ones for the first hash levels */
    return (unsigned)(w[0].hash >> 57) % UPD_LITERAL_STRIPES;
}

static inline _Atomic uint64_t *upd_stripe(const cst_trie *t, unsigned stripe)
{
    return &t->upd[(size_t)stripe * UPD_STRIPE_WORDS];
}

/* The pairs an update stripe added less those it removed: word 1 of the
 * stripe's line, which its updates write anyway (word 0 counts them).  Their
 * sum over the stripes is the trie's size, roughly (no read is ordered with
 * it; clears reset it while updates may run): what cst_warm_wanted needs. */
static inline _Atomic int64_t *upd_pairs(const cst_trie *t, unsigned stripe)
{
    return (_Atomic int64_t *)&t->upd[(size_t)stripe * UPD_STRIPE_WORDS + 1];
}
int64_t pairs_estimate(const cst_trie *t);
void pairs_reset(cst_trie *t, int64_t n);
/* GCAS_READ of the paper: in's main node, after helping a pending GCAS on it
 * to its end (gcas_commit, trie.c).  The loads are those of trie.c's
 * load_main/load_prev: seq_cst, because gcas_commit's decision reads prev,
 * then the root, then CASes prev, and main must not be read before a CAS on
 * it that this thread made (StoreLoad); both are also acquire, so the main
 * node's fields are visible once its pointer is. */
static inline mainnode *gcas_read(ctx *c, inode *in)
{
    mainnode *m = atomic_load_explicit(&in->main, memory_order_seq_cst);
    if (atomic_load_explicit(&m->prev, memory_order_seq_cst) == 0)
        return m;
    return gcas_commit(c, in, m);
}

static inline cst_hdr *spec_get(const cnode *cn, unsigned s)
{
    unsigned spec = cn->m.h.b2;
    if (!(spec & (1u << s)))
        return NULL;
    return cn->array[popc(spec & ((1u << s) - 1))];
}

/* a[0..n) == b[0..n), reading no byte outside either.  Where a word's hash
 * already agreed this only confirms: up to 16 bytes (a topic level: a device
 * id, a metric, a digit) it compares inline, as two overlapping loads from
 * each end (the first and the last 8, 4 or 2 bytes), instead of calling
 * libc's memcmp, whose call and dispatch cost more than the comparison. */
static inline int bytes_eq(const char *a, const char *b, size_t n)
{
    if (n >= 8) {
        if (n > 16)
            return memcmp(a, b, n) == 0;
        uint64_t a0, a1, b0, b1;
        memcpy(&a0, a, 8), memcpy(&a1, a + n - 8, 8);
        memcpy(&b0, b, 8), memcpy(&b1, b + n - 8, 8);
        return ((a0 ^ b0) | (a1 ^ b1)) == 0;
    }
    if (n >= 4) {
        uint32_t a0, a1, b0, b1;
        memcpy(&a0, a, 4), memcpy(&a1, a + n - 4, 4);
        memcpy(&b0, b, 4), memcpy(&b1, b + n - 4, 4);
        return ((a0 ^ b0) | (a1 ^ b1)) == 0;
    }
    if (n >= 2) {
        uint16_t a0, a1, b0, b1;
        memcpy(&a0, a, 2), memcpy(&a1, a + n - 2, 2);
        memcpy(&b0, b, 2), memcpy(&b1, b + n - 2, 2);
        return ((a0 ^ b0) | (a1 ^ b1)) == 0;
    }
    return n == 0 || a[0] == b[0];
}

static inline int word_eq(const snode *sn, const word *w)
{
    return sn->hash == w->hash && sn->wlen == w->len && sn->h.b1 == W_LITERAL &&
           bytes_eq(sn->word, w->p, w->len);
}

/* The S-node of literal word w in the topic level whose top C-node is cn,
 * or NULL.  read(arg, in) reads a deeper hash level's main node: a lookup's
 * walk notes what it reads (match.c), a reverse query on a frozen snapshot
 * just reads (topic_index.c).  Inlined with a constant read, so the hot lookup
 * pays no indirect call. */
static inline __attribute__((always_inline)) snode *
level_find(cnode *cn, const word *w, mainnode *(*read)(void *arg, inode *in), void *arg)
{
    /* The top C-node is a C-node: the walk over hash levels starts there
     * without asking (a lookup calls this once per state). */
    unsigned lev = 0;
    for (;;) {
        cnmap bit = CN_BIT(frag(w->hash, lev));
        if (!(cn->bitmap & bit))
            return NULL;
        cst_hdr *b = cn->array[popc(cn->m.h.b2) + popc_map(cn->bitmap & (bit - 1))];
        if (b->kind == K_SNODE)
            return word_eq((snode *)b, w) ? (snode *)b : NULL;
        mainnode *m = read(arg, (inode *)b);
        lev += CN_BITS;
        switch (m->h.kind) {
        case K_CNODE:
            cn = (cnode *)m;
            break;
        case K_TNODE: {
            snode *sn = ((tnode *)m)->sn;
            return sn && word_eq(sn, w) ? sn : NULL;
        }
        case K_LNODE: {
            lnode *ln = (lnode *)m;
            for (uint32_t i = 0; i < ln->n; i++)
                if (word_eq(ln->sn[i], w))
                    return ln->sn[i];
            return NULL;
        }
        default:
            return NULL;
        }
    }
}

/* The inline ids of an S-node start at this offset of word[]. */
static inline size_t snode_ids_at(uint32_t wlen) { return ((size_t)wlen + 7u) & ~(size_t)7u; }

static inline size_t snode_size(uint32_t wlen, uint32_t nsubs)
{
    if (nsubs < 2 || nsubs > SUBS_INLINE)
        return sizeof(snode) + wlen;
    return sizeof(snode) + snode_ids_at(wlen) + (size_t)nsubs * sizeof(uint64_t);
}

/* The inline ids (valid when nsubs <= SUBS_INLINE). */
static inline const uint64_t *snode_ids(const snode *sn)
{
    if (sn->nsubs == 1)
        return &sn->one;
    return (const uint64_t *)(const void *)(sn->word + snode_ids_at(sn->wlen));
}

static inline int snode_has(const snode *sn, uint64_t id)
{
    if (sn->nsubs > SUBS_INLINE)
        return set_contains(sn->set, id);
    const uint64_t *ids = snode_ids(sn);
    for (uint32_t i = 0; i < sn->nsubs; i++)
        if (ids[i] == id)
            return 1;
    return 0;
}

/* Write the subscriber ids of sn to out (room for sn->nsubs); their number. */
static inline size_t snode_emit(const snode *sn, uint64_t *out)
{
    if (sn->nsubs > SUBS_INLINE)
        return set_emit(sn->set, out);
    const uint64_t *ids = snode_ids(sn);
    for (uint32_t i = 0; i < sn->nsubs; i++) /* at most SUBS_INLINE: no memcpy */
        out[i] = ids[i];
    return sn->nsubs;
}

#endif
