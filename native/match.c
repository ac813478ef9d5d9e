/*
 * match.c - lookups: match a topic against the trie with backtracking over
 * the one-level and many-level wildcards, without taking a lock.
 *
 * A lookup reads main nodes through gcas_read (helping a pending GCAS to its
 * end, which may CAS) and never renews or cleans: T-nodes are read through
 * (a tomb's contents are final), and old-generation paths are current (see
 * trie.c).  The many-level wildcard of a dialect that allows it anywhere
 * (AMQP '#') reaches the S-nodes below it with many numbers of words
 * consumed; below it the walk takes each S-node once with the set of those
 * numbers as a bitmap ("Index-set walks" below), so neither #.#.#.#.a nor
 * thousands of long patterns of '#' and '*' make a lookup explode.
 *
 * The walk keeps its pending states on a heap stack (per-thread scratch), not
 * on the C stack: a topic may have 65,535 levels (a valid MQTT topic of
 * separators only), and every level is one more state on the path.
 */
#include <stdlib.h>

#include "internal.h"
#include "mix64.h"

/* ------------------------------------------------------------------------
 * The walk
 * ---------------------------------------------------------------------- */

/* A main node read by a lookup's walk, with its I-node. */
typedef struct main_read {
    struct inode *in;
    struct mainnode *m;
} main_read;

/* A share group's S-node found by a route, with its group id. */
typedef struct share_ref {
    uint64_t id;
    struct snode *sn;
} share_ref;

typedef struct mctx {
    ctx *c;
    const word *w;
    size_t n;
    int dollar;                /* the dollar rule hides wildcards at word 0 */
    int sets;                  /* many-level wildcard allowed anywhere: index-set walks */
    int first_only;            /* has_subscribers: stop at the first match */
    int found;
    int oom;
    scratch *sc;
    size_t nmatched;           /* S-nodes matched (sc->matched) */
    snode *const *mt;          /* where collect_ids reads them, if not sc->matched */
    size_t depth;
    cst_chunk *out;            /* match(): entries written as found */
    int trunc;
    int route;                 /* route(): also collect the share groups */
    size_t nshares;            /* share-group S-nodes found (sc->shares) */
    int record;                /* note each main node read (sc->reads) */
    size_t nreads;
    int64_t steps;             /* states and index-set frames taken (last_steps) */
    uint32_t stamp;            /* marks the topic words probed by one collect_kids */
    int table;                 /* the topic's word table is built (topic_table) */
    size_t nwords;             /* distinct words of the topic */
    size_t width;              /* 64-bit words of an index set: (n + 1 + 63) / 64 */
    size_t pbits_used;         /* words of sc->pbits in use (position sets) */
} mctx;

static void emit_entry(mctx *x, snode *sn)
{
    cst_chunk *o = x->out;
    const cst_dialect *d = &x->c->t->d;
    size_t plen = 0;
    for (size_t i = 0; i < x->depth; i++)
        plen += x->sc->path[i]->wlen + (i ? d->sep_len : 0);
    size_t pat0 = o->need_pat, ids0 = o->need_ids, g = o->need_entries;
    o->need_pat += plen;
    o->need_ids += sn->nsubs;
    o->need_entries += 1;
    if (x->trunc || o->need_pat > o->pat_cap || o->need_ids > o->ids_cap ||
        o->need_entries > o->entries_cap) {
        x->trunc = 1;
        return;
    }
    char *p = o->pat + pat0;
    for (size_t i = 0; i < x->depth; i++) {
        if (i) {
            memcpy(p, d->sep, d->sep_len);
            p += d->sep_len;
        }
        memcpy(p, x->sc->path[i]->word, x->sc->path[i]->wlen);
        p += x->sc->path[i]->wlen;
    }
    snode_emit(sn, o->ids + ids0);
    o->pat_end[g] = (int64_t)o->need_pat;
    o->ids_end[g] = (int64_t)o->need_ids;
    o->nentries = g + 1;
}

static void emit_slow(mctx *x, snode *sn)
{
    x->found = 1;
    if (x->first_only)
        return;
    if (x->out != NULL) {
        emit_entry(x, sn);
        return;
    }
    if (x->nmatched >= x->sc->matchedcap &&
        scratch_reserve((void **)&x->sc->matched, &x->sc->matchedcap, x->nmatched + 1,
                        sizeof(snode *)) < 0) {
        x->oom = 1;
        return;
    }
    x->sc->matched[x->nmatched++] = sn;
}

/* S-node sn matched the whole topic.  A lookup's common case inline: note
 * it, with room on the list. */
static inline void emit(mctx *x, snode *sn)
{
    scratch *sc = x->sc;
    if (__builtin_expect(!x->first_only && x->out == NULL && x->nmatched < sc->matchedcap, 1)) {
        x->found = 1;
        sc->matched[x->nmatched++] = sn;
        return;
    }
    emit_slow(x, sn);
}

/*
 * One state of the trie for the whole walk.
 *
 * A walk reads main nodes on many branches, each at its own moment; every
 * read alone is current, but together they need not be one state of the trie:
 * a subscriber that moves from one matching filter to another (subscribe the
 * new, then unsubscribe the old) can be missed by a walk that reads the new
 * filter's branch before the subscribe and the old one after the unsubscribe.
 * Two checks make a walk's reads one state.  The quick one: the trie counts
 * updates in flight and done (trie.c, gcas), per stripe of the first word of
 * the pattern an update is for (internal.h, "Update stripes"); a walk that
 * began with none in flight and ends reading the same counts, in the stripes
 * of the patterns that can match its topic, saw no update of those patterns
 * begin or end, so its answer is that of the trie with exactly the updates
 * done before it began (an update raises the count before its CAS and marks
 * its end after, with release; the walk reads the counts with acquire on
 * both sides).  An update under another first word may change what the walk
 * reads, never what it finds: a pattern with another first literal word
 * cannot match the topic, and such an update moves S-nodes of other words
 * only as whole nodes (a hash level split or pulled up: the walk finds the
 * same S-node, with the same subscribers and the same child, either way),
 * drops words that hold nothing, or gives an S-node whose next level is an
 * empty tomb a copy without it (the same subscribers, and nothing below
 * either way).  When the count moved, the walk runs
 * again and notes every (I-node, main node) it reads, and reads them all
 * again at its end (a double collect).  If every main node is
 * unchanged, there was a moment between the two collects at which the trie
 * held all of them at once - a main node is never installed again in the
 * I-node it left (a GCAS that fails rolls back to the node it replaced, which
 * was never out of the I-node as far as a reader can tell: gcas_read returns
 * only committed nodes), and no node read can be freed and reused while the
 * walk is inside its epoch section - and every node the walk reached hangs
 * from those mains (C-nodes and S-nodes are immutable), so the answer is the
 * trie's at that moment: the walk's linearization point.  Otherwise some
 * update landed on the walk's path and it runs again (WALK_RETRIES walks in all),
 * then freezes the trie (the read-only snapshot's RDCSS, O(1)) and walks the
 * frozen generation, which no update can change.  A frozen trie (a read-only
 * snapshot) needs no check at all.
 */
#define WALK_RETRIES 4

/* cst_set_walk_yield: called every WALK_YIELD_STEPS steps of one walk. */
#define WALK_YIELD_STEPS 16384
static _Atomic(cst_yield_fn) walk_yield;

void cst_set_walk_yield(cst_yield_fn fn)
{
    atomic_store_explicit(&walk_yield, fn, memory_order_release);
}

/* Steps counted so far, plus one; every WALK_YIELD_STEPS the caller's hook
 * runs.  (match_walk counts in a local, set_walk in x->steps.) */
static inline int64_t step(int64_t steps)
{
    if (__builtin_expect((++steps & (WALK_YIELD_STEPS - 1)) == 0, 0)) {
        /* acquire: pairs with the release of cst_set_walk_yield */
        cst_yield_fn fn = atomic_load_explicit(&walk_yield, memory_order_acquire);
        if (fn != NULL)
            fn();
    }
    return steps;
}

/* One more step of the walk. */
static inline void walk_step(mctx *x) { x->steps = step(x->steps); }

static _Atomic int walk_retries = WALK_RETRIES;
static _Atomic int64_t walk_rewalks, walk_freezes; /* statistics: relaxed */

void cst_debug_set_walk_retries(int n)
{
    atomic_store_explicit(&walk_retries, n < 0 ? WALK_RETRIES : n, memory_order_relaxed);
}

void cst_debug_walk_counts(int64_t *rewalks, int64_t *freezes)
{
    *rewalks = atomic_load_explicit(&walk_rewalks, memory_order_relaxed);
    *freezes = atomic_load_explicit(&walk_freezes, memory_order_relaxed);
}

/* in's main node, noted in sc->reads when `record` (x->record, passed as a
 * value where the walk keeps it in a register). */
static inline __attribute__((always_inline)) mainnode *read_main_k(mctx *x, inode *in,
                                                                    int record)
{
    mainnode *m = gcas_read(x->c, in);
    if (record) {
        scratch *sc = x->sc;
        if (__builtin_expect(x->nreads >= sc->rdcap, 0) &&
            scratch_reserve((void **)&sc->reads, &sc->rdcap, x->nreads + 1, sizeof(main_read)) <
                0) {
            x->oom = 1;
            return m;
        }
        sc->reads[x->nreads++] = (main_read){in, m};
    }
    return m;
}

static inline mainnode *read_main(mctx *x, inode *in) { return read_main_k(x, in, x->record); }

/* 1 if the root and every main node the walk read are still in place. */
static int walk_unchanged(mctx *x, inode *root)
{
    if (root_read(x->c) != root)
        return 0;
    const main_read *r = x->sc->reads;
    for (size_t i = 0; i < x->nreads; i++)
        if (gcas_read(x->c, r[i].in) != r[i].m)
            return 0;
    return 1;
}

static inline mainnode *read_noted(void *x, inode *in) { return read_main_k(x, in, 1); }
static inline mainnode *read_unnoted(void *x, inode *in) { return read_main_k(x, in, 0); }

/* The S-node of literal word w in the topic level whose top C-node is cn. */
static inline __attribute__((always_inline)) snode *find_literal(mctx *x, cnode *cn,
                                                                  const word *w, int record)
{
    return record ? level_find(cn, w, read_noted, x) : level_find(cn, w, read_unnoted, x);
}

/* The next topic level below an S-node holds nothing a topic can match: it
 * is empty or has only the share slot (the groups of the S-node's pattern,
 * nodes.h).  A many-level wildcard with such a level below it is a last
 * word: its pattern matches only by consuming every word left. */
static int only_shares(mctx *x, inode *in)
{
    mainnode *m = read_main(x, in);
    if (m->h.kind != K_CNODE)
        return 1; /* a tomb at hash level 0: an empty topic level */
    const cnode *cn = (const cnode *)m;
    return cn->bitmap == 0 && (cn->m.h.b2 & ~(1u << (W_SHARE - 1))) == 0;
}

static void share_add(mctx *x, snode *sn)
{
    if (sn->nsubs == 0 || sn->wlen != SHARE_ID_BYTES)
        return;
    scratch *sc = x->sc;
    if (x->nshares >= sc->shcap &&
        scratch_reserve((void **)&sc->shares, &sc->shcap, x->nshares + 1,
                        sizeof(share_ref)) < 0) {
        x->oom = 1;
        return;
    }
    sc->shares[x->nshares++] = (share_ref){share_id_read(sn->word), sn};
}

/* Every group S-node of the share level whose main node (at hash level lev)
 * is m.  Recursion over hash levels only: at most MAX_HASH_LEVEL / CN_BITS + 2
 * deep, whatever the input. */
static void shares_below(mctx *x, mainnode *m, unsigned lev)
{
    switch (m->h.kind) {
    case K_CNODE: {
        cnode *cn = (cnode *)m;
        /* a share level is read whole: fetch its branches' lines at once, so
         * that their misses overlap */
        for (uint32_t i = (uint32_t)popc(cn->m.h.b2); i < cn->n; i++)
            __builtin_prefetch(cn->array[i]);
        for (uint32_t i = (uint32_t)popc(cn->m.h.b2); i < cn->n; i++) {
            cst_hdr *b = cn->array[i];
            if (b->kind == K_SNODE)
                share_add(x, (snode *)b);
            else if (lev <= MAX_HASH_LEVEL)
                shares_below(x, read_main(x, (inode *)b), lev + CN_BITS);
        }
        return;
    }
    case K_TNODE:
        if (((tnode *)m)->sn)
            share_add(x, ((tnode *)m)->sn);
        return;
    case K_LNODE:
        for (uint32_t i = 0; i < ((lnode *)m)->n; i++)
            share_add(x, ((lnode *)m)->sn[i]);
        return;
    default:
        return;
    }
}

/*
 * A pending state of the walk (the recursion of the paper's lookup, made
 * explicit):
 *  F_NODE  - S-node sn reached with j words consumed: emit it if j is the
 *            whole topic, then open its next topic level at word j;
 *  F_MULTI - the many-level wildcard S-node sn still to be tried with j, j+1,
 *            ..., end words consumed (one F_NODE each, in that order), or,
 *            where the wildcard may be followed by more words (AMQP), the
 *            root of an index-set walk (below).
 * depth is the S-node's index on the path (match() rebuilds the pattern from
 * sc->path[0..depth]).  Frames are pushed in the reverse of the order they
 * are visited in, so the walk visits states in the order of the recursive
 * formulation: the zero-word pattern, the many-level wildcard, the literal
 * word, the one-level wildcard.
 */
enum { F_NODE, F_MULTI };

typedef struct mframe {
    snode *sn;
    size_t j;
    size_t end;
    size_t depth;
    uint8_t kind;
} mframe;

static size_t push_grow(mctx *x, size_t sp, mframe f)
{
    scratch *sc = x->sc;
    if (scratch_reserve((void **)&sc->mstack, &sc->mstackcap, sp + 1, sizeof(mframe)) < 0) {
        x->oom = 1;
        return 0; /* the walk ends: its answer is an error now */
    }
    sc->mstack[sp] = f;
    return sp + 1;
}

/* The walk's stack of states (sc->mstack and its capacity), in locals of
 * match_walk: read from the scratch again only after it grew. */
typedef struct wstack {
    mframe *v;
    size_t cap;
} wstack;

/* Push f on the walk's stack of sp states; the new count.  The count goes in
 * and out by value, so that the walk keeps it in a register (a pointer to it
 * kept it in memory: a store and a load per state). */
static inline size_t push(mctx *x, wstack *st, size_t sp, mframe f)
{
    if (__builtin_expect(sp < st->cap, 1)) {
        st->v[sp] = f;
        return sp + 1;
    }
    sp = push_grow(x, sp, f);
    st->v = x->sc->mstack;
    st->cap = x->sc->mstackcap;
    return sp;
}

/* The route's groups of the topic level whose top C-node is cn: its S-node
 * above matched the whole topic. */
static void level_shares(mctx *x, cnode *cn)
{
    snode *g = (snode *)spec_get(cn, W_SHARE - 1);
    if (g != NULL && g->child != NULL)
        shares_below(x, read_main(x, g->child), 0);
}

/* What one walk reads of x at every state, in locals of match_walk (so in
 * registers: the walk's stores through its scratch pointers would make the
 * compiler read x's fields again each time). */
typedef struct wconst {
    const word *w;
    size_t n;
    size_t multi_min;
    int dollar;
    int route;
    int record;
} wconst;

/* Push the states that follow a topic level (the C-node under in) with i
 * words consumed. */
static inline __attribute__((always_inline)) size_t
open_level(mctx *x, const wconst k, wstack *st, size_t sp, inode *in, size_t i, int is_top,
           size_t depth)
{
    mainnode *m = read_main_k(x, in, k.record);
    if (m->h.kind != K_CNODE)
        return sp; /* an entombed (empty) topic level */
    cnode *cn = (cnode *)m;
    int hide = k.dollar && i == 0;
    if (i < k.n) {
        /* The states are taken in the reverse order of their pushes, so the
         * one-level wildcard's S-node and the literal's next level are read
         * last: fetch them now, while the walk goes on elsewhere. */
        snode *ss = (snode *)spec_get(cn, W_SINGLE - 1);
        if (ss && !hide) {
            __builtin_prefetch(ss);
            sp = push(x, st, sp, (mframe){ss, i + 1, 0, depth, F_NODE});
        }
        snode *sn = find_literal(x, cn, &k.w[i], k.record);
        if (sn) {
            if (sn->child != NULL)
                __builtin_prefetch(sn->child);
            sp = push(x, st, sp, (mframe){sn, i + 1, 0, depth, F_NODE});
        }
    }
    snode *sm = (snode *)spec_get(cn, W_MULTI - 1);
    if (sm && !hide) {
        size_t from = i + k.multi_min;
        if (from <= k.n)
            sp = push(x, st, sp, (mframe){sm, from, k.n, depth, F_MULTI});
    }
    if (is_top && k.n == 0) {
        snode *e = (snode *)spec_get(cn, W_EMPTY_PATTERN - 1);
        if (e)
            sp = push(x, st, sp, (mframe){e, 0, 0, depth, F_NODE});
    }
    if (k.route && i == k.n && !is_top)
        level_shares(x, cn); /* the S-node above matched the whole topic */
    return sp;
}

/* ------------------------------------------------------------------------
 * Index-set walks: a many-level wildcard that may be followed by more words
 *
 * Where the many-level wildcard may stand anywhere (AMQP '#'), the S-nodes
 * below it are reached with many numbers of words consumed: state by state,
 * a lookup costs (S-nodes below the wildcard) x (topic words), and 2,000
 * patterns of '#', '*' and one word against a 256-word key cost seconds.
 * Below the first such wildcard on a path the walk therefore takes each
 * S-node once, with the SET of word counts it is reached with, as a bitmap
 * of (n + 1) bits ("index set"):
 *
 *   '#' (x):      B(x) = { k : k >= min B(parent) + multi_min }
 *   '*' (x):      B(x) = { i + 1 : i in B(parent), i < n }
 *   literal v:    B(x) = { i + 1 : i in B(parent), i < n, word i == v }
 *
 * x matches when n is in B(x).  An S-node has one parent, so each S-node
 * below the wildcard is taken once: the cost is O(n) to index the topic's
 * words, plus, per S-node taken, O((n + 1) / 64) word operations and at most
 * min(literal branches of its level, words in its set) probes; a literal
 * branch is taken only when its word occurs at an index of the set.  The
 * result is the set of S-nodes the state-by-state search reaches with every
 * word consumed (the same rules, applied to all indices at once); only the
 * order in which a level's literal branches are taken differs (here: by the
 * first index of their word in the topic).
 *
 * The sets live in a per-thread stack arena (sc->bits), the frames on
 * sc->sstack: a frame's set stays while its children are taken, so the
 * memory is O(depth x (n + 1) / 64) words.  The topic's words are numbered
 * once per lookup (topic_table): equal words share a number, each number
 * knows its occurrences, and a number that occurs at least `width` times
 * gets a bitmap of its positions (at most n / width of them).
 * ---------------------------------------------------------------------- */

#define NO_POS UINT32_MAX

typedef struct tword {
    uint32_t first;            /* its first index in the topic */
    uint32_t occ;              /* its occurrences */
    size_t pos;                /* offset of its position bitmap in sc->pbits, or SIZE_MAX */
} tword;

/* A literal branch found below an index-set frame, with its word's number. */
typedef struct skid {
    snode *sn;
    uint32_t v;
    uint32_t first;            /* its word's first index in the topic (the order) */
} skid;

typedef struct sframe {
    snode *sn;
    size_t depth;
    size_t set;                /* offset of B(sn) in sc->bits */
    size_t kids;               /* offset of its found literal branches in sc->kids */
    uint32_t nkids, next;
    uint8_t stage;             /* S_ENTER, S_MULTI, S_LITERALS, S_KIDS, S_DONE */
    cnode *cn;                 /* sn's next topic level, or NULL */
} sframe;

enum { S_ENTER, S_MULTI, S_LITERALS, S_KIDS, S_DONE };

static inline int bit_get(const uint64_t *s, size_t i) { return (int)((s[i >> 6] >> (i & 63)) & 1); }
static inline void bit_set(uint64_t *s, size_t i) { s[i >> 6] |= UINT64_C(1) << (i & 63); }

/* The number of the topic word equal to the S-node's literal word, or NO_POS. */
static uint32_t tword_find(mctx *x, const snode *sn)
{
    scratch *sc = x->sc;
    size_t mask = sc->thashcap - 1;
    for (size_t h = (size_t)(sn->hash * UINT64_C(0x9e3779b97f4a7c15) >> 20) & mask;;
         h = (h + 1) & mask) {
        uint32_t e = sc->thash[h];
        if (e == 0)
            return NO_POS;
        const word *w = &x->w[sc->tw[e - 1].first];
        if (w->hash == sn->hash && w->len == sn->wlen && memcmp(w->p, sn->word, w->len) == 0)
            return e - 1;
    }
}

/* Number the topic's words (see above); 0, or -1 when out of memory. */
static int topic_table(mctx *x)
{
    scratch *sc = x->sc;
    size_t n = x->n, cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    if (scratch_reserve((void **)&sc->twid, &sc->twidcap, n, sizeof(uint32_t)) < 0 ||
        scratch_reserve((void **)&sc->tnext, &sc->tnextcap, n, sizeof(uint32_t)) < 0 ||
        scratch_reserve((void **)&sc->tw, &sc->twcap, n, sizeof(tword)) < 0 ||
        scratch_reserve((void **)&sc->tstamp, &sc->tstampcap, n, sizeof(uint32_t)) < 0 ||
        scratch_reserve((void **)&sc->thash, &sc->thashcap, cap, sizeof(uint32_t)) < 0)
        return -1;
    /* thashcap may be larger than cap: probe over all of it */
    memset(sc->thash, 0, sc->thashcap * sizeof(uint32_t));
    size_t mask = sc->thashcap - 1, nw = 0;
    for (size_t i = n; i-- > 0;) {
        const word *w = &x->w[i];
        size_t h = (size_t)(w->hash * UINT64_C(0x9e3779b97f4a7c15) >> 20) & mask;
        uint32_t v = NO_POS;
        for (;; h = (h + 1) & mask) {
            uint32_t e = sc->thash[h];
            if (e == 0)
                break;
            const word *o = &x->w[sc->tw[e - 1].first];
            if (o->hash == w->hash && o->len == w->len && memcmp(o->p, w->p, w->len) == 0) {
                v = e - 1;
                break;
            }
        }
        if (v == NO_POS) {
            v = (uint32_t)nw++;
            sc->thash[h] = v + 1;
            sc->tw[v] = (tword){NO_POS, 0, SIZE_MAX};
        }
        sc->twid[i] = v;
        sc->tnext[i] = sc->tw[v].first;
        sc->tw[v].first = (uint32_t)i;
        sc->tw[v].occ++;
    }
    if (nw > 0)
        memset(sc->tstamp, 0, nw * sizeof(uint32_t));
    x->stamp = 0;
    x->nwords = nw;
    x->width = (n + 1 + 63) / 64;
    x->pbits_used = 0;
    x->table = 1;
    return 0;
}

/* A new index set of `width` words on top of the arena (zeroed); its offset,
 * or SIZE_MAX when out of memory. */
static size_t set_push(mctx *x, size_t *top)
{
    scratch *sc = x->sc;
    if (scratch_reserve((void **)&sc->bits, &sc->bitscap, *top + x->width, sizeof(uint64_t)) < 0) {
        x->oom = 1;
        return SIZE_MAX;
    }
    size_t at = *top;
    memset(sc->bits + at, 0, x->width * sizeof(uint64_t));
    *top += x->width;
    return at;
}

/* The position bitmap of word number v (made on first use); NULL: no memory. */
static const uint64_t *word_positions(mctx *x, uint32_t v)
{
    scratch *sc = x->sc;
    tword *t = &sc->tw[v];
    if (t->pos == SIZE_MAX) {
        if (scratch_reserve((void **)&sc->pbits, &sc->pbitscap, x->pbits_used + x->width,
                            sizeof(uint64_t)) < 0) {
            x->oom = 1;
            return NULL;
        }
        t->pos = x->pbits_used;
        x->pbits_used += x->width;
        uint64_t *p = sc->pbits + t->pos;
        memset(p, 0, x->width * sizeof(uint64_t));
        for (uint32_t i = t->first; i != NO_POS; i = sc->tnext[i])
            bit_set(p, i);
    }
    return sc->pbits + t->pos;
}

/* out = { i + 1 : i in s, word i is number v } (out zeroed); 1 if not empty. */
static int set_after_word(mctx *x, const uint64_t *s, uint32_t v, uint64_t *out)
{
    scratch *sc = x->sc;
    size_t wd = x->width;
    int any = 0;
    if (sc->tw[v].occ < wd) {
        for (uint32_t i = sc->tw[v].first; i != NO_POS; i = sc->tnext[i])
            if (bit_get(s, i)) {
                bit_set(out, (size_t)i + 1);
                any = 1;
            }
        return any;
    }
    const uint64_t *p = word_positions(x, v);
    if (p == NULL)
        return 0;
    uint64_t carry = 0;
    for (size_t k = 0; k < wd; k++) {
        uint64_t c = s[k] & p[k];
        out[k] = (c << 1) | carry;
        carry = c >> 63;
        any |= out[k] != 0;
    }
    return any;
}

/* out = { i + 1 : i in s, i < n } (out zeroed); 1 if not empty. */
static int set_after_any(mctx *x, const uint64_t *s, uint64_t *out)
{
    size_t wd = x->width, n = x->n;
    uint64_t carry = 0;
    int any = 0;
    for (size_t k = 0; k < wd; k++) {
        out[k] = (s[k] << 1) | carry;
        carry = s[k] >> 63;
    }
    out[n >> 6] &= ~((~UINT64_C(0)) << (n & 63)) | (UINT64_C(1) << (n & 63)); /* i + 1 <= n */
    for (size_t k = 0; k < wd; k++)
        any |= out[k] != 0;
    return any;
}

/* out = { k : from <= k <= n } (out zeroed). */
static void set_from(mctx *x, size_t from, uint64_t *out)
{
    for (size_t k = from; k <= x->n && (k & 63); k++)
        bit_set(out, k);
    for (size_t k = (from + 63) & ~(size_t)63; k <= x->n; k += 64)
        out[k >> 6] = x->n - k >= 63 ? ~UINT64_C(0) : (UINT64_C(1) << (x->n - k + 1)) - 1;
}

/* The smallest index of s, or SIZE_MAX when s is empty. */
static size_t set_min(mctx *x, const uint64_t *s)
{
    for (size_t k = 0; k < x->width; k++)
        if (s[k])
            return k * 64 + (size_t)__builtin_ctzll(s[k]);
    return SIZE_MAX;
}

/* Indices of s below n (the word positions a literal could be read at). */
static size_t set_count_words(mctx *x, const uint64_t *s)
{
    size_t c = 0, n = x->n;
    for (size_t k = 0; k < x->width; k++)
        c += (size_t)__builtin_popcountll(s[k]);
    return c - (size_t)bit_get(s, n);
}

/* Append a found literal branch (sn, v) to the kids arena. */
static void kid_add(mctx *x, size_t *top, snode *sn, uint32_t v)
{
    scratch *sc = x->sc;
    if (scratch_reserve((void **)&sc->kids, &sc->kidscap, *top + 1, sizeof(skid)) < 0) {
        x->oom = 1;
        return;
    }
    sc->kids[(*top)++] = (skid){sn, v, sc->tw[v].first};
}

/* The literal S-nodes of a level's hash trie (main m at hash level lev),
 * into the kids arena with their topic word numbers, while there are at most
 * `limit`; returns 0 past the limit (what was added is to be dropped). */
static int level_literals(mctx *x, mainnode *m, unsigned lev, size_t *top, size_t *seen,
                          size_t limit)
{
    snode *one = NULL;
    switch (m->h.kind) {
    case K_CNODE: {
        cnode *cn = (cnode *)m;
        for (uint32_t i = (uint32_t)popc(cn->m.h.b2); i < cn->n && !x->oom; i++) {
            cst_hdr *b = cn->array[i];
            if (b->kind == K_SNODE) {
                if (++*seen > limit)
                    return 0;
                uint32_t v = tword_find(x, (snode *)b);
                if (v != NO_POS)
                    kid_add(x, top, (snode *)b, v);
            } else if (lev <= MAX_HASH_LEVEL &&
                       !level_literals(x, read_main(x, (inode *)b), lev + CN_BITS, top, seen, limit)) {
                return 0;
            }
        }
        return 1;
    }
    case K_TNODE:
        one = ((tnode *)m)->sn;
        break;
    case K_LNODE:
        for (uint32_t i = 0; i < ((lnode *)m)->n && !x->oom; i++) {
            if (++*seen > limit)
                return 0;
            uint32_t v = tword_find(x, ((lnode *)m)->sn[i]);
            if (v != NO_POS)
                kid_add(x, top, ((lnode *)m)->sn[i], v);
        }
        return 1;
    default:
        return 1;
    }
    if (one != NULL) {
        if (++*seen > limit)
            return 0;
        uint32_t v = tword_find(x, one);
        if (v != NO_POS)
            kid_add(x, top, one, v);
    }
    return 1;
}

static int kid_cmp(const void *a, const void *b)
{
    uint32_t x = ((const skid *)a)->first, y = ((const skid *)b)->first;
    return (x > y) - (x < y);
}

/* The literal branches of frame f's level cn whose word occurs at an index of
 * set s (an index below n), in the order of their word's first index in the
 * topic: by listing the level's literal branches when there are no more of
 * them than indices in s, else by probing the word at each index (each word
 * once).  O(min(branches, indices)) probes. */
static void collect_kids(mctx *x, sframe *f, const uint64_t *s, size_t *ktop)
{
    scratch *sc = x->sc;
    size_t start = *ktop, seen = 0, words = set_count_words(x, s);
    f->kids = start;
    if (!level_literals(x, &f->cn->m, 0, ktop, &seen, words)) {
        *ktop = start; /* more branches than indices: probe the words instead */
        uint32_t stamp = ++x->stamp;
        if (stamp == 0) { /* wrapped: no word is marked any more */
            memset(sc->tstamp, 0, x->nwords * sizeof(uint32_t));
            stamp = x->stamp = 1;
        }
        for (size_t k = 0; k < x->width && !x->oom; k++) {
            for (uint64_t bits = s[k]; bits; bits &= bits - 1) {
                size_t i = k * 64 + (size_t)__builtin_ctzll(bits);
                if (i >= x->n)
                    break;
                uint32_t v = sc->twid[i];
                if (sc->tstamp[v] == stamp)
                    continue; /* this word was probed at an earlier index */
                sc->tstamp[v] = stamp;
                snode *sn = find_literal(x, f->cn, &x->w[i], x->record);
                if (sn != NULL)
                    kid_add(x, ktop, sn, v);
            }
        }
    }
    /* in the order of their word's first index in the topic, whichever way
     * they were found (listing goes in hash order) */
    if (*ktop - start > 1)
        qsort(sc->kids + start, *ktop - start, sizeof(skid), kid_cmp);
    f->nkids = (uint32_t)(*ktop - start);
    f->next = 0;
}

/* Reserve room for one more index-set frame; NULL when out of memory. */
static sframe *sframe_push(mctx *x, size_t *sp)
{
    scratch *sc = x->sc;
    if (scratch_reserve((void **)&sc->sstack, &sc->sstackcap, *sp + 1, sizeof(sframe)) < 0) {
        x->oom = 1;
        return NULL;
    }
    return &sc->sstack[(*sp)++];
}

/*
 * The index-set walk below many-level wildcard sm, reached with at least
 * `from` words consumed (so B(sm) = { from .. n }); sm is the path's S-node
 * number depth.  Frames go through their stages in the order of the
 * state-by-state walk: enter (emit, the route's groups), the many-level
 * wildcard, the literal branches, the one-level wildcard.
 */
static void set_walk(mctx *x, snode *sm, size_t from, size_t depth)
{
    scratch *sc = x->sc;
    if (!x->table && topic_table(x) < 0) {
        x->oom = 1;
        return;
    }
    size_t sp = 0, btop = 0, ktop = 0;
    sframe *f = sframe_push(x, &sp);
    if (f == NULL)
        return;
    size_t at = set_push(x, &btop);
    if (at == SIZE_MAX)
        return;
    set_from(x, from, sc->bits + at);
    *f = (sframe){sm, depth, at, 0, 0, 0, S_ENTER, NULL};
    size_t n = x->n, min = (size_t)x->c->t->d.multi_min;
    while (sp > 0 && !x->oom && !(x->found && x->first_only)) {
        f = &sc->sstack[sp - 1];
        const uint64_t *s = sc->bits + f->set;
        snode *child = NULL;
        size_t cset = SIZE_MAX;
        switch (f->stage) {
        case S_ENTER: {
            walk_step(x);
            if (f->depth >= sc->pathcap &&
                scratch_reserve((void **)&sc->path, &sc->pathcap, f->depth + 1,
                                sizeof(snode *)) < 0) {
                x->oom = 1;
                return;
            }
            sc->path[f->depth] = f->sn;
            x->depth = f->depth + 1;
            int whole = bit_get(s, n);
            if (whole && f->sn->nsubs > 0)
                emit(x, f->sn);
            f->stage = S_MULTI;
            if (f->sn->child != NULL) {
                mainnode *m = read_main(x, f->sn->child);
                if (m->h.kind == K_CNODE)
                    f->cn = (cnode *)m;
            }
            if (f->cn == NULL) {
                f->stage = S_DONE;
            } else if (whole && x->route) {
                level_shares(x, f->cn); /* this S-node matched the whole topic */
            }
            continue;
        }
        case S_MULTI: {
            f->stage = S_LITERALS;
            snode *mm = (snode *)spec_get(f->cn, W_MULTI - 1);
            size_t lo = set_min(x, s);
            if (mm == NULL || lo > n || n - lo < min)
                continue;
            if ((cset = set_push(x, &btop)) == SIZE_MAX)
                return;
            set_from(x, lo + min, sc->bits + cset);
            child = mm;
            break;
        }
        case S_LITERALS:
            f->stage = S_KIDS;
            if (f->cn->bitmap != 0 && set_count_words(x, s) > 0) {
                collect_kids(x, f, s, &ktop);
                if (x->oom)
                    return;
            }
            continue;
        case S_KIDS:
            if (f->next < f->nkids) {
                skid k = sc->kids[f->kids + f->next++];
                if ((cset = set_push(x, &btop)) == SIZE_MAX)
                    return;
                s = sc->bits + f->set; /* the arena may have moved */
                if (!set_after_word(x, s, k.v, sc->bits + cset)) {
                    btop = cset; /* never empty (the word occurs in s); be safe */
                    continue;
                }
                child = k.sn;
                break;
            }
            f->stage = S_DONE;
            {
                snode *ss = (snode *)spec_get(f->cn, W_SINGLE - 1);
                if (ss == NULL)
                    continue;
                if ((cset = set_push(x, &btop)) == SIZE_MAX)
                    return;
                s = sc->bits + f->set;
                if (!set_after_any(x, s, sc->bits + cset)) {
                    btop = cset;
                    continue;
                }
                child = ss;
            }
            break;
        default: /* S_DONE: its set and its branches go with it */
            btop = f->set;
            ktop = f->kids;
            sp--;
            continue;
        }
        size_t d = f->depth + 1;
        sframe *c = sframe_push(x, &sp);
        if (c == NULL)
            return;
        *c = (sframe){child, d, cset, ktop, 0, 0, S_ENTER, NULL};
    }
}

/* The walk: states from the trie's top level until none is left. */
static void match_walk(mctx *x, inode *root)
{
    /* In locals, so that they stay in registers: the walk's stores through
     * its scratch pointers would make the compiler read x's fields again. */
    const wconst k = {x->w, x->n, (size_t)x->c->t->d.multi_min, x->dollar, x->route, x->record};
    const int paths = x->out != NULL, first_only = x->first_only;
    int64_t steps = x->steps;
    wstack st = {x->sc->mstack, x->sc->mstackcap};
    size_t sp = 0;
    sp = open_level(x, k, &st, sp, root, 0, 1, 0);
    /* Ends when the stack is empty: a failed push empties it (x->oom), and
     * has_subscribers stops at its first match below.  Other failures to
     * allocate (x->oom too) only make the walk go on to its end. */
    while (sp > 0) {
        steps = step(steps);
        mframe *f = &st.v[sp - 1];
        if (f->kind == F_MULTI) {
            snode *sm = f->sn;
            if (x->sets) {
                /* more words may follow the wildcard: one index-set walk */
                mframe m = *f;
                sp--;
                x->steps = steps;
                set_walk(x, sm, m.j, m.depth);
                steps = x->steps;
                if (x->oom || (first_only && x->found))
                    break;
                continue;
            }
            mframe node = {sm, f->j, 0, f->depth, F_NODE};
            if (sm->child == NULL || only_shares(x, sm->child)) {
                /* Nothing follows the wildcard: only "consume every word" can
                 * match. */
                node.j = k.n;
                sp--;
            } else if (f->j < f->end) {
                f->j++;
            } else {
                sp--;
            }
            sp = push(x, &st, sp, node);
            continue;
        }
        mframe cur = *f;
        sp--;
        snode *sn = cur.sn;
        if (paths) { /* match() writes each pattern out: its words so far */
            if (cur.depth >= x->sc->pathcap &&
                scratch_reserve((void **)&x->sc->path, &x->sc->pathcap, cur.depth + 1,
                                sizeof(snode *)) < 0) {
                x->oom = 1;
                break;
            }
            x->sc->path[cur.depth] = sn;
            x->depth = cur.depth + 1;
        }
        if (cur.j == k.n && sn->nsubs > 0) {
            emit(x, sn);
            if (first_only)
                break; /* emit found it */
        }
        if (sn->child)
            sp = open_level(x, k, &st, sp, sn->child, cur.j, 0, cur.depth + 1);
    }
    x->steps = steps;
    x->sc->last_steps = steps;
}

int64_t cst_debug_last_walk_steps(void)
{
    scratch *sc = scratch_get();
    return sc != NULL ? sc->last_steps : -1;
}

/* Count one lookup served by this handle (a striped counter, so threads do
 * not share a cache line); called once per answer actually delivered. */
static void count_lookup(ctx *c)
{
    atomic_fetch_add_explicit(
        &c->t->lookups[(ebr_record_index(c->rec) % LOOKUP_STRIPES) * STRIPE_WORDS], 1,
        memory_order_relaxed);
}

/* One walk from root: the answer's state (found, matched S-nodes, shares,
 * match()'s output) starts empty, so a walk that is run again starts afresh. */
static void walk_once(mctx *x, inode *root)
{
    x->found = x->trunc = 0;
    x->nmatched = x->nshares = x->depth = x->nreads = 0;
    if (x->out != NULL)
        x->out->nentries = x->out->need_pat = x->out->need_ids = x->out->need_entries = 0;
    x->steps = 0;
    match_walk(x, root);
}

/* Run the walk over the trie for the topic whose n words parse_words left
 * in sc->w; x must be zeroed but for first_only/out.  Returns 0 or a CST_E*
 * code. */
/* The update stripes whose updates can change the answer for the topic of
 * the n words w: its first word's, the wildcards', the zero-word pattern's
 * for an empty topic, and the whole trie's (internal.h, "Update stripes"). */
static inline void topic_stripes(cst_trie *t, const word *w, int64_t n, _Atomic uint64_t **s0,
                                 _Atomic uint64_t **s1, _Atomic uint64_t **s2,
                                 _Atomic uint64_t **s3)
{
    *s0 = upd_stripe(t, UPD_GLOBAL);
    *s1 = upd_stripe(t, UPD_MULTI);
    *s2 = upd_stripe(t, upd_stripe_of(w, n));
    *s3 = upd_stripe(t, n > 0 ? UPD_SINGLE : UPD_EMPTY);
}

static int walk_words(mctx *x, ctx *c, scratch *sc, int64_t n)
{
    const cst_dialect *d = &c->t->d;
    x->c = c;
    x->sc = sc;
    x->w = sc->w;
    x->n = (size_t)n;
    x->dollar = d->dollar_rule && n > 0 && sc->w[0].len > 0 && sc->w[0].p[0] == '$';
    x->sets = d->multi != NULL && !d->multi_last_only;
    if (c->t->readonly) {
        walk_once(x, root_read(c));
        return x->oom ? CST_ENOMEM : 0;
    }
    _Atomic uint64_t *s0, *s1, *s2, *s3;
    topic_stripes(c->t, sc->w, n, &s0, &s1, &s2, &s3);
    int retries = atomic_load_explicit(&walk_retries, memory_order_relaxed);
    for (int attempt = 0; attempt < retries; attempt++) {
        /* acquire: the walk's reads stay after these reads of the counts, and
         * every update they count as done is in the mains the walk reads. */
        uint64_t w0 = atomic_load_explicit(s0, memory_order_acquire),
                 w1 = atomic_load_explicit(s1, memory_order_acquire),
                 w2 = atomic_load_explicit(s2, memory_order_acquire),
                 w3 = atomic_load_explicit(s3, memory_order_acquire);
        uint64_t busy = (w0 | w1 | w2 | w3) & UPD_IN_FLIGHT;
        x->record = attempt > 0; /* a quiet trie needs no note of the reads */
        inode *root = root_read(c);
        walk_once(x, root);
        if (x->oom)
            return CST_ENOMEM;
        /* acquire: not read before the walk's own reads. */
        int same = busy == 0 && atomic_load_explicit(s0, memory_order_acquire) == w0 &&
                   atomic_load_explicit(s1, memory_order_acquire) == w1 &&
                   atomic_load_explicit(s2, memory_order_acquire) == w2 &&
                   atomic_load_explicit(s3, memory_order_acquire) == w3;
        if (same)
            return 0; /* no update that could change the answer began or ended */
        if (x->record && walk_unchanged(x, root))
            return 0;
        atomic_fetch_add_explicit(&walk_rewalks, 1, memory_order_relaxed);
    }
    x->record = 0;
    atomic_fetch_add_explicit(&walk_freezes, 1, memory_order_relaxed);
    inode *frozen = root_freeze(c);
    if (frozen == NULL)
        return CST_ENOMEM;
    walk_once(x, frozen);
    retire(c, &frozen->h);
    return x->oom ? CST_ENOMEM : 0;
}

/* Parse the topic and run the walk over the trie (walk_words). */
static int walk_topic(mctx *x, ctx *c, const char *topic, size_t len)
{
    scratch *sc = scratch_get();
    if (sc == NULL)
        return CST_ENOMEM;
    int64_t n = parse_words(c->t, topic, len, 0, sc);
    if (n < 0)
        return (int)n;
    return walk_words(x, c, sc, n);
}

/* An answer of up to SMALL_ANSWER ids (counted with repeats), all inline in
 * their S-nodes, is de-duplicated by comparing each id with those kept; one of
 * up to FILTER_ANSWER against a bit filter on the stack: an id
 * whose bit is clear is new, and only one whose bit is set is compared with
 * the ids kept.  Beyond, through a hash table (a filter of FILTER_BITS would
 * fill, and the comparisons grow with the square of the answer). */
#define SMALL_ANSWER 16
#define FILTER_ANSWER 64
#define FILTER_BITS 512

/* Collect the ids of the S-nodes matched, each once, into out (up to cap),
 * in the order of their first occurrence. */
static int64_t collect_ids(mctx *x, uint64_t *out, size_t cap)
{
    scratch *sc = x->sc;
    snode *const *mt = x->mt != NULL ? x->mt : sc->matched;
    if (x->nmatched == 0)
        return 0;
    if (x->nmatched == 1) {
        snode *sn = mt[0];
        if (cap >= sn->nsubs)
            return (int64_t)snode_emit(sn, out);
        if (scratch_reserve((void **)&sc->ids, &sc->idcap, sn->nsubs, sizeof(uint64_t)) < 0)
            return CST_ENOMEM;
        snode_emit(sn, sc->ids);
        if (cap)
            memcpy(out, sc->ids, cap * sizeof(uint64_t));
        return sn->nsubs;
    }
    size_t total = 0, g;
    uint32_t widest = 0;
    for (g = 0; g < x->nmatched; g++) {
        uint32_t k = mt[g]->nsubs;
        total += k;
        widest = k > widest ? k : widest;
    }
    if (total <= SMALL_ANSWER && total <= cap && widest <= SUBS_INLINE) {
        /* a few ids (the common answer): each compared with those kept,
         * straight from the S-nodes' inline ids */
        size_t u = 0;
        for (g = 0; g < x->nmatched; g++) {
            const snode *sn = mt[g];
            const uint64_t *ids = snode_ids(sn);
            for (uint32_t i = 0; i < sn->nsubs; i++) {
                size_t j = 0;
                while (j < u && out[j] != ids[i])
                    j++;
                if (j == u)
                    out[u++] = ids[i];
            }
        }
        return (int64_t)u;
    }
    if (total <= FILTER_ANSWER && total <= cap) {
        /* 1M random filters: 31 ids a lookup, ~2,650 instructions through
         * a cleared hash table, ~500 this way (callgrind, walk_engine) */
        uint64_t seen[FILTER_BITS / 64] = {0};
        uint64_t set_ids[FILTER_ANSWER];
        size_t u = 0;
        for (g = 0; g < x->nmatched; g++) {
            const snode *sn = mt[g];
            const uint64_t *ids = sn->nsubs > SUBS_INLINE ? set_ids : snode_ids(sn);
            if (sn->nsubs > SUBS_INLINE)
                set_emit(sn->set, set_ids); /* nsubs <= total <= FILTER_ANSWER */
            for (uint32_t i = 0; i < sn->nsubs; i++) {
                uint64_t id = ids[i];
                unsigned h = (unsigned)((id * UINT64_C(0x9e3779b97f4a7c15)) >> 55); /* 9 bits */
                uint64_t bit = UINT64_C(1) << (h & 63);
                if (seen[h >> 6] & bit) {
                    size_t j = 0;
                    while (j < u && out[j] != id)
                        j++;
                    if (j < u)
                        continue;
                }
                seen[h >> 6] |= bit;
                out[u++] = id;
            }
        }
        return (int64_t)u;
    }
    size_t tcap = 16;
    while (tcap < total * 2)
        tcap *= 2;
    if (scratch_reserve((void **)&sc->ids, &sc->idcap, total, sizeof(uint64_t)) < 0 ||
        scratch_reserve((void **)&sc->uniq, &sc->uniqcap, tcap, sizeof(uint64_t)) < 0)
        return CST_ENOMEM;
    size_t k = 0;
    for (g = 0; g < x->nmatched; g++)
        k += snode_emit(mt[g], sc->ids + k);
    /* Open addressing with 0 as "empty"; id 0 is tracked on the side. */
    memset(sc->uniq, 0, tcap * sizeof(uint64_t));
    int have_zero = 0;
    size_t u = 0;
    for (size_t i = 0; i < k; i++) {
        uint64_t id = sc->ids[i];
        int fresh;
        if (id == 0) {
            fresh = !have_zero;
            have_zero = 1;
        } else {
            size_t h = (size_t)((id * UINT64_C(0x9e3779b97f4a7c15)) >> 17) & (tcap - 1);
            while (sc->uniq[h] != 0 && sc->uniq[h] != id)
                h = (h + 1) & (tcap - 1);
            fresh = sc->uniq[h] == 0;
            sc->uniq[h] = id;
        }
        if (fresh) {
            if (u < cap)
                out[u] = id;
            u++;
        }
    }
    return (int64_t)u;
}

/* ------------------------------------------------------------------------
 * Warming a batch: the walks' cache misses, overlapped
 *
 * At a million patterns a lookup is a chain of dependent misses (I-node,
 * C-node, branch, S-node, child I-node, per level and per branch taken): one
 * walk waits for each in turn.  cst_warm walks the literal and one-level-
 * wildcard branches of up to WARM_TOPICS topics breadth first, one hash
 * level at a time for all of them, and only prefetches: in each round, every
 * frontier entry's next node is requested before any is used, and a round
 * reads nothing its predecessor did not request (a word whose branch slot
 * is a deeper hash level's I-node goes on as an entry of its own, not as a
 * chain of reads inside the round), so the misses of different topics and
 * branches overlap.  The real walks then find their nodes in the cache.  It
 * reads nodes inside its own read section and decides nothing: a node freed
 * or replaced afterwards costs a miss, never a wrong answer (the walks read
 * the trie afresh).  The frontier is bounded
 * (WARM_FRONTIER), so a hostile topic costs at most that many node reads.
 *
 * Warming a trie that fits in the cache only walks twice (10k random MQTT
 * filters: lookup_many 0.72x without the check below), so it is on only for
 * a trie of over WARM_MIN_PAIRS pairs, as cst_warm_wanted says: measured on
 * the project VM, 100k filters 1.3x, 1M 1.85x.  One topic alone gains too:
 * its walk's branches ('+' and the literal at every level) miss in turn, and
 * warming them first overlaps those misses (cst_lookup_warm, after a result
 * cache miss: 1M filters 1.7-2.1x, 100k 1.5x, the C loop).  The size is the update
 * stripes' pair counts (upd_pairs), summed once per WARM_RECHECK calls of a
 * thread for the same trie.
 * ---------------------------------------------------------------------- */

#define WARM_TOPICS CST_WARM_TOPICS
#define WARM_DEPTH 16          /* topic levels warmed; deeper ones are walked cold */
#define WARM_FRONTIER 512      /* nodes per round, all topics together */
#define WARM_MIN_PAIRS 50000  /* a trie this big misses the caches (~12 MB) */
#define WARM_RECHECK 64        /* cst_warm_wanted sums a trie's pair counts this often */

static _Atomic int64_t warm_min_pairs = WARM_MIN_PAIRS;

void cst_debug_set_warm_pairs(int64_t n)
{
    atomic_store_explicit(&warm_min_pairs, n < 0 ? WARM_MIN_PAIRS : n, memory_order_relaxed);
}

int cst_warm_wanted(const cst_trie *t)
{
    /* The pair counts are 132 words on lines of their own: summed once per
     * WARM_RECHECK calls of this thread for the same trie, not per batch.
     * The last trie asked about is remembered (a batch asks about one) by
     * its serial number, not its address: a new trie at a freed one's
     * address took the old answer for up to 63 calls, and since big tries
     * walk in rounds, whose answers come in another order, lookup_many and
     * lookup then disagreed on the order (test_warm.py). */
    static CST_TLS uint64_t last;
    static CST_TLS uint32_t calls;
    static CST_TLS int wanted;
    static CST_TLS int64_t min_seen = WARM_MIN_PAIRS;
    int64_t min = atomic_load_explicit(&warm_min_pairs, memory_order_relaxed);
    if (t->serial != last || calls++ % WARM_RECHECK == 0 || min != min_seen) {
        last = t->serial;
        calls = 1;
        min_seen = min;
        wanted = pairs_estimate(t) > min;
    }
    return wanted;
}

/* A frontier entry: a node some topic's walk will read, and where that walk
 * is.  Each round of cst_warm reads only nodes the round before prefetched. */
typedef struct wentry {
    void *p;                   /* round A: an I-node; B: its main node; C: a C-node */
    uint32_t topic;            /* whose */
    uint16_t i;                /* the words consumed: the level's word is words[topic][i] */
    uint16_t lev;              /* the hash level of p's C-node (0: the topic level's top) */
} wentry;

/* The branch slot a word hashes to in a C-node at hash level lev, or NULL. */
static inline cst_hdr *warm_branch(const cnode *cn, const word *w, unsigned lev)
{
    cnmap bit = CN_BIT(frag(w->hash, lev));
    if (!(cn->bitmap & bit))
        return NULL;
    return cn->array[popc(cn->m.h.b2) + popc_map(cn->bitmap & (bit - 1))];
}

/* Queue an S-node's next topic level (and fetch its subscriber set). */
static inline size_t warm_follow(wentry *next, size_t n, const snode *sn, uint32_t j, uint32_t i,
                                 const uint32_t *nw)
{
    if (sn->nsubs > SUBS_INLINE)
        __builtin_prefetch(sn->set);
    if (sn->child != NULL && n < WARM_FRONTIER && i + 1 < nw[j]) {
        __builtin_prefetch(&sn->child->main);
        next[n++] = (wentry){sn->child, j, (uint16_t)(i + 1), 0};
    }
    return n;
}

/* The rounds of cst_warm over k topics, topic j's words words[j][0..nw[j]),
 * inside c's read section. */
static void warm_rounds(ctx *c, scratch *sc, const word *const *words, const uint32_t *nw,
                        size_t k)
{
    wentry(*front)[WARM_FRONTIER] = (wentry(*)[WARM_FRONTIER])sc->warm_front;
    size_t n = 0;
    inode *root = root_read(c);
    for (size_t j = 0; j < k; j++)
        if (nw[j] > 0)
            front[0][n++] = (wentry){root, (uint32_t)j, 0, 0};
    /* Three rounds per hash level, for every entry of every topic at once.
     * A round only reads what the previous round prefetched and only
     * prefetches what the next one reads, so no entry waits for its own
     * miss while the others' are still to be requested: the misses of a
     * round all overlap (a read of a node not yet arrived stalls the
     * round's loop, and a loop body too long for the CPU's window to reach
     * the next entry's load would make those stalls add up). */
    for (int cur = 0; n > 0; cur ^= 1) {
        wentry *f = front[cur], *next = front[cur ^ 1];
        /* round A: every I-node's main node.  Only prefetched: a GCAS
         * pending on it is not helped (the walk does that); warming reads
         * inside its section, where every node it can reach stays
         * allocated, and decides nothing. */
        for (size_t e = 0; e < n; e++) {
            /* acquire: the main node's fields as its maker wrote them, for
             * round B's reads */
            mainnode *m = atomic_load_explicit(&((inode *)f[e].p)->main, memory_order_acquire);
            /* two lines: nodes are 16-byte aligned, not line aligned, so
             * the bitmap and the branch slot round B reads are often on
             * the line after the header's (1M filters: -5-10% a lookup) */
            __builtin_prefetch(m);
            __builtin_prefetch((const char *)m + 64);
            f[e].p = m;
        }
        /* round B: of each C-node, the branch slot its word hashes to; at
         * the topic level's top, the wildcard S-nodes too */
        for (size_t e = 0; e < n; e++) {
            const cnode *cn = f[e].p;
            uint32_t j = f[e].topic, i = f[e].i;
            if (cn->m.h.kind != K_CNODE || i >= nw[j]) {
                f[e].p = NULL; /* a tomb or a collision list: walked cold */
                continue;
            }
            cst_hdr *b = warm_branch(cn, &words[j][i], f[e].lev);
            if (b != NULL) { /* an S-node's hash, child and first word bytes */
                __builtin_prefetch(b);
                __builtin_prefetch((const char *)b + offsetof(snode, word));
            }
            if (f[e].lev == 0) {
                cst_hdr *single = spec_get(cn, W_SINGLE - 1), *multi = spec_get(cn, W_MULTI - 1);
                if (single != NULL) {
                    __builtin_prefetch(single);
                    __builtin_prefetch((const char *)single + offsetof(snode, word));
                }
                if (multi != NULL)
                    __builtin_prefetch(multi);
            }
        }
        /* round C: the branches; the next topic levels (and the deeper hash
         * levels of a word whose slot is an I-node) queued for the next
         * rounds, their I-nodes and the matches' subscriber sets fetched */
        size_t m = 0;
        for (size_t e = 0; e < n; e++) {
            const cnode *cn = f[e].p;
            if (cn == NULL)
                continue;
            uint32_t j = f[e].topic, i = f[e].i;
            const word *w = &words[j][i];
            cst_hdr *b = warm_branch(cn, w, f[e].lev);
            if (b != NULL && b->kind == K_SNODE) {
                if (word_eq((const snode *)b, w))
                    m = warm_follow(next, m, (const snode *)b, j, i, nw);
            } else if (b != NULL && b->kind == K_INODE && m < WARM_FRONTIER &&
                       f[e].lev + CN_BITS <= MAX_HASH_LEVEL) {
                next[m++] = (wentry){b, j, (uint16_t)i, (uint16_t)(f[e].lev + CN_BITS)};
            }
            if (f[e].lev == 0) {
                const snode *single = (const snode *)spec_get(cn, W_SINGLE - 1);
                const snode *multi = (const snode *)spec_get(cn, W_MULTI - 1);
                if (single != NULL)
                    m = warm_follow(next, m, single, j, i, nw);
                if (multi != NULL && multi->nsubs > SUBS_INLINE)
                    __builtin_prefetch(multi->set);
            }
        }
        n = m;
    }
}

/* Room for the frontier (and, for a batch, its words) in sc; -1 without. */
static int warm_reserve(scratch *sc, int batch)
{
    return scratch_reserve((void **)&sc->warm_front, &sc->warm_frontcap, 3 * WARM_FRONTIER,
                           sizeof(wentry)) < 0 ||
                   (batch && scratch_reserve((void **)&sc->warm_w, &sc->warm_wcap,
                                             WARM_TOPICS * WARM_DEPTH, sizeof(word)) < 0)
               ? -1
               : 0;
}

/* Enter t's read section with this thread's scratch ready for a batch of
 * topics (warm_reserve); NULL (the section left) without memory. */
static scratch *batch_enter(ctx *c, cst_trie *t)
{
    if (ctx_enter(c, t) < 0)
        return NULL;
    scratch *sc = scratch_get();
    if (sc == NULL || warm_reserve(sc, 1) < 0) {
        ctx_exit(c);
        return NULL;
    }
    return sc;
}

int cst_warm(cst_trie *t, const char *const *topics, const size_t *lens, size_t k)
{
    if (k > WARM_TOPICS)
        k = WARM_TOPICS;
    ctx c;
    scratch *sc = batch_enter(&c, t);
    if (sc == NULL)
        return CST_ENOMEM;
    word(*buf)[WARM_DEPTH] = (word(*)[WARM_DEPTH])sc->warm_w;
    const word *words[WARM_TOPICS];
    uint32_t nw[WARM_TOPICS];
    for (size_t j = 0; j < k; j++) {
        int64_t got = parse_words(t, topics[j], lens[j], 0, sc);
        /* an invalid or empty topic is not warmed: its walk will say */
        nw[j] = got <= 0 ? 0 : got < WARM_DEPTH ? (uint32_t)got : WARM_DEPTH;
        if (nw[j] > 0) /* sc->w may be NULL before this thread's first word */
            memcpy(buf[j], sc->w, nw[j] * sizeof(word));
        words[j] = buf[j];
    }
    warm_rounds(&c, sc, words, nw, k);
    ctx_exit(&c);
    return 0;
}

/* Parse topic into sc->w (scratch_get's): the number of words, or a CST_E*
 * code. */
static int64_t parse_own(cst_trie *t, const char *topic, size_t len, scratch **scp)
{
    scratch *sc = *scp = scratch_get();
    return sc == NULL ? CST_ENOMEM : parse_words(t, topic, len, 0, sc);
}

/*
 * A walk in rounds.
 *
 * In a big trie a lookup used to warm its walk (the rounds above) and then
 * walk (match_walk), reading every node twice: at 1M filters each half was
 * ~6,500 instructions of a ~15,000-instruction lookup.  Where a many-level
 * wildcard can only end a pattern (no index-set walks: MQTT, NATS) and the
 * topic has at most WARM_DEPTH words, the rounds themselves walk: the same
 * states as match_walk, by open_level's rules, taken breadth first, each
 * round reading only what the round before requested:
 *
 *   A  each I-node's main node (requested: two lines of it);
 *   B  of each C-node: at the topic level's top, '#' (a match when at least
 *      multi_min words are left) and '+' (the next word consumed); the
 *      branch slot of the word, an S-node (requested) or a deeper hash
 *      level's I-node (next round);
 *   C  each S-node reached: a literal's word compared; a match when it
 *      consumed the last word; its next topic level queued (next round).
 *
 * Several topics walk in the same rounds (cst_lookup_many: a batch's
 * misses overlap across topics too), each entry of a round tagged with its
 * topic.  The matches come breadth first, not in match_walk's order: no API
 * promises an order, and collect_ids keeps each id's first occurrence.  The
 * rounds decide only on committed main nodes (prev 0 after main, the loads
 * of gcas_read), so they read what match_walk would.  A topic they cannot
 * decide goes to walk_words, which then walks it from the start, with its
 * retries and its freeze: a GCAS pending on a main node read, a tomb below
 * hash level 0, a collision list, '#' with more than share groups below it,
 * a frontier past WARM_FRONTIER, and an update begun or ended in the topic's
 * stripes while the rounds ran (the quick check of "One state of the trie
 * for the whole walk", above).
 *
 * walk_rounds (one topic) returns 0 (walked), ROUNDS_UNDECIDED (to
 * walk_words, which resets x), ROUNDS_NOT_TRIED (nothing read: a topic or
 * dialect the rounds do not take, or no room), or a CST_E* code.
 */
#define ROUNDS_UNDECIDED 1
#define ROUNDS_NOT_TRIED 2

/* A match of a walk in rounds: an S-node whose subscribers topic `topic`
 * gets. */
typedef struct rmatch {
    snode *sn;
    uint32_t topic;
} rmatch;

/* Note sn as a match of topic j (the nm-th); -1 without memory. */
static inline int rounds_emit(scratch *sc, size_t *nm, snode *sn, uint32_t j)
{
    if (__builtin_expect(*nm >= sc->rmatchcap, 0) &&
        scratch_reserve((void **)&sc->rmatch, &sc->rmatchcap, *nm + 1, sizeof(rmatch)) < 0)
        return -1;
    if (sn->nsubs > SUBS_INLINE)
        __builtin_prefetch(sn->set); /* for collect_ids */
    sc->rmatch[(*nm)++] = (rmatch){sn, j};
    return 0;
}

/* Queue S-node sn of topic j for round C, words 0..i consumed (reached by
 * '+': no word to compare), its lines requested; 0 with the frontier full. */
static inline int rounds_queue(wentry *sl, size_t *ns, snode *sn, uint32_t j, size_t i,
                               int by_single)
{
    if (*ns == WARM_FRONTIER)
        return 0;
    __builtin_prefetch(sn);
    __builtin_prefetch((const char *)sn + offsetof(snode, word));
    sl[(*ns)++] = (wentry){sn, j, (uint16_t)i, (uint16_t)by_single};
    return 1;
}

/* Whether the rounds take topics of dialect d: a many-level wildcard, if
 * any, only ends a pattern (no index-set walks); and not while every walk
 * must freeze (walk_retries 0, tests). */
static int rounds_take(const cst_dialect *d)
{
    return (d->multi == NULL || d->multi_last_only) &&
           atomic_load_explicit(&walk_retries, memory_order_relaxed) != 0;
}

/* The rounds over topics j < k (words[j][0 .. nw[j]), 1 <= nw[j] <=
 * WARM_DEPTH), inside c's read section: their matches into sc->rmatch[0 ..
 * *nm), each topic's in the order found.  A topic the rounds cannot decide
 * gets und[j] = 1 (its matches are then incomplete).  0, or CST_ENOMEM. */
static int rounds(ctx *c, scratch *sc, const word *const *words, const uint32_t *nw, size_t k,
                  uint8_t *und, size_t *nm)
{
    const cst_dialect *d = &c->t->d;
    const size_t multi_min = (size_t)d->multi_min;
    uint8_t dollar[WARM_TOPICS];
    wentry *cur = sc->warm_front, *next = cur + WARM_FRONTIER, *sl = next + WARM_FRONTIER;
    size_t nc = 0;
    inode *root = root_read(c);
    for (size_t j = 0; j < k; j++) {
        if (und[j])
            continue; /* and its words are not read */
        dollar[j] = d->dollar_rule && words[j][0].len > 0 && words[j][0].p[0] == '$';
        cur[nc++] = (wentry){root, (uint32_t)j, 0, 0};
    }
    int64_t steps = 0;
    *nm = 0;
    while (nc > 0) {
        /* round A */
        for (size_t e = 0; e < nc; e++) {
            /* seq_cst: gcas_read's load of main (prev follows in round B) */
            mainnode *m =
                atomic_load_explicit(&((inode *)cur[e].p)->main, memory_order_seq_cst);
            __builtin_prefetch(m);
            __builtin_prefetch((const char *)m + 64);
            cur[e].p = m;
        }
        /* round B (an S-node entry's lev 1: reached by '+', no word to compare) */
        size_t ns = 0, nx = 0;
        for (size_t e = 0; e < nc; e++) {
            uint32_t j = cur[e].topic;
            if (und[j])
                continue;
            mainnode *m = cur[e].p;
            steps = step(steps);
            size_t i = cur[e].i, n = nw[j];
            unsigned lev = cur[e].lev;
            /* seq_cst: gcas_read's load of prev; 0: m is committed */
            if (atomic_load_explicit(&m->prev, memory_order_seq_cst) != 0 ||
                (m->h.kind != K_CNODE && (m->h.kind != K_TNODE || lev != 0))) {
                und[j] = 1; /* a GCAS pending, a tomb below hash level 0, an L-node */
                continue;
            }
            if (m->h.kind != K_CNODE)
                continue; /* an entombed (empty) topic level */
            cnode *cn = (cnode *)m;
            if (lev == 0 && !(dollar[j] && i == 0)) {
                snode *sm = (snode *)spec_get(cn, W_MULTI - 1);
                if (sm != NULL && i + multi_min <= n) {
                    if (sm->child != NULL) {
                        mctx x = {.c = c, .sc = sc};
                        if (!only_shares(&x, sm->child)) {
                            und[j] = 1; /* more than groups below '#' */
                            continue;
                        }
                    }
                    if (sm->nsubs > 0 && rounds_emit(sc, nm, sm, j) < 0)
                        return CST_ENOMEM;
                }
                snode *ss = (snode *)spec_get(cn, W_SINGLE - 1);
                if (ss != NULL && i < n && !rounds_queue(sl, &ns, ss, j, i + 1, 1)) {
                    und[j] = 1;
                    continue;
                }
            }
            if (i < n) {
                cst_hdr *b = warm_branch(cn, &words[j][i], lev);
                if (b == NULL)
                    continue;
                if (b->kind == K_SNODE) {
                    if (!rounds_queue(sl, &ns, (snode *)b, j, i + 1, 0))
                        und[j] = 1;
                } else {
                    if (nx == WARM_FRONTIER) {
                        und[j] = 1;
                        continue;
                    }
                    __builtin_prefetch(&((inode *)b)->main);
                    next[nx++] = (wentry){b, j, (uint16_t)i, (uint16_t)(lev + CN_BITS)};
                }
            }
        }
        /* round C */
        for (size_t e = 0; e < ns; e++) {
            uint32_t j = sl[e].topic;
            snode *sn = sl[e].p;
            size_t i = sl[e].i, n = nw[j];
            if (und[j] || (sl[e].lev == 0 && !word_eq(sn, &words[j][i - 1])))
                continue;
            steps = step(steps);
            if (i == n && sn->nsubs > 0 && rounds_emit(sc, nm, sn, j) < 0)
                return CST_ENOMEM;
            /* a next level below the last word holds no match but '#' */
            if (sn->child != NULL && (i < n || multi_min == 0)) {
                if (nx == WARM_FRONTIER) {
                    und[j] = 1;
                    continue;
                }
                __builtin_prefetch(&sn->child->main);
                next[nx++] = (wentry){sn->child, j, (uint16_t)i, 0};
            }
        }
        wentry *t = cur;
        cur = next;
        next = t;
        nc = nx;
    }
    sc->last_steps = steps;
    return 0;
}

/* The update counts of the stripes that can change topic w's answer
 * (topic_stripes), in st[0..4); 1 when an update is in flight in one. */
static int stripes_read(cst_trie *t, const word *w, int64_t n, _Atomic uint64_t *s[4],
                        uint64_t st[4])
{
    topic_stripes(t, w, n, &s[0], &s[1], &s[2], &s[3]);
    /* acquire: the rounds' reads stay after these (walk_words) */
    for (int i = 0; i < 4; i++)
        st[i] = atomic_load_explicit(s[i], memory_order_acquire);
    return ((st[0] | st[1] | st[2] | st[3]) & UPD_IN_FLIGHT) != 0;
}

/* 1 when the stripes read by stripes_read still count st. */
static int stripes_same(_Atomic uint64_t *s[4], const uint64_t st[4])
{
    /* acquire: not read before the rounds' own reads (walk_words) */
    for (int i = 0; i < 4; i++)
        if (atomic_load_explicit(s[i], memory_order_acquire) != st[i])
            return 0;
    return 1;
}

/* The matches of the rounds (sc->rmatch[0 .. nm)) grouped by topic, each
 * topic's in the order found: topic j's are (*dst)[from[j] .. from[j + 1]).
 * -1 without memory. */
static int rounds_gather(scratch *sc, size_t nm, size_t k, snode ***dst, size_t *dstcap,
                         size_t *from)
{
    if (scratch_reserve((void **)dst, dstcap, nm > 0 ? nm : 1, sizeof(snode *)) < 0)
        return -1;
    size_t fill[WARM_TOPICS];
    memset(fill, 0, k * sizeof *fill);
    for (size_t e = 0; e < nm; e++)
        fill[sc->rmatch[e].topic]++;
    from[0] = 0;
    for (size_t j = 0; j < k; j++) {
        from[j + 1] = from[j] + fill[j];
        fill[j] = from[j];
    }
    for (size_t e = 0; e < nm; e++)
        (*dst)[fill[sc->rmatch[e].topic]++] = sc->rmatch[e].sn;
    return 0;
}

/* The walk in rounds of one topic, the n words in sc->w: 0 (x holds its
 * matches), ROUNDS_UNDECIDED, ROUNDS_NOT_TRIED, or a CST_E* code. */
static int walk_rounds(mctx *x, ctx *c, scratch *sc, int64_t n)
{
    if (n <= 0 || n > WARM_DEPTH || !rounds_take(&c->t->d) || warm_reserve(sc, 0) < 0)
        return ROUNDS_NOT_TRIED;
    const word *w = sc->w;
    uint32_t nw = (uint32_t)n;
    _Atomic uint64_t *s[4];
    uint64_t st[4];
    int rw = !c->t->readonly; /* a frozen trie needs no check */
    if (rw && stripes_read(c->t, w, n, s, st))
        return ROUNDS_UNDECIDED;
    uint8_t und = 0;
    size_t nm;
    if (rounds(c, sc, &w, &nw, 1, &und, &nm) < 0)
        return CST_ENOMEM;
    if (und || (rw && !stripes_same(s, st)))
        return ROUNDS_UNDECIDED;
    size_t from[2];
    if (rounds_gather(sc, nm, 1, &sc->matched, &sc->matchedcap, from) < 0)
        return CST_ENOMEM;
    x->c = c;
    x->sc = sc;
    x->nmatched = nm;
    x->found = nm > 0;
    return 0;
}

/* A big trie's walk of the n words in sc->w (n from parse_words): in rounds
 * where they take it, else warmed (cst_warm's rounds) and then walked. */
static int walk_big(mctx *x, ctx *c, scratch *sc, int64_t n)
{
    if (n < 0)
        return (int)n;
    int r = walk_rounds(x, c, sc, n);
    if (r == ROUNDS_NOT_TRIED && n > 0 && warm_reserve(sc, 0) == 0) {
        const word *w = sc->w;
        uint32_t nw = n < WARM_DEPTH ? (uint32_t)n : WARM_DEPTH;
        warm_rounds(c, sc, &w, &nw, 1);
    }
    return r > 0 ? walk_words(x, c, sc, n) : r;
}

/* Lookups in a row that a result cache missed, on this thread.  Past
 * SPEC_MISSES, a lookup of a big trie requests the bucket's line and parses
 * its topic before it asks the cache: on traffic that never repeats a
 * topic, the cache's miss then overlaps the parse instead of preceding the
 * walk (1M filters: ~190 ns of a ~4 us lookup, the floor's 5%).  A hit
 * resets it, so hot topics keep the probe first. */
static CST_TLS uint8_t cache_misses_in_row;
#define SPEC_MISSES 8

static int64_t lookup(cst_trie *t, const char *topic, size_t len, uint64_t *out, size_t cap,
                      int warm)
{
    ctx c;
    if (ctx_enter(&c, t) < 0)
        return CST_ENOMEM;
    /* acquire: the cache's fields as cst_cache_set made them */
    cst_cache *k = atomic_load_explicit(&t->cache, memory_order_acquire);
    cache_probe p = {0};
    /* a big trie's walk in rounds (walk_big), the words parsed once */
    int big = warm && cst_warm_wanted(t), parsed = 0;
    scratch *sc = NULL;
    int64_t n = 0;
    if (k != NULL) {
        if (big && cache_misses_in_row >= SPEC_MISSES) {
            cache_prefetch(k, topic, len, &p); /* its miss overlaps the parse */
            n = parse_own(t, topic, len, &sc);
            parsed = 1;
        }
        int64_t hit = cache_get(k, topic, len, out, cap, &p);
        if (hit >= 0) {
            cache_misses_in_row = 0;
            if ((size_t)hit <= cap)
                count_lookup(&c);
            ctx_exit(&c);
            return hit;
        }
        if (cache_misses_in_row < SPEC_MISSES)
            cache_misses_in_row++;
        if (p.on && p.seen) /* else no fill follows: nothing to validate */
            cache_read_state(k, &p);
    }
    if (big && !parsed)
        n = parse_own(t, topic, len, &sc);
    mctx x = {0};
    int64_t r = !big ? walk_topic(&x, &c, topic, len) : walk_big(&x, &c, sc, n);
    if (r == 0)
        r = collect_ids(&x, out, cap);
    if (r >= 0 && (size_t)r <= cap) {
        count_lookup(&c); /* a caller whose buffer was too small asks again */
        if (k != NULL)
            cache_fill(&c, k, topic, len, out, (size_t)r, &p);
    }
    ctx_exit(&c);
    /* a new cache waits for the epoch (cache.c, "A new cache"): help it
     * along, outside the section */
    if (k != NULL && p.on && p.seen && !p.ready)
        ebr_try_advance();
    return r;
}

int64_t cst_lookup(cst_trie *t, const char *topic, size_t len, uint64_t *out, size_t cap)
{
    return lookup(t, topic, len, out, cap, 0);
}

int64_t cst_lookup_warm(cst_trie *t, const char *topic, size_t len, uint64_t *out, size_t cap)
{
    return lookup(t, topic, len, out, cap, 1);
}

/* The shared rounds of k topics (k <= WARM_TOPICS; sc from batch_enter):
 * code[j] is topic j's parse code (0 valid, else its CST_E*), und[j] says
 * the rounds left it undecided (invalid, empty, deeper than WARM_DEPTH
 * words, a frontier it outgrew, an update in its stripes meanwhile: walk it
 * alone, walk_big), and a decided topic's matches are sc->bmatched[from[j]
 * .. from[j + 1]).  0, or CST_ENOMEM (CST_EINVAL: k out of range). */
static int rounds_batch(ctx *c, scratch *sc, const char *const *topics, const size_t *lens,
                        size_t k, int64_t *code, uint8_t *und, size_t *from)
{
    if (k == 0 || k > WARM_TOPICS)
        return CST_EINVAL; /* never: both callers pass 1 .. WARM_TOPICS */
    cst_trie *t = c->t;
    word(*buf)[WARM_DEPTH] = (word(*)[WARM_DEPTH])sc->warm_w;
    const word *words[WARM_TOPICS];
    uint32_t nw[WARM_TOPICS];
    _Atomic uint64_t *s[WARM_TOPICS][4];
    uint64_t st[WARM_TOPICS][4];
    int rw = !t->readonly; /* a frozen trie needs no check */
    for (size_t j = 0; j < k; j++) {
        int64_t n = parse_words(t, topics[j], lens[j], 0, sc);
        code[j] = n < 0 ? n : 0;
        und[j] = n <= 0 || n > WARM_DEPTH; /* walked alone */
        nw[j] = und[j] ? 1 : (uint32_t)n;
        words[j] = buf[j];
        if (!und[j]) {
            memcpy(buf[j], sc->w, (size_t)n * sizeof(word));
            if (rw && stripes_read(t, buf[j], n, s[j], st[j]))
                und[j] = 1;
        }
    }
    size_t nm = 0;
    if (rounds(c, sc, words, nw, k, und, &nm) < 0)
        return CST_ENOMEM;
    for (size_t j = 0; j < k; j++)
        if (!und[j] && rw && !stripes_same(s[j], st[j]))
            und[j] = 1;
    return rounds_gather(sc, nm, k, &sc->bmatched, &sc->bmatchedcap, from) < 0 ? CST_ENOMEM : 0;
}

int64_t cst_lookup_many(cst_trie *t, const char *const *topics, const size_t *lens, size_t k,
                        uint64_t *out, size_t cap, size_t *ends)
{
    if (k == 0 || k > WARM_TOPICS)
        return CST_EINVAL;
    /* acquire: the cache's fields as cst_cache_set made them */
    int big = cst_warm_wanted(t), rounds_ok = rounds_take(&t->d);
    if (atomic_load_explicit(&t->cache, memory_order_acquire) != NULL || !big || !rounds_ok) {
        /* one lookup after another (each asks the result cache) as
         * cst_lookup_warm makes it, so that each answer comes in the order
         * of a lookup of its own; where no rounds can walk them, the walks
         * of a big trie warmed together first */
        if (big && !rounds_ok && cst_warm(t, topics, lens, k) == CST_ENOMEM)
            return CST_ENOMEM;
        size_t pos = 0;
        for (size_t j = 0; j < k; j++) {
            int64_t r = lookup(t, topics[j], lens[j], pos < cap ? out + pos : NULL,
                               pos < cap ? cap - pos : 0, rounds_ok);
            if (r < 0)
                return r;
            ends[j] = pos += (size_t)r;
        }
        return (int64_t)pos;
    }
    ctx c;
    scratch *sc = batch_enter(&c, t);
    if (sc == NULL)
        return CST_ENOMEM;
    int64_t code[WARM_TOPICS];
    uint8_t und[WARM_TOPICS];
    size_t from[WARM_TOPICS + 1];
    int64_t r = rounds_batch(&c, sc, topics, lens, k, code, und, from);
    for (size_t j = 0; j < k && r == 0; j++)
        r = code[j]; /* the first invalid topic's code */
    size_t pos = 0;
    for (size_t j = 0; j < k && r == 0; j++) {
        mctx x = {0};
        if (!und[j]) {
            x.sc = sc;
            x.mt = sc->bmatched + from[j];
            x.nmatched = from[j + 1] - from[j];
        } else {
            /* as cst_lookup_warm walks it (so its answer comes in the same
             * order: an undecided topic of a batch, one whose part of the
             * shared frontier outgrew it, may be decided alone); that
             * fills sc->matched, not sc->bmatched, where the later topics'
             * matches are */
            int64_t n = parse_words(t, topics[j], lens[j], 0, sc);
            r = walk_big(&x, &c, sc, n);
        }
        if (r == 0)
            r = collect_ids(&x, pos < cap ? out + pos : NULL, pos < cap ? cap - pos : 0);
        if (r >= 0) {
            if (pos + (size_t)r <= cap)
                count_lookup(&c);
            ends[j] = pos += (size_t)r;
            r = 0;
        }
    }
    ctx_exit(&c);
    return r < 0 ? r : (int64_t)pos;
}

int cst_has_subscribers(cst_trie *t, const char *topic, size_t len)
{
    ctx c;
    if (ctx_enter(&c, t) < 0)
        return CST_ENOMEM;
    mctx x = {0};
    x.first_only = 1;
    int r = walk_topic(&x, &c, topic, len);
    if (r == 0)
        count_lookup(&c);
    ctx_exit(&c);
    return r < 0 ? r : x.found;
}

int cst_match(cst_trie *t, const char *topic, size_t len, cst_chunk *out)
{
    ctx c;
    if (ctx_enter(&c, t) < 0)
        return CST_ENOMEM;
    mctx x = {0};
    x.out = out;
    out->nentries = out->need_pat = out->need_ids = out->need_entries = 0;
    int r = walk_topic(&x, &c, topic, len);
    if (r == 0 && !x.trunc)
        count_lookup(&c);
    ctx_exit(&c);
    if (r < 0)
        return r;
    return x.trunc ? CST_ETRUNC : (int)out->nentries;
}

/* The subscribers of exactly the n words in sc->w (as cst_subscribers). */
int64_t words_subscribers(cst_trie *t, scratch *sc, int64_t n, uint64_t *out, size_t cap)
{
    ctx c;
    if (ctx_enter(&c, t) < 0)
        return CST_ENOMEM;
    mctx x = {0};
    x.c = &c;
    x.sc = sc;
    inode *in = root_read(&c);
    snode *sn = NULL;
    for (int64_t k = 0; k < n && in != NULL; k++) {
        mainnode *m = gcas_read(&c, in);
        if (m->h.kind != K_CNODE) {
            sn = NULL;
            break;
        }
        const word *w = &sc->w[k];
        sn = w->kind == W_LITERAL ? find_literal(&x, (cnode *)m, w, x.record)
                                  : (snode *)spec_get((cnode *)m, w->kind - 1u);
        if (sn == NULL)
            break;
        in = k + 1 < n ? sn->child : NULL;
        if (k + 1 < n && in == NULL)
            sn = NULL;
    }
    int64_t r = 0;
    if (sn != NULL && sn->nsubs > 0) {
        if (scratch_reserve((void **)&sc->matched, &sc->matchedcap, 1, sizeof(snode *)) < 0) {
            r = CST_ENOMEM;
        } else {
            sc->matched[0] = sn;
            x.nmatched = 1;
            r = collect_ids(&x, out, cap);
        }
    }
    ctx_exit(&c);
    return r;
}

int64_t cst_subscribers(cst_trie *t, const char *pattern, size_t len, uint64_t *out, size_t cap)
{
    scratch *sc = scratch_get();
    if (sc == NULL)
        return CST_ENOMEM;
    int64_t n = parse_words(t, pattern, len, 1, sc);
    if (n < 0)
        return n;
    return words_subscribers(t, sc, n, out, cap);
}

int64_t cst_share_members(cst_trie *t, const char *pattern, size_t len, uint64_t share,
                          uint64_t *out, size_t cap)
{
    scratch *sc = scratch_get();
    if (sc == NULL)
        return CST_ENOMEM;
    char idbuf[SHARE_ID_BYTES];
    int64_t n = share_words(t, pattern, len, share, idbuf, sc);
    if (n < 0)
        return n;
    return words_subscribers(t, sc, n, out, cap);
}

/* ------------------------------------------------------------------------
 * Routing: one member per share group
 * ---------------------------------------------------------------------- */

/* Rendezvous (highest random weight) hashing: the id of ids[0..n) whose
 * score for key is highest.  O(n). */
static uint64_t rendezvous(const uint64_t *ids, size_t n, uint64_t key)
{
    uint64_t best = ids[0], top = mix64(key ^ mix64(ids[0]));
    for (size_t i = 1; i < n; i++) {
        uint64_t sc = mix64(key ^ mix64(ids[i]));
        if (sc > top || (sc == top && ids[i] < best)) {
            top = sc;
            best = ids[i];
        }
    }
    return best;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

#define SHARES_INSERTION 16 /* up to this many shares: an insertion sort */

/* Sort a route's share-group S-nodes by group id, stably: up to
 * SHARES_INSERTION of them by insertion over the array (the ids are copied
 * into it), more by a least-significant-digit radix sort over the bytes in
 * which the ids differ, O(k) for k groups.  (A comparison sort that reads
 * each id through its S-node costs a cache miss per comparison: k log k of
 * them.)  0, or CST_ENOMEM. */
static int sort_shares(scratch *sc, size_t k)
{
    if (k < 2)
        return 0;
    if (k <= SHARES_INSERTION) {
        /* a route's usual handful: an insertion sort, stable like the radix
         * passes, which clear and sum 257 counters each (~475 instructions
         * of a ~2,500-instruction route of 1-3 groups, callgrind) */
        share_ref *g = sc->shares;
        for (size_t i = 1; i < k; i++) {
            share_ref v = g[i];
            size_t j = i;
            for (; j > 0 && g[j - 1].id > v.id; j--)
                g[j] = g[j - 1];
            g[j] = v;
        }
        return 0;
    }
    if (scratch_reserve((void **)&sc->shares_tmp, &sc->shtmpcap, k, sizeof(share_ref)) < 0)
        return CST_ENOMEM;
    uint64_t all_or = 0, all_and = ~UINT64_C(0);
    for (size_t i = 0; i < k; i++) {
        all_or |= sc->shares[i].id;
        all_and &= sc->shares[i].id;
    }
    share_ref *from = sc->shares, *to = sc->shares_tmp;
    for (unsigned shift = 0; shift < 64; shift += 8) {
        if ((((all_or ^ all_and) >> shift) & 0xff) == 0)
            continue; /* every id has the same byte here */
        size_t count[257] = {0};
        for (size_t i = 0; i < k; i++)
            count[((from[i].id >> shift) & 0xff) + 1]++;
        for (size_t b = 1; b < 257; b++)
            count[b] += count[b - 1];
        for (size_t i = 0; i < k; i++)
            to[count[(from[i].id >> shift) & 0xff]++] = from[i];
        share_ref *t = from;
        from = to;
        to = t;
    }
    if (from != sc->shares)
        memcpy(sc->shares, from, k * sizeof(share_ref));
    return 0;
}

/* The union of the members of g[0..k) (k >= 2) into sc->uniq, in id order
 * (the same candidates give the same order); their number or CST_ENOMEM. */
static int64_t members_union(scratch *sc, const share_ref *g, size_t k)
{
    size_t total = 0;
    for (size_t i = 0; i < k; i++)
        total += g[i].sn->nsubs;
    if (scratch_reserve((void **)&sc->uniq, &sc->uniqcap, total, sizeof(uint64_t)) < 0)
        return CST_ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < k; i++)
        n += snode_emit(g[i].sn, sc->uniq + n);
    qsort(sc->uniq, n, sizeof(uint64_t), cmp_u64);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (u == 0 || sc->uniq[u - 1] != sc->uniq[i])
            sc->uniq[u++] = sc->uniq[i];
    return (int64_t)u;
}

/* One member of the group whose S-nodes (one per matching filter) are
 * g[0..k): the candidates are the union of their members.  One filter: its
 * inline ids in place, or its large set, where an index costs O(log32 n)
 * (set_nth) and only a rendezvous (scoring every member) copies it.  0, or
 * a CST_E* code. */
static int pick_member(mctx *x, const share_ref *g, size_t k, cst_pick_fn pick, void *arg,
                       uint64_t *member)
{
    scratch *sc = x->sc;
    const uint64_t *cand = NULL; /* NULL: g[0]'s set, not copied */
    size_t n;
    if (k == 1) {
        n = g[0].sn->nsubs;
        if (n <= SUBS_INLINE)
            cand = snode_ids(g[0].sn);
    } else {
        int64_t u = members_union(sc, g, k);
        if (u < 0)
            return (int)u;
        n = (size_t)u;
        cand = sc->uniq;
    }
    uint64_t v = 0;
    int how = pick(arg, g[0].id, n, &v);
    if (how == CST_PICK_INDEX) {
        uint64_t i = v < n ? v : v % n;
        *member = cand ? cand[i] : set_nth(g[0].sn->set, i);
        return 0;
    }
    if (how != CST_PICK_HASH)
        return CST_EPICK;
    if (cand == NULL) {
        if (scratch_reserve((void **)&sc->uniq, &sc->uniqcap, n, sizeof(uint64_t)) < 0)
            return CST_ENOMEM;
        set_emit(g[0].sn->set, sc->uniq);
        cand = sc->uniq;
    }
    *member = rendezvous(cand, n, v);
    return 0;
}

int64_t cst_route(cst_trie *t, const char *topic, size_t len, cst_pick_fn pick, void *arg,
                  uint64_t *out, uint64_t *shares, size_t cap, size_t *nplain)
{
    ctx c;
    if (ctx_enter(&c, t) < 0)
        return CST_ENOMEM;
    mctx x = {0};
    x.route = 1;
    *nplain = 0;
    int64_t r = walk_topic(&x, &c, topic, len);
    if (r == 0)
        r = collect_ids(&x, out, cap);
    if (r >= 0 && sort_shares(x.sc, x.nshares) < 0)
        r = CST_ENOMEM;
    if (r >= 0) {
        size_t np = (size_t)r, ns = x.nshares;
        const share_ref *g = x.sc->shares;
        size_t ngroups = 0;
        for (size_t i = 0; i < ns; i++)
            ngroups += i == 0 || g[i].id != g[i - 1].id;
        *nplain = np;
        r = (int64_t)(np + ngroups);
        if ((size_t)r <= cap) {
            size_t k = np;
            for (size_t i = 0; i < ns && r >= 0;) {
                size_t j = i + 1;
                while (j < ns && g[j].id == g[i].id)
                    j++;
                int st = pick_member(&x, g + i, j - i, pick, arg, &out[k]);
                if (st < 0)
                    r = st;
                else
                    shares[k++ - np] = g[i].id;
                i = j;
            }
            if (r >= 0)
                count_lookup(&c);
        }
    }
    ctx_exit(&c);
    return r;
}

int64_t cst_validate(cst_trie *t, const char *s, size_t len, int is_pattern)
{
    scratch *sc = scratch_get();
    if (sc == NULL)
        return CST_ENOMEM;
    return parse_words(t, s, len, is_pattern, sc);
}

int64_t cst_validate_at(cst_trie *t, const char *s, size_t len, int is_pattern, int64_t *at,
                        int64_t *index)
{
    scratch *sc = scratch_get();
    if (sc == NULL)
        return CST_ENOMEM;
    int64_t r = parse_words(t, s, len, is_pattern, sc);
    if (r < 0 && r != CST_ENOMEM) {
        *at = sc->fault_at;
        *index = sc->fault_word;
    }
    return r;
}

static int row_is_valid(const uint8_t *validity, int64_t off, int64_t r)
{
    if (validity == NULL)
        return 1;
    int64_t b = off + r;
    return (validity[b >> 3] >> (b & 7)) & 1;
}

/* Rows matched per epoch section: long enough to make entering cheap, short
 * enough that a batch never holds reclamation back for long. */
#define BATCH_EPOCH_ROWS 256

static void row_span(const void *offsets, int offsets64, int64_t r, int64_t *a, int64_t *b)
{
    if (offsets64) {
        *a = ((const int64_t *)offsets)[r];
        *b = ((const int64_t *)offsets)[r + 1];
    } else {
        *a = ((const int32_t *)offsets)[r];
        *b = ((const int32_t *)offsets)[r + 1];
    }
}

/* The topics of the next CST_WARM_TOPICS valid rows from r into s, lens
 * (*k of them); returns the row after the last one taken. */
static int64_t next_rows(const char *data, const void *offsets, int offsets64,
                         const uint8_t *validity, int64_t validity_offset, int64_t r,
                         int64_t nrows, const char **s, size_t *lens, size_t *k)
{
    *k = 0;
    for (; r < nrows && *k < CST_WARM_TOPICS; r++) {
        if (!row_is_valid(validity, validity_offset, r))
            continue;
        int64_t a, b;
        row_span(offsets, offsets64, r, &a, &b);
        s[*k] = data + a;
        lens[(*k)++] = (size_t)(b - a);
    }
    return r;
}

/* Warm the walks of the next CST_WARM_TOPICS valid rows from r (cst_warm);
 * returns the row after the last one warmed. */
static int64_t warm_rows(cst_trie *t, const char *data, const void *offsets, int offsets64,
                         const uint8_t *validity, int64_t validity_offset, int64_t r,
                         int64_t nrows)
{
    const char *s[CST_WARM_TOPICS];
    size_t lens[CST_WARM_TOPICS], k;
    r = next_rows(data, offsets, offsets64, validity, validity_offset, r, nrows, s, lens, &k);
    cst_warm(t, s, lens, k); /* a hint: out of memory changes nothing */
    return r;
}

int64_t cst_lookup_batch(cst_trie *t, const char *data, const void *offsets, int offsets64,
                         const uint8_t *validity, int64_t validity_offset, int64_t nrows,
                         int64_t start_row, uint64_t skip, int64_t *out_rows,
                         uint64_t *out_ids, size_t cap, int64_t *next_row, uint64_t *next_skip,
                         size_t *need, int8_t *row_status)
{
    size_t k = 0;
    int64_t r = start_row;
    int64_t status = 0;
    uint64_t *tmp = NULL;      /* one row's ids, each once (grown as needed) */
    size_t tmpcap = 0;
    int in_epoch = 0, rows_in_epoch = 0;
    ctx c;
    *need = 0;
    if (!t->readonly)
        skip = 0; /* rows of a live trie are never split (see cstrie.h) */
    /* A big trie's rows walk as cst_lookup_warm walks a topic (walk_big): in
     * rounds where the dialect takes them, so each row's ids come in the
     * order of Trie.lookup's answer.  Which walk a row takes depends on the
     * trie alone, never on the rows of the call: a row split between two
     * calls of a snapshot is walked the same way, ids in the same order, by
     * both.  Where rounds cannot walk (AMQP), each CST_WARM_TOPICS rows are
     * warmed together first. */
    int big = cst_warm_wanted(t), inrounds = big && rounds_take(&t->d);
    int warming = nrows - r > 1 && big && !inrounds;
    int64_t warmed_to = r; /* the rows before it were warmed */
    /* In rounds, the next CST_WARM_TOPICS valid rows walk together
     * (rounds_batch, as cst_lookup_many's topics), inside one read section:
     * the group's topics gs, gl; the next one to answer is gnext of gk.  A
     * new section starts a new group. */
    const char *gs[WARM_TOPICS];
    size_t gl[WARM_TOPICS], gk = 0, gnext = 0;
    int64_t gcode[WARM_TOPICS];
    uint8_t gund[WARM_TOPICS];
    size_t gfrom[WARM_TOPICS + 1];
    scratch *gsc = NULL;
    for (; r < nrows; r++) {
        if (!row_is_valid(validity, validity_offset, r)) {
            if (row_status)
                row_status[r] = 1;
            continue;
        }
        if (warming && r >= warmed_to)
            warmed_to = warm_rows(t, data, offsets, offsets64, validity, validity_offset, r, nrows);
        int64_t a, b;
        row_span(offsets, offsets64, r, &a, &b);
        if (in_epoch && rows_in_epoch == BATCH_EPOCH_ROWS) {
            ctx_exit(&c);
            in_epoch = 0;
        }
        if (!in_epoch) {
            if (ctx_enter(&c, t) < 0) {
                status = CST_ENOMEM;
                break;
            }
            in_epoch = 1;
            rows_in_epoch = 0;
            gk = gnext = 0; /* a group's matches live only in its section */
        }
        rows_in_epoch++;
        mctx x = {0};
        int st;
        if (inrounds) {
            if (gnext == gk) {
                gnext = 0;
                next_rows(data, offsets, offsets64, validity, validity_offset, r, nrows, gs, gl,
                          &gk);
                gsc = scratch_get();
                if (gsc == NULL || warm_reserve(gsc, 1) < 0 ||
                    rounds_batch(&c, gsc, gs, gl, gk, gcode, gund, gfrom) < 0) {
                    status = CST_ENOMEM;
                    break;
                }
            }
            size_t j = gnext++; /* row r: valid rows are answered in order */
            if (gcode[j] < 0) {
                st = (int)gcode[j];
            } else if (!gund[j]) {
                x.c = &c;
                x.sc = gsc;
                x.mt = gsc->bmatched + gfrom[j];
                x.nmatched = gfrom[j + 1] - gfrom[j];
                x.found = x.nmatched > 0;
                st = 0;
            } else {
                /* as cst_lookup_warm walks it (cst_lookup_many, the same) */
                st = walk_big(&x, &c, gsc, parse_words(t, gs[j], gl[j], 0, gsc));
            }
        } else {
            st = walk_topic(&x, &c, data + a, (size_t)(b - a));
        }
        if (st == CST_ENOMEM) {
            status = CST_ENOMEM;
            break;
        }
        if (st < 0 || x.nmatched == 0) {
            if (st == 0)
                count_lookup(&c);
            if (row_status)
                row_status[r] = (int8_t)st;
            skip = 0;
            continue;
        }
        /* Collect this row's ids (each once), from this one walk. */
        size_t total = 0;
        snode *const *mt = x.mt != NULL ? x.mt : x.sc->matched;
        for (size_t g = 0; g < x.nmatched; g++)
            total += mt[g]->nsubs;
        if (scratch_reserve((void **)&tmp, &tmpcap, total, sizeof(uint64_t)) < 0) {
            status = CST_ENOMEM;
            break;
        }
        int64_t got = collect_ids(&x, tmp, total);
        if (got < 0) {
            status = got;
            break;
        }
        size_t left = (size_t)got > skip ? (size_t)got - (size_t)skip : 0;
        if (left > cap - k && !t->readonly) {
            /* The row does not fit: it is answered whole by a later call (a
             * later walk), never split across two states of the trie. */
            if (k == 0) {
                *need = (size_t)got;
                status = CST_ETRUNC;
            }
            break;
        }
        if (skip == 0)
            count_lookup(&c);
        if (row_status)
            row_status[r] = 0;
        /* A frozen trie's rows may be split: every walk of it emits the same
         * ids in the same order. */
        size_t take = left < cap - k ? left : cap - k;
        for (size_t i = 0; i < take; i++) {
            out_rows[k + i] = r;
            out_ids[k + i] = tmp[skip + i];
        }
        k += take;
        if (take < left) {
            skip += take;
            break; /* this row goes on in the next call */
        }
        skip = 0;
        if (k == cap) {
            r++;
            break;
        }
    }
    if (in_epoch)
        ctx_exit(&c);
    free(tmp);
    *next_row = r;
    *next_skip = r < nrows ? skip : 0;
    return status < 0 ? status : (int64_t)k;
}
