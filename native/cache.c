/*
 * cache.c - the result cache: a writable handle's answers to recent topics,
 * exact, invalidated by the updates that change them and by nothing else.
 *
 * Off until cst_cache_set gives it a byte budget.  cst_lookup asks it first;
 * a miss walks the trie and offers the answer (cache_fill).  An update
 * (cst_subscribe, cst_unsubscribe, the share-group calls, the batch) first
 * finds the cached topics its filter matches - a reverse query on `keys`, a
 * topic index holding every cached topic (topic_index.c) - and kills their
 * entries, then changes the trie.  Clearing the trie kills every entry (it
 * raises `gen`).
 *
 * Layout
 *
 *   cst_cache                       buckets (a power of two, one line each)
 *   +------------------------+      +----+----+----+----+----+----+----+------+
 *   | writes (own lines)     |      | e0 |    | e7 | e2 |    |    |    | door |
 *   | gen, budget, keys, ... |      +-|--+----+-|--+----+----+----+----+------+
 *   | bytes, hand (own lines)|        v         v          7 slots, 64 door bits
 *   | stats[16] (own lines)  |      cache_entry: hash gen bytes state ref
 *   +------------------------+                   len n ids[n] topic[len]
 *
 * An entry is immutable but for `state` (PENDING -> VALID -> DEAD, or
 * PENDING -> DEAD) and its CLOCK bit `ref`.  Entries leave the table by a CAS
 * of their slot and are freed through EBR: a reader inside its section may
 * still read one.
 *
 * A new cache.  An update that read no cache (t->cache NULL) neither counts
 * itself nor kills anything.  It reads t->cache inside its epoch section,
 * so the cache's fills wait (R0) until the EBR epoch is two steps past the
 * cache's publication: by then every such update has ended, and a walk
 * that begins after sees its change.  cst_cache_set tries to move the
 * epoch itself; a lookup that finds the cache not ready yet tries after its
 * section.
 *
 * Why no reader sees a stale answer.  Writers W count themselves in `writes`
 * (UPD_BEGIN before, UPD_END after: in-flight count low, finished count
 * high).  A reader R that fills topic t:
 *   R1  reads writes (c0) and gen (g0), seq_cst, before its walk;
 *   R2  walks the trie (the answer A, of some state inside the walk);
 *   R3  publishes its entry e (state PENDING) in the table, then puts t in
 *       keys (both seq_cst);
 *   R4  reads writes and gen again (seq_cst): e becomes VALID (a CAS from
 *       PENDING) only if neither moved and no writer was in flight at R1.
 * A writer W with filter F:
 *   W1  adds UPD_BEGIN to writes (seq_cst);
 *   W2  queries keys for the topics F matches (a snapshot of keys, seq_cst)
 *       and, for each, sets DEAD every entry of that topic in its bucket;
 *   W3  changes the trie (its GCAS);
 *   W4  adds UPD_END to writes.
 * Suppose e is VALID and W3 changed t's answer after R2 read it.  If W1
 * came after R4 in the seq_cst order, then R3 came before W1 too, W2's
 * snapshot of keys holds t and its probe sees e (R3 is before W2 in that
 * order: the Dekker pattern of R3/R4 against W1/W2), so W2 kills e before W3:
 * e was never VALID after W3.  If W1 came before R4, R4 reads a changed
 * `writes` (or W was in flight at R1): e never became VALID.  A hit reads a
 * VALID entry whose answer held from R2 until some W2 that has not happened
 * yet, or happened after the hit's read of `state`; either way the answer is
 * one the trie had during the hit (W3 follows W2).  Clearing is a writer
 * that raises gen at W2; an entry counts only while its gen is the current.
 * An eviction removes t from keys only after unlinking its entry, then kills
 * any other entry of t still in the bucket (a concurrent fill of t), so a
 * VALID entry's topic is always in keys.
 *
 * Cost.  A hit: the topic's hash, one bucket (a line or two), the entry,
 * `gen`, and the ids copied out; no write but the CLOCK bit once per sweep
 * and a per-thread stat line.  A miss: the walk, two loads of `writes`, and
 * for a fill an allocation and a put into keys.  An update with the cache
 * on: two RMWs of `writes` (a line every writer of this trie writes) and a
 * reverse query over the cached topics its literal words leave open.
 *
 * Admission.  A topic is cached on its second miss (the doorkeeper, a
 * bitmap of topic hashes), so traffic that never repeats a topic pays a bit
 * test and set, not a fill, and not even the bucket read.
 *
 * Budget.  An entry is charged its allocation, its topic's length again,
 * and for its key in `keys` 64 bytes plus 128 per level of the topic (each
 * level is a path of three nodes there: measured 115-125 bytes), so that a
 * deep topic cannot make the cache hold many times its budget.  A
 * fill that would pass the budget first evicts with a CLOCK hand; if that
 * does not make room, the answer is not cached.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tls.h"

enum { E_PENDING = 1, E_VALID = 2, E_DEAD = 3 };

#define BUCKET 7                    /* slots of a bucket: a topic's only places */
#define EST_ENTRY 256               /* bytes per entry the table is sized for */
#define KEY_CHARGE 64               /* bytes charged for an entry's key in keys ... */
#define LEVEL_CHARGE 128            /* ... and for each level of its topic (a path in
                                     * keys: I-, C- and S-node, ~115-125 B measured) */
#define CACHE_STAT_STRIPES 16
#define EVICT_TRIES 64              /* slots the hand looks at for one fill */
#define DOOR_WIPE 32                /* a bucket's door is wiped past this many bits */

typedef struct cache_entry {
    uint64_t hash;
    uint64_t gen;                   /* cache gen when its walk began */
    size_t bytes;                   /* what it is charged */
    _Atomic uint32_t state;
    _Atomic uint32_t ref;           /* CLOCK: set by a hit, cleared by the hand */
    uint32_t len;                   /* topic bytes */
    uint32_t n;                     /* ids */
    uint64_t ids[];                 /* n ids, then the topic's len bytes */
} cache_entry;

/* One cache line: a topic's slots and its bucket's doorkeeper bits, so
 * that a hit, a miss and an admission each read one line of the table. */
typedef struct bucket {
    _Atomic(cache_entry *) slot[BUCKET];
    _Atomic uint64_t door;
} bucket;
_Static_assert(sizeof(bucket) == 64, "a bucket per cache line");

typedef struct cache_stat {
    _Atomic int64_t v[CST_CACHE_NSTATS];
    char pad[CST_SPACING - (CST_CACHE_NSTATS * sizeof(int64_t)) % CST_SPACING];
} cache_stat;

struct cst_cache {
    _Alignas(CST_SPACING) _Atomic uint64_t writes; /* written by every writer */
    char pad0[CST_SPACING - sizeof(uint64_t)];
    _Atomic uint64_t gen;           /* read by every hit, raised by a clear */
    _Atomic uint64_t ready;         /* fills wait for this EBR epoch (cst_cache_set) */
    _Atomic size_t budget;          /* 0: off */
    size_t mask;                    /* buckets - 1 */
    bucket *buckets;                /* 64-byte aligned, in buckets_block */
    void *buckets_block;
    cst_trie *keys;                 /* topic index of the cached topics */
    const char *sep;                /* the dialect's separator (keys' tokens) */
    size_t sep_len;
    char pad1[CST_SPACING - 9 * sizeof(size_t)];
    _Atomic int64_t bytes;          /* charged by the entries in the table */
    _Atomic size_t hand;
    char pad2[CST_SPACING - 2 * sizeof(size_t)];
    cache_stat stats[CACHE_STAT_STRIPES];
    void *block;
};

/* The levels of a topic: its separators + 1 (what its key costs in keys). */
static size_t topic_levels(const cst_cache *k, const char *topic, size_t len)
{
    size_t n = 1;
    if (k->sep_len == 1) {
        for (const char *p = topic, *end = topic + len;
             (p = memchr(p, k->sep[0], (size_t)(end - p))) != NULL; p++)
            n++;
        return n;
    }
    for (size_t i = 0; i + k->sep_len <= len;) {
        if (memcmp(topic + i, k->sep, k->sep_len) == 0) {
            n++;
            i += k->sep_len;
        } else {
            i++;
        }
    }
    return n;
}

static inline const char *entry_topic(const cache_entry *e)
{
    return (const char *)(e->ids + e->n);
}

static size_t entry_alloc_size(uint32_t n, uint32_t len)
{
    return sizeof(cache_entry) + (size_t)n * sizeof(uint64_t) + len;
}

static void entry_free(void *p)
{
    cache_entry *e = p;
    cst_dealloc(e, entry_alloc_size(e->n, e->len));
}

static inline void stat_add(cst_cache *k, int which, int64_t d)
{
    static _Atomic unsigned next;
    static CST_TLS unsigned mine; /* stripe + 1 */
    if (mine == 0)
        mine = atomic_fetch_add_explicit(&next, 1, memory_order_relaxed) % CACHE_STAT_STRIPES + 1;
    /* relaxed: a statistic, on this thread's own line */
    atomic_fetch_add_explicit(&k->stats[mine - 1].v[which], d, memory_order_relaxed);
}

static inline uint64_t topic_hash(const char *topic, size_t len)
{
    return word_hash(topic, len);
}

static inline int entry_is(const cache_entry *e, uint64_t h, const char *topic, size_t len)
{
    return e->hash == h && e->len == len && memcmp(entry_topic(e), topic, len) == 0;
}

static inline bucket *bucket_of(const cst_cache *k, uint64_t h)
{
    return &k->buckets[h & k->mask];
}

/* Slot i of the whole table (the hand's and the sweeps' numbering). */
static inline _Atomic(cache_entry *) *slot_at(const cst_cache *k, size_t i)
{
    return &k->buckets[(i / BUCKET) & k->mask].slot[i % BUCKET];
}

static inline size_t nslots(const cst_cache *k) { return (k->mask + 1) * BUCKET; }

static size_t buckets_bytes(size_t n) { return n * sizeof(bucket) + 63; }

/* ------------------------------------------------------------------------
 * Making, sizing, freeing
 * ---------------------------------------------------------------------- */

static cst_cache *cache_new(cst_trie *t, size_t budget)
{
    void *block = cst_alloc(sizeof(cst_cache) + CST_SPACING - 1);
    if (block == NULL)
        return NULL;
    cst_cache *k = (cst_cache *)(((uintptr_t)block + CST_SPACING - 1) & ~(uintptr_t)(CST_SPACING - 1));
    memset(k, 0, sizeof *k);
    k->block = block;
    size_t want = budget / EST_ENTRY / BUCKET;
    size_t n = 16;
    while (n < want && n < ((size_t)1 << 22))
        n <<= 1;
    k->buckets_block = cst_alloc(buckets_bytes(n));
    if (k->buckets_block == NULL) {
        cst_dealloc(block, sizeof(cst_cache) + CST_SPACING - 1);
        return NULL;
    }
    k->buckets = (bucket *)(((uintptr_t)k->buckets_block + 63) & ~(uintptr_t)63);
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < BUCKET; j++)
            atomic_init(&k->buckets[i].slot[j], NULL);
        atomic_init(&k->buckets[i].door, 0);
    }
    k->mask = n - 1;
    k->keys = cst_new(&t->d);
    if (k->keys == NULL) {
        cst_dealloc(k->buckets_block, buckets_bytes(n));
        cst_dealloc(block, sizeof(cst_cache) + CST_SPACING - 1);
        return NULL;
    }
    k->sep = k->keys->d.sep;
    k->sep_len = k->keys->d.sep_len;
    atomic_init(&k->budget, budget);
    atomic_init(&k->gen, 1);
    return k;
}

/* With the handle: nothing else can read it any more. */
void cache_free(cst_cache *k)
{
    if (k == NULL)
        return;
    for (size_t i = 0; i < nslots(k); i++) {
        cache_entry *e = atomic_load_explicit(slot_at(k, i), memory_order_relaxed);
        if (e != NULL)
            entry_free(e);
    }
    cst_dealloc(k->buckets_block, buckets_bytes(k->mask + 1));
    cst_free(k->keys);
    cst_dealloc(k->block, sizeof(cst_cache) + CST_SPACING - 1);
}

/* ------------------------------------------------------------------------
 * Killing and evicting
 * ---------------------------------------------------------------------- */

/* Set DEAD every entry of topic in its bucket.  The number killed. */
static int64_t kill_topic(cst_cache *k, const char *topic, size_t len)
{
    uint64_t h = topic_hash(topic, len);
    bucket *b = bucket_of(k, h);
    int64_t killed = 0;
    for (size_t i = 0; i < BUCKET; i++) {
        /* seq_cst: W2 of the argument above */
        cache_entry *e = atomic_load_explicit(&b->slot[i], memory_order_seq_cst);
        if (e == NULL || !entry_is(e, h, topic, len))
            continue;
        uint32_t s = atomic_exchange_explicit(&e->state, E_DEAD, memory_order_seq_cst);
        killed += s != E_DEAD;
    }
    return killed;
}

/* Unlink e from slot i (if it is still there), free its key and charge,
 * retire it.  Inside an EBR section (ctx c). */
static int evict_at(ctx *c, cst_cache *k, size_t i, cache_entry *e)
{
    cache_entry *expected = e;
    /* seq_cst: the unlink comes before the key's removal (see above) */
    if (!atomic_compare_exchange_strong_explicit(slot_at(k, i), &expected, NULL,
                                                 memory_order_seq_cst, memory_order_relaxed))
        return 0;
    atomic_store_explicit(&e->state, E_DEAD, memory_order_seq_cst);
    uint64_t old;
    cst_topic_remove(k->keys, entry_topic(e), e->len, &old);
    /* a fill of the same topic that raced with the removal loses its key:
     * kill it (it refills later) */
    kill_topic(k, entry_topic(e), e->len);
    atomic_fetch_sub_explicit(&k->bytes, (int64_t)e->bytes, memory_order_relaxed);
    ebr_retire(c->rec, e, entry_free);
    return 1;
}

/* Evict with the CLOCK hand until `need` more bytes fit the budget: 1 if
 * they do. */
static int make_room(ctx *c, cst_cache *k, size_t need, size_t budget)
{
    for (int tries = 0; tries < EVICT_TRIES; tries++) {
        if ((size_t)atomic_load_explicit(&k->bytes, memory_order_relaxed) + need <= budget)
            return 1;
        size_t i = atomic_fetch_add_explicit(&k->hand, 1, memory_order_relaxed) % nslots(k);
        cache_entry *e = atomic_load_explicit(slot_at(k, i), memory_order_acquire);
        if (e == NULL)
            continue;
        if (atomic_load_explicit(&e->state, memory_order_relaxed) != E_DEAD &&
            atomic_load_explicit(&e->ref, memory_order_relaxed)) {
            atomic_store_explicit(&e->ref, 0, memory_order_relaxed);
            continue;
        }
        if (evict_at(c, k, i, e))
            stat_add(k, CST_CACHE_EVICTED, 1);
    }
    return (size_t)atomic_load_explicit(&k->bytes, memory_order_relaxed) + need <= budget;
}

/* ------------------------------------------------------------------------
 * Admission: the doorkeeper
 *
 * A topic is cached on its second miss, not its first: traffic that never
 * repeats a topic (uniform over many topics) pays a bit test and set per
 * lookup, not a fill it will never use.  The doorkeeper is a bitmap indexed
 * by the topic's hash, 64 bits in each bucket's line, two bits a topic (a
 * Bloom filter of two hashes); a bucket's bits are wiped once more than half
 * of them are set, so a topic seen once long ago starts over.  False
 * positives only let a topic in early; admission never affects what an
 * answer is.
 * ---------------------------------------------------------------------- */

/* The doorkeeper bits of h in its bucket: two, from the hash's top bits
 * (the bucket index uses the low ones), so that a topic never seen passes
 * for seen only when both are set (with one bit, 2% of the topics of
 * uniform traffic did, each costing a fill: the cache's whole cost there). */
static inline uint64_t door_bits(uint64_t h)
{
    return UINT64_C(1) << (h >> 58) | UINT64_C(1) << ((h >> 52) & 63);
}

/* Has the doorkeeper seen h since its bucket's last wipe? */
static inline int door_seen(bucket *b, uint64_t h)
{
    /* relaxed: a hint; a lost or stale bit costs one fill more or less */
    uint64_t bits = door_bits(h);
    return (atomic_load_explicit(&b->door, memory_order_relaxed) & bits) == bits;
}

/* Remember h; a bucket whose door has more than DOOR_WIPE bits set starts
 * over, so a topic seen once long ago must be seen twice again. */
static void door_mark(bucket *b, uint64_t h)
{
    uint64_t was = atomic_fetch_or_explicit(&b->door, door_bits(h), memory_order_relaxed);
    if (__builtin_popcountll(was) >= DOOR_WIPE)
        atomic_store_explicit(&b->door, door_bits(h), memory_order_relaxed);
}

/* ------------------------------------------------------------------------
 * Reads
 * ---------------------------------------------------------------------- */

int64_t cache_get(cst_cache *k, const char *topic, size_t len, uint64_t *out, size_t cap,
                  cache_probe *p)
{
    p->on = atomic_load_explicit(&k->budget, memory_order_relaxed) != 0;
    if (!p->on)
        return -1;
    uint64_t h = p->hash = p->hashed ? p->hash : topic_hash(topic, len);
    /* A topic the doorkeeper has not seen is not cached (or its entry
     * outlived a wipe: a miss then, that refills it): no bucket to read. */
    bucket *b = bucket_of(k, h);
    p->seen = door_seen(b, h);
    if (!p->seen) {
        stat_add(k, CST_CACHE_MISSES, 1);
        return -1;
    }
    /* acquire: pairs with the seq_cst raise of a clear */
    uint64_t gen = atomic_load_explicit(&k->gen, memory_order_acquire);
    for (size_t i = 0; i < BUCKET; i++) {
        /* acquire: the entry's fields as its filler wrote them */
        cache_entry *e = atomic_load_explicit(&b->slot[i], memory_order_acquire);
        if (e == NULL || !entry_is(e, h, topic, len))
            continue;
        /* seq_cst: ordered after whatever this thread read from the trie
         * before (a W3 it saw implies the W2 before it) */
        if (atomic_load_explicit(&e->state, memory_order_seq_cst) != E_VALID || e->gen != gen)
            continue;
        size_t m = e->n < cap ? e->n : cap;
        for (size_t j = 0; j < m; j++)
            out[j] = e->ids[j];
        if (!atomic_load_explicit(&e->ref, memory_order_relaxed))
            atomic_store_explicit(&e->ref, 1, memory_order_relaxed);
        stat_add(k, CST_CACHE_HITS, 1);
        return (int64_t)e->n;
    }
    stat_add(k, CST_CACHE_MISSES, 1);
    return -1;
}

void cache_prefetch(cst_cache *k, const char *topic, size_t len, cache_probe *p)
{
    p->hash = topic_hash(topic, len);
    p->hashed = 1;
    if (atomic_load_explicit(&k->budget, memory_order_relaxed) != 0)
        __builtin_prefetch(bucket_of(k, p->hash));
}

void cache_read_state(cst_cache *k, cache_probe *p)
{
    /* seq_cst: R1 */
    p->writes = atomic_load_explicit(&k->writes, memory_order_seq_cst);
    p->gen = atomic_load_explicit(&k->gen, memory_order_seq_cst);
    /* R0: every update that began before the cache existed has ended (the
     * epoch is two steps past its publication), else no fill */
    p->ready = ebr_epoch() >= atomic_load_explicit(&k->ready, memory_order_acquire);
}

void cache_fill(ctx *c, cst_cache *k, const char *topic, size_t len, const uint64_t *ids,
                size_t n, const cache_probe *p)
{
    if (!p->on)
        return;
    uint64_t h = p->hash, w0 = p->writes, g0 = p->gen;
    bucket *b = bucket_of(k, h);
    if (!p->seen) { /* admitted on its second miss */
        door_mark(b, h);
        return;
    }
    size_t budget = atomic_load_explicit(&k->budget, memory_order_relaxed);
    if (!p->ready || budget == 0 || (w0 & UPD_IN_FLIGHT) != 0 || n > UINT32_MAX ||
        len > UINT32_MAX)
        return;
    size_t size = entry_alloc_size((uint32_t)n, (uint32_t)len);
    size_t charge = size + len + KEY_CHARGE + LEVEL_CHARGE * topic_levels(k, topic, len);
    if (!make_room(c, k, charge, budget)) {
        stat_add(k, CST_CACHE_SKIPPED, 1);
        return;
    }
    cache_entry *e = cst_alloc(size);
    if (e == NULL)
        return;
    e->hash = h;
    e->gen = g0;
    e->bytes = charge;
    atomic_init(&e->state, E_PENDING);
    atomic_init(&e->ref, 0);
    e->len = (uint32_t)len;
    e->n = (uint32_t)n;
    memcpy(e->ids, ids, n * sizeof *ids);
    memcpy((char *)(e->ids + n), topic, len);
    /* the slot: this topic's old entry, else an empty one, else a victim
     * picked by the hash */
    size_t at = (size_t)(h >> 32) % BUCKET;
    cache_entry *old = NULL;
    int found = 0;
    for (size_t i = 0; i < BUCKET && !found; i++) {
        cache_entry *x = atomic_load_explicit(&b->slot[i], memory_order_acquire);
        if (x != NULL && entry_is(x, h, topic, len)) {
            at = i, old = x, found = 1;
        } else if (x == NULL) {
            at = i, old = NULL, found = 1;
        }
    }
    if (!found)
        old = atomic_load_explicit(&b->slot[at], memory_order_acquire);
    /* seq_cst: charged before it is published, so that a writer that reads
     * no bytes (cache_invalidate's early return) has no entry to miss */
    atomic_fetch_add_explicit(&k->bytes, (int64_t)charge, memory_order_seq_cst);
    cache_entry *expected = old;
    /* seq_cst: R3, the publication before the key */
    if (!atomic_compare_exchange_strong_explicit(&b->slot[at], &expected, e,
                                                 memory_order_seq_cst, memory_order_relaxed)) {
        atomic_fetch_sub_explicit(&k->bytes, (int64_t)charge, memory_order_relaxed);
        cst_dealloc(e, size);
        return; /* another fill got there: let it */
    }
    if (old != NULL) {
        atomic_store_explicit(&old->state, E_DEAD, memory_order_seq_cst);
        if (!entry_is(old, h, topic, len)) {
            uint64_t was;
            cst_topic_remove(k->keys, entry_topic(old), old->len, &was);
            kill_topic(k, entry_topic(old), old->len);
            stat_add(k, CST_CACHE_EVICTED, 1);
        }
        atomic_fetch_sub_explicit(&k->bytes, (int64_t)old->bytes, memory_order_relaxed);
        ebr_retire(c->rec, old, entry_free);
    }
    uint64_t was;
    if (cst_topic_put(k->keys, topic, len, 1, &was) < 0) {
        atomic_store_explicit(&e->state, E_DEAD, memory_order_seq_cst);
        return;
    }
    /* seq_cst: R4 */
    uint64_t w1 = atomic_load_explicit(&k->writes, memory_order_seq_cst);
    uint64_t g1 = atomic_load_explicit(&k->gen, memory_order_seq_cst);
    uint32_t pending = E_PENDING;
    if (w1 == w0 && g1 == g0 &&
        atomic_compare_exchange_strong_explicit(&e->state, &pending, E_VALID,
                                                memory_order_seq_cst, memory_order_relaxed))
        stat_add(k, CST_CACHE_FILLS, 1);
    else
        atomic_store_explicit(&e->state, E_DEAD, memory_order_seq_cst);
}

/* ------------------------------------------------------------------------
 * Writes
 * ---------------------------------------------------------------------- */

void cache_write_begin(cst_cache *k)
{
    /* seq_cst: W1 */
    atomic_fetch_add_explicit(&k->writes, UPD_BEGIN, memory_order_seq_cst);
}

void cache_write_end(cst_cache *k)
{
    /* seq_cst: W4, after the trie's change */
    atomic_fetch_add_explicit(&k->writes, UPD_END, memory_order_seq_cst);
}

/* W2 for filter (pattern, len): kill the entries of the cached topics it
 * matches; every entry when the query cannot be made. */
void cache_invalidate(cst_cache *k, const char *pattern, size_t len)
{
    /* seq_cst: after W1; an entry being filled is charged before R3 */
    if (atomic_load_explicit(&k->bytes, memory_order_seq_cst) == 0)
        return;
    int err = 0;
    cst_rquery *q = cst_rquery_new(k->keys, pattern, len, &err);
    if (q == NULL) {
        cache_invalidate_all(k);
        return;
    }
    char textbuf[2048];
    char *text = textbuf;
    size_t text_cap = sizeof textbuf;
    int64_t ends[64];
    uint64_t ids[64];
    int64_t killed = 0;
    for (;;) {
        size_t need = 0;
        int64_t got = cst_rquery_next(q, text, text_cap, ends, ids, 64, &need);
        if (got == CST_ETRUNC) {
            char *bigger = malloc(need);
            if (bigger == NULL) {
                cache_invalidate_all(k);
                break;
            }
            if (text != textbuf)
                free(text);
            text = bigger;
            text_cap = need;
            continue;
        }
        if (got < 0) {
            cache_invalidate_all(k);
            break;
        }
        if (got == 0)
            break;
        for (int64_t j = 0; j < got; j++) {
            int64_t from = j ? ends[j - 1] : 0;
            killed += kill_topic(k, text + from, (size_t)(ends[j] - from));
        }
    }
    if (text != textbuf)
        free(text);
    cst_rquery_free(q);
    if (killed)
        stat_add(k, CST_CACHE_INVALIDATED, killed);
}

void cache_invalidate_all(cst_cache *k)
{
    /* seq_cst: a W2 for every entry (they count only while gen is theirs) */
    atomic_fetch_add_explicit(&k->gen, 1, memory_order_seq_cst);
    stat_add(k, CST_CACHE_CLEARS, 1);
}

/* ------------------------------------------------------------------------
 * The API
 * ---------------------------------------------------------------------- */

int cst_cache_set(cst_trie *t, size_t budget)
{
    if (t->readonly)
        return CST_EREADONLY;
    cst_cache *k = atomic_load_explicit(&t->cache, memory_order_acquire);
    if (k == NULL) {
        if (budget == 0)
            return CST_OK;
        cst_cache *made = cache_new(t, budget);
        if (made == NULL)
            return CST_ENOMEM;
        /* Fills wait until every update that read no cache has ended (R0).
         * Such an update read t->cache inside its epoch section, before this
         * CAS; the section's local epoch is at most the epoch read after the
         * CAS, E, and the epoch reaches E + 2 only once every section that
         * was open at E has closed (ebr.c, the correctness argument). */
        atomic_store_explicit(&made->ready, UINT64_MAX, memory_order_relaxed);
        /* seq_cst: the publication before the epoch read below */
        if (!atomic_compare_exchange_strong_explicit(&t->cache, &k, made, memory_order_seq_cst,
                                                     memory_order_acquire)) {
            cache_free(made);
        } else {
            uint64_t e = ebr_epoch();
            atomic_store_explicit(&made->ready, e + 2, memory_order_release);
            /* bounded: a section held open for long (another thread's big
             * walk) leaves it to the next advances, and fills wait */
            for (int i = 0; i < 10000 && ebr_epoch() < e + 2; i++)
                ebr_try_advance();
            return CST_OK;
        }
    }
    atomic_store_explicit(&k->budget, budget, memory_order_relaxed);
    /* shrink now: evict until the entries fit */
    ctx c;
    if (ctx_enter(&c, t) < 0)
        return CST_ENOMEM;
    for (size_t i = 0; i < nslots(k) &&
                       (size_t)atomic_load_explicit(&k->bytes, memory_order_relaxed) > budget;
         i++) {
        cache_entry *e = atomic_load_explicit(slot_at(k, i), memory_order_acquire);
        if (e != NULL && evict_at(&c, k, i, e))
            stat_add(k, CST_CACHE_EVICTED, 1);
    }
    ctx_exit(&c);
    return CST_OK;
}

int cst_cache_stats(cst_trie *t, int64_t *out, size_t n)
{
    memset(out, 0, n * sizeof *out);
    cst_cache *k = atomic_load_explicit(&t->cache, memory_order_acquire);
    if (k == NULL)
        return 0;
    for (size_t s = 0; s < CACHE_STAT_STRIPES; s++)
        for (size_t j = 0; j < CST_CACHE_NSTATS && j < n; j++)
            out[j] += atomic_load_explicit(&k->stats[s].v[j], memory_order_relaxed);
    /* entries: valid and of the current generation, read inside an epoch
     * section (another thread may unlink and retire one meanwhile) */
    int64_t entries = 0;
    ebr_record *rec = ebr_enter();
    if (rec != NULL) {
        uint64_t gen = atomic_load_explicit(&k->gen, memory_order_acquire);
        for (size_t i = 0; i < nslots(k); i++) {
            cache_entry *e = atomic_load_explicit(slot_at(k, i), memory_order_acquire);
            entries += e != NULL && e->gen == gen &&
                       atomic_load_explicit(&e->state, memory_order_relaxed) == E_VALID;
        }
        ebr_exit(rec);
    }
    if (n > CST_CACHE_ENTRIES)
        out[CST_CACHE_ENTRIES] = entries;
    if (n > CST_CACHE_BYTES)
        out[CST_CACHE_BYTES] = atomic_load_explicit(&k->bytes, memory_order_relaxed);
    if (n > CST_CACHE_BUDGET)
        out[CST_CACHE_BUDGET] = (int64_t)atomic_load_explicit(&k->budget, memory_order_relaxed);
    return 1;
}
