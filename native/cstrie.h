/*
 * cstrie.h - public C interface of the cstrie engine: a lock-free concurrent
 * subscription trie (a Ctrie over topic words) with O(1) snapshots.
 *
 * Everything here is safe to call from many threads at once.  A cst_trie is a
 * handle: a writable trie, a writable copy, or a read-only snapshot; handles
 * share nodes and are independent in behaviour.  No function touches Python
 * objects; subscribers are 64-bit ids chosen by the caller.
 *
 * Status codes: >= 0 is success (a count or a boolean); negative values are
 * the CST_E* codes below.  On any error nothing has changed.
 */
#ifndef CSTRIE_H
#define CSTRIE_H

#include <stddef.h>
#include <stdint.h>

#define CST_OK 0
#define CST_ENOMEM (-1)
#define CST_EREADONLY (-2)
#define CST_ETRUNC (-3)        /* output buffers too small; sizes needed are set */
#define CST_EEMPTY (-10)       /* empty topic/pattern not allowed */
#define CST_EEMPTYWORD (-11)   /* empty word not allowed */
#define CST_EWILDTOPIC (-12)   /* wildcard in a topic */
#define CST_ETOOLONG (-13)     /* longer than the dialect allows */
#define CST_ENUL (-14)         /* U+0000 */
#define CST_EMULTIPOS (-15)    /* many-level wildcard not last */
#define CST_EWILDWORD (-16)    /* wildcard does not fill its word */
#define CST_EINVAL (-17)       /* bad argument (e.g. a dialect) */
#define CST_EFORBIDDEN (-18)   /* a character the dialect forbids */
#define CST_ETOODEEP (-19)     /* more words than the dialect allows */
#define CST_EPICK (-20)        /* a route's pick callback gave up (cst_route) */
#define CST_EBOUNDS (-21)      /* an offset table out of order or past its data (cst_build) */
#define CST_EUTF8 (-22)        /* text with no UTF-8 form (a lone surrogate): the bindings' */

typedef struct cst_dialect {
    const char *sep;
    size_t sep_len;
    const char *single;        /* NULL: no one-level wildcard */
    size_t single_len;
    const char *multi;         /* NULL: no many-level wildcard */
    size_t multi_len;
    int multi_min;             /* 0 or 1 words at least */
    int multi_last_only;
    int strict_wildcards;
    int topic_wildcards;
    int empty_topic;
    int empty_words;
    int dollar_rule;
    int forbid_nul;
    size_t max_bytes;          /* 0 = unlimited */
    uint64_t forbidden[2];     /* bit c of forbidden[c / 64]: ASCII byte c is invalid */
    size_t max_levels;         /* most words in a topic or pattern; 0 = unlimited */
} cst_dialect;

typedef struct cst_trie cst_trie;

/* Output of match/iteration: a chunk of entries, each a pattern and
 * subscriber ids.  Entry e's pattern is pat[pat_end[e-1] .. pat_end[e]) and
 * its ids are ids[ids_end[e-1] .. ids_end[e]) (with pat_end[-1] =
 * ids_end[-1] = 0).  On CST_ETRUNC, need_* tell the sizes that a retry
 * needs. */
typedef struct cst_chunk {
    char *pat;
    size_t pat_cap;
    uint64_t *ids;
    size_t ids_cap;
    int64_t *pat_end;
    int64_t *ids_end;
    size_t entries_cap;
    size_t nentries;
    size_t need_pat;
    size_t need_ids;
    size_t need_entries;
    /* Iteration only: share[e] is 0 for an ordinary pattern's entry, or the
     * id of the share group whose members entry e lists (its pattern is the
     * group's filter).  With share NULL, iteration skips share groups. */
    uint64_t *share;
} cst_chunk;

typedef struct cst_stats {
    int64_t pairs;             /* (pattern, subscriber) pairs */
    int64_t patterns;          /* patterns with at least one subscriber */
    int64_t inodes, cnodes, snodes, tnodes, lnodes, setnodes;
    int64_t max_depth;         /* topic levels */
    int64_t lookups;           /* lookups served by this handle */
    int64_t generation;
    int64_t share_pairs;       /* (pattern, group, member) triples, also in pairs */
    int64_t share_groups;      /* (pattern, group) with members, also in patterns */
} cst_stats;

cst_trie *cst_new(const cst_dialect *d);
void cst_free(cst_trie *t);
int cst_is_readonly(const cst_trie *t);

/* 1 = the pair was new / was there, 0 = not, < 0 = error. */
int cst_subscribe(cst_trie *t, const char *pattern, size_t len, uint64_t sub);
int cst_unsubscribe(cst_trie *t, const char *pattern, size_t len, uint64_t sub);
/* Subscribe pairs 0..n-1: pattern i is data[offsets[i] .. offsets[i+1]), its
 * subscriber ids[i].  Stops at the first error: returns how many pairs were
 * processed before it, *status is CST_OK or that error, *added counts the new
 * pairs and results[i] (may be NULL) is 1 for a new pair, 0 for a known one.
 * For bulk loads (one call instead of n). */
int64_t cst_subscribe_batch(cst_trie *t, const char *data, const int64_t *offsets,
                            const uint64_t *ids, int64_t n, uint8_t *results,
                            int64_t *added, int *status);

/*
 * Share groups (MQTT 5 shared subscriptions, NATS queue groups): subscriber
 * sub joins / leaves group `share` (a caller-chosen id, never 0) on pattern.
 * 1 = the membership was new / was there, 0 = not, < 0 = error.  A member is
 * not an ordinary subscriber of the pattern: lookups never return members;
 * cst_route returns one member per matching group.
 */
int cst_share_subscribe(cst_trie *t, const char *pattern, size_t len, uint64_t share,
                        uint64_t sub);
int cst_share_unsubscribe(cst_trie *t, const char *pattern, size_t len, uint64_t share,
                          uint64_t sub);
/* The members of group `share` on exactly this pattern; as cst_subscribers. */
int64_t cst_share_members(cst_trie *t, const char *pattern, size_t len, uint64_t share,
                          uint64_t *out, size_t cap);

/*
 * The pick callback of a route: group `share` has n >= 1 candidate members
 * for this message (the union of its members over every filter that
 * matched, in an order fixed by the set of candidates).  Return
 * CST_PICK_INDEX with *k < n the index of the member to deliver to, or
 * CST_PICK_HASH with *k a 64-bit key hash: the member with the highest
 * rendezvous score for that key (so a member's leaving moves only its own
 * keys).  Any other value abandons the route (CST_EPICK).  Called inside
 * the engine, in the order the groups are listed: it must not call the
 * engine.
 */
typedef int (*cst_pick_fn)(void *arg, uint64_t share, uint64_t n, uint64_t *k);
#define CST_PICK_INDEX 0
#define CST_PICK_HASH 1
/*
 * Route one message: out[0 .. *nplain) receives the ordinary subscribers of
 * topic, each once (as cst_lookup), and out[*nplain ..) one member for each
 * share group with a member on a matching filter, shares[i - *nplain] being
 * that group's id.  Returns the total; when it is above cap nothing is
 * picked (call again with room).  One walk: the answer is of one state.
 */
int64_t cst_route(cst_trie *t, const char *topic, size_t len, cst_pick_fn pick, void *arg,
                  uint64_t *out, uint64_t *shares, size_t cap, size_t *nplain);

/* Subscriber ids matching topic, each once.  Returns how many there are; only
 * the first min(cap, result) are written.  Lookups, has_subscribers, match,
 * route and each row of a batch are linearizable: the answer is the trie's at
 * one moment inside the call, however many branches the walk reads (match.c,
 * "One state of the trie for the whole walk"). */
int64_t cst_lookup(cst_trie *t, const char *topic, size_t len, uint64_t *out, size_t cap);

/* Prefetch what the walks of topics[0..k) will read (at most CST_WARM_TOPICS
 * of them; lens[j] bytes each), breadth first, so that their cache misses
 * overlap (match.c, "Warming a batch").  Decides nothing: call it before
 * looking a batch up, one lookup at a time.  0, or CST_ENOMEM. */
#define CST_WARM_TOPICS 16
int cst_warm(cst_trie *t, const char *const *topics, const size_t *lens, size_t k);
/* 1 when warming pays: t is too big for the caches (match.c). */
int cst_warm_wanted(const cst_trie *t);
/* cst_lookup, for one lookup at a time: when the trie is that big and the
 * result cache did not answer, its walk runs in rounds that overlap its
 * misses (match.c, "A walk in rounds"), or is warmed first. */
int64_t cst_lookup_warm(cst_trie *t, const char *topic, size_t len, uint64_t *out, size_t cap);
/* The answers of topics[0..k) (1 <= k <= CST_WARM_TOPICS), each as
 * cst_lookup's (one state of the trie per topic), one after another in
 * out[0..cap): topic j's are out[(j ? ends[j - 1] : 0) .. ends[j]).  In a big
 * trie the topics walk in the same rounds, so that their misses overlap.
 * Returns the total number of ids (more than cap: out holds only what fit,
 * ends[] says where each answer would go; ask again with more room; out may
 * be NULL with cap 0, to count), or the CST_E* code of the first topic that
 * has one (nothing counted). */
int64_t cst_lookup_many(cst_trie *t, const char *const *topics, const size_t *lens, size_t k,
                        uint64_t *out, size_t cap, size_t *ends);
int cst_has_subscribers(cst_trie *t, const char *topic, size_t len);
int cst_match(cst_trie *t, const char *topic, size_t len, cst_chunk *out);
/* Subscribers of exactly this pattern; same contract as cst_lookup. */
int64_t cst_subscribers(cst_trie *t, const char *pattern, size_t len, uint64_t *out, size_t cap);

/*
 * Batch lookup over an Arrow-style string column: row r's topic is
 * data[offsets[r] .. offsets[r+1]) (64-bit offsets when offsets64, else
 * 32-bit).  validity (may be NULL) is an Arrow validity bitmap with bit offset
 * `validity_offset`; null rows get status 1.  Rows start_row .. nrows-1 are
 * matched; each row's (row, id) pairs (its subscribers, each once) are
 * appended to out_rows/out_ids.  On return *next_row / *next_skip tell where
 * to resume (*next_row == nrows when done).  row_status (may be NULL)
 * receives 0 for a matched row, 1 for null, or a CST_E* code for an invalid
 * topic.  Returns the number of pairs written.
 *
 * A row is always answered by ONE walk of the trie:
 *  - on a writable trie (it may change between calls) a row is written whole
 *    or not at all: the call stops before the first row that does not fit in
 *    what is left of cap.  A row larger than cap by itself gives CST_ETRUNC,
 *    with *next_row at that row and *need its size: grow the buffers and
 *    call again from there.  skip is ignored (0).
 *  - on a read-only trie (a snapshot: frozen, so every walk emits the same ids
 *    in the same order) a row may be split between calls, so the output stays
 *    bounded: the first `skip` ids of row start_row were delivered already.
 */
int64_t cst_lookup_batch(cst_trie *t, const char *data, const void *offsets, int offsets64,
                         const uint8_t *validity, int64_t validity_offset, int64_t nrows,
                         int64_t start_row, uint64_t skip, int64_t *out_rows,
                         uint64_t *out_ids, size_t cap, int64_t *next_row, uint64_t *next_skip,
                         size_t *need, int8_t *row_status);

/* A new writable trie holding exactly the pairs (pattern i =
 * data[offsets[i] .. offsets[i+1]), subscriber ids[i]), built bottom-up with
 * no path copying.  data holds data_len bytes, offsets n + 1 entries, ids and
 * kept n.  kept (may be NULL) receives 1 for each pair that was not a
 * duplicate of an earlier one.  NULL on error, with *status the CST_E* code:
 *  - CST_EBOUNDS: entry *bad_index of offsets is the first that is negative
 *    (entry 0), below the entry before it, or above data_len.  The whole
 *    table is checked before any byte of data is read.
 *  - CST_EINVAL: pair *bad_index's pattern is not valid UTF-8 or its id is
 *    outside 1..max_id; *bad_index is -1 when n is negative or above
 *    2^32 - 2 (more than one build takes).
 *  - a validation code (CST_EEMPTY ...): pair *bad_index's pattern breaks
 *    that rule of the dialect.
 *  - CST_ENOMEM: out of memory. */
cst_trie *cst_build(const cst_dialect *d, const char *data, size_t data_len,
                    const int64_t *offsets, const uint64_t *ids, int64_t n, uint64_t max_id,
                    uint8_t *kept, int *status, int64_t *bad_index);

/* O(1): a read-only snapshot, or a writable copy.  NULL when out of memory. */
cst_trie *cst_snapshot(cst_trie *t, int readonly);
int cst_clear(cst_trie *t);
/* Remove every tomb left by a cleanup that could not allocate (never needed for
 * correct answers; tombs are empty).  O(n). */
int cst_compact(cst_trie *t);
/* Empty t if its contents are still exactly those of snapshot `expected`
 * (taken from t): 1 = emptied, 0 = t changed since (nothing done), < 0 error. */
int cst_clear_if(cst_trie *t, cst_trie *expected);
/* Empty t and return a read-only snapshot of exactly what was removed. */
cst_trie *cst_clear_take(cst_trie *t);
/* Number of (pattern, subscriber) pairs: exact, from a consistent snapshot. */
int64_t cst_len(cst_trie *t);
int cst_stats_get(cst_trie *t, cst_stats *out);

/* Iteration over a consistent snapshot of t, in bounded chunks. */
typedef struct cst_iter cst_iter;
cst_iter *cst_iter_new(cst_trie *t);
/* The same, but every entry holds exactly one id: a pattern with k
 * subscribers comes as k entries, its text repeated (what row-per-pair
 * formats write, with no expansion afterwards). */
cst_iter *cst_iter_new_pairs(cst_trie *t);
/* Fills out with whole or partial entries; returns the number of entries
 * written, 0 at the end, < 0 on error.  An entry may continue in the next
 * call (same pattern again). */
int cst_iter_next(cst_iter *it, cst_chunk *out);
void cst_iter_free(cst_iter *it);

/*
 * Topic index: a trie used the other way round.  Its keys are literal topics
 * (parsed with the topic rules: a wildcard token is a literal word where the
 * dialect allows one in a topic), each holding one 64-bit id; a query by
 * filter returns every stored topic the filter matches.  A handle is either a
 * topic index or a subscription trie: cst_topic_* on a subscription trie
 * fails with CST_EINVAL when a word holds more than one id.
 */
/* Store id under topic: 1 = the topic is new, 0 = it replaced *old. */
int cst_topic_put(cst_trie *t, const char *topic, size_t len, uint64_t id, uint64_t *old);
/* Remove topic: 1 = removed (its id in *old), 0 = absent. */
int cst_topic_remove(cst_trie *t, const char *topic, size_t len, uint64_t *old);
/* 1 and *id = its id when topic is stored, else 0.  Linearizable. */
int cst_topic_get(cst_trie *t, const char *topic, size_t len, uint64_t *id);
/*
 * A reverse query: every stored topic that filter matches, walked on a
 * read-only snapshot taken when the query is made (so it answers for that
 * moment, and nothing later changes what it returns).  cst_rquery_next fills
 * up to cap results: topic k is text[ends[k-1] .. ends[k]) (ends[-1] = 0) with
 * id ids[k]; it returns how many it wrote, 0 once the query is done,
 * CST_ETRUNC when the next topic alone needs more than text_cap bytes (*need
 * says how many), < 0 on other errors.  Each topic comes once.  The cost is
 * the part of the index the filter's literal words leave open: a literal word
 * is a hash probe, a wildcard reads every word of its level.  Filters are
 * normalised (runs of wildcards become n one-word items and at most one
 * zero-or-more item), and the walk keeps, per topic level on its path, the
 * set of filter positions still alive: O(levels * filter words) memory.
 */
typedef struct cst_rquery cst_rquery;
cst_rquery *cst_rquery_new(cst_trie *t, const char *filter, size_t len, int *err);
int64_t cst_rquery_next(cst_rquery *q, char *text, size_t text_cap, int64_t *ends, uint64_t *ids,
                        size_t cap, size_t *need);
void cst_rquery_free(cst_rquery *q);
/* The same walk over a subscription trie: every stored filter (ordinary
 * subscriptions; ids are 0) that may share a topic with filter.  A superset:
 * each candidate is confirmed by the exact relation (cstrie/relations.py);
 * what it leaves out shares no topic with filter. */
cst_rquery *cst_rquery_filters(cst_trie *t, const char *filter, size_t len, int *err);
/* How many stored topics filter matches (one snapshot, no output). */
int64_t cst_rquery_count(cst_trie *t, const char *filter, size_t len);

/*
 * Result cache (cache.c): a writable handle's answers to recent topics,
 * exact (an update kills precisely the cached topics its filter matches,
 * before it changes the trie; see cache.c for the argument), within a byte
 * budget.  Off until a budget is set; 0 turns it off again.  cst_lookup
 * reads it; snapshots and copies have none.
 */
int cst_cache_set(cst_trie *t, size_t budget_bytes);
/* The counters, summed over threads, in out[0 .. n): indices below.  1 when
 * the handle has a cache, else 0 (out zeroed). */
#define CST_CACHE_HITS 0
#define CST_CACHE_MISSES 1
#define CST_CACHE_FILLS 2
#define CST_CACHE_SKIPPED 3
#define CST_CACHE_INVALIDATED 4
#define CST_CACHE_EVICTED 5
#define CST_CACHE_CLEARS 6
#define CST_CACHE_ENTRIES 7
#define CST_CACHE_BYTES 8
#define CST_CACHE_BUDGET 9
#define CST_CACHE_NSTATS 10
int cst_cache_stats(cst_trie *t, int64_t *out, size_t n);

/* Check the structural invariants of t (strict: also those that hold only when
 * no update is in flight).  0 = fine; otherwise < 0 and msg describes it. */
int cst_check(cst_trie *t, int strict, char *msg, size_t msg_cap);
/* Indented dump of the node structure into buf; returns the full length. */
size_t cst_dump(cst_trie *t, char *buf, size_t cap);
/* Validate and split a topic (is_pattern 0) or pattern: returns the number of
 * words or a CST_E* code.  The dialect's rules are checked here only: the
 * Python layer validates through these two calls. */
int64_t cst_validate(cst_trie *t, const char *s, size_t len, int is_pattern);
/* cst_validate, and on a validation error where the fault is: *at the byte
 * offset of the bad byte (NUL, forbidden), of the bad word's start, or the
 * length (too long); *index the bad word's index (-1 when none). */
int64_t cst_validate_at(cst_trie *t, const char *s, size_t len, int is_pattern, int64_t *at,
                        int64_t *index);

/* Dense numbers for subscriber ids in order of first appearance (exports).
 * cst_numbering_apply writes the number of ids[i] to refs[i] (1, 2, 3, ...)
 * and the ids seen for the first time, in order, to fresh (room for n);
 * returns how many are fresh, or CST_ENOMEM (numbers given before stay). */
typedef struct cst_numbering cst_numbering;
cst_numbering *cst_numbering_new(void);
void cst_numbering_free(cst_numbering *nm);
int64_t cst_numbering_apply(cst_numbering *nm, const uint64_t *ids, size_t n, uint64_t *refs,
                            uint64_t *fresh);
/* counts[ids[i]] += 1 for every i with kept[i] (every i when kept is NULL);
 * counts has max_id + 1 entries.  CST_EINVAL (nothing counted) if an id is
 * above max_id. */
int cst_count_ids(const uint64_t *ids, const uint8_t *kept, size_t n, uint32_t *counts,
                  uint64_t max_id);

/* Byte tables (tables.c): item i of (data, end) is data[end[i-1] .. end[i]),
 * end[-1] being 0.  cst_interleave writes item i of table a followed by item
 * refs[i] of table b (nb items), for i in 0..n, to out and returns the size;
 * with out NULL it only returns the size.  CST_EINVAL (nothing written) if a
 * ref is >= nb or an item used has a negative length. */
int64_t cst_interleave(const char *a, const int64_t *a_end, int64_t n, const char *b,
                       const int64_t *b_end, int64_t nb, const uint64_t *refs, char *out);
/* out receives item refs[i] of table b for i in 0..n, and out_end[i] the end
 * of each in out; returns the size (out NULL: only the size).  CST_EINVAL as
 * for cst_interleave. */
int64_t cst_gather(const char *b, const int64_t *b_end, int64_t nb, const uint64_t *refs,
                   int64_t n, char *out, int64_t *out_end);

/* Parse n JSON Lines of exactly the exporter's form (len bytes, each line
 * ending in a newline):  {"pattern":"...","subscriber":<string or integer>}
 * Pattern i's UTF-8 bytes go to pat (room for len bytes), between offsets
 * pat_off[i] and pat_off[i + 1] (n + 1 entries).  Each distinct subscriber
 * (by kind and bytes) gets a number 1, 2, ... in order of first appearance:
 * refs[i] is line i's; subscriber k's bytes (a string's UTF-8, an integer's
 * digits) end at sub_end[k - 1] in sub (room for len bytes), its kind
 * (0 string, 1 integer) is sub_kind[k - 1] (room for n each).  Returns the
 * number of distinct subscribers; -1 when a line is not of that form (any
 * other spacing or key order, a lone surrogate escape, an object, ...: the
 * caller then parses the general way); CST_ENOMEM. */
int64_t cst_jsonl_scan(const char *body, int64_t len, int64_t n, char *pat, int64_t *pat_off,
                       uint64_t *refs, char *sub, int64_t *sub_end, uint8_t *sub_kind);

/* The entry points of the CPython fast path: a const cst_hot_api *
 * (hotpath_api.h), whose address the binding layer passes to cstrie._hotpath. */
const void *cst_hot_api_table(void);

/* Reclamation and allocator introspection (tests, stats). */
int64_t cst_reclaim(void);           /* quiescent reclaim; returns objects still pending */
void cst_thread_detach(void);        /* hand this thread's garbage over now */
int64_t cst_live_allocations(void);
int64_t cst_live_bytes(void);
void cst_fail_allocations_after(int64_t n);  /* -1 = never fail */
/* Tests only, before creating tries: keep only these hash bits (forces collisions). */
void cst_debug_set_hash_mask(uint64_t mask);
/* Tests only: bulk builds of at least n pairs carve nodes from node blocks
 * (default 16384; 0 = every build, a huge n = none). */
void cst_debug_set_block_threshold(int64_t n);
/* Tests only: the steps (states taken off its work stack) of this thread's
 * last lookup walk: the measure of a lookup's cost that timing cannot give. */
int64_t cst_debug_last_walk_steps(void);
/* A long walk (a lookup, match, route or has_subscribers that has taken
 * 16,384 states or index sets, and again every 16,384 after that) calls
 * fn() from inside the engine call, on the calling thread: a caller that
 * holds a lock the walk does not need (the CPython fast path: the GIL) may
 * release it there and take it back when the call returns.  fn must not call
 * the engine.  NULL (the default) calls nothing. */
typedef void (*cst_yield_fn)(void);
void cst_set_walk_yield(cst_yield_fn fn);

/* Read sections, for a caller that maps an engine answer to data of its own
 * (the CPython fast path: ids -> subscriber objects) and recycles that data's
 * slots: a slot given up at epoch e (cst_epoch) is safe to reuse once the
 * epoch is e + 2 or more - no read section open at e is open then.  Sections
 * nest with engine calls (an engine call inside one is part of it).  A
 * section must be short: everything the engine frees waits for it too. */
void *cst_read_enter(void);             /* NULL only when out of memory */
void cst_read_exit(void *section);
uint64_t cst_epoch(void);               /* the global epoch now */
uint64_t cst_epoch_advance(void);       /* try one step (outside sections); the epoch after */
/* Tests only: how many times a lookup walk of a live trie may run before it
 * freezes the trie and walks the frozen generation (default 4; 0 = every walk
 * freezes; < 0 restores the default), and the process-wide counts of walks run
 * again (an update changed a node they read) and of freezes. */
void cst_debug_set_walk_retries(int n);
void cst_debug_walk_counts(int64_t *rewalks, int64_t *freezes);
/* Tests only: the size (pairs) past which a trie is big: its lookups
 * (cst_lookup_warm) walk in rounds or warm their walks, and a batch warms
 * (cst_warm_wanted).  Default 50,000; 0: every trie with a pair; < 0
 * restores the default. */
void cst_debug_set_warm_pairs(int64_t n);

#endif
