/*
 * match.c - lookups: match a topic against the trie with backtracking over
 * the one-level and many-level wildcards, without taking a lock.
 *
 * A lookup reads main nodes through gcas_read (helping a pending GCAS to its
 * end, which may CAS) and never renews or cleans: T-nodes are read through
 * (a tomb's contents are final), and old-generation paths are current (see
 * trie.c).  The many-level wildcard of a dialect that allows it anywhere
 * (AMQP '#') makes the search a graph walk over (S-node, word index) states;
 * each state is visited once (a per-thread memo table), so a pattern such as
 * #.#.#.#.a costs O(states), not O(2^words).
 *
 * The walk keeps its pending states on a heap stack (per-thread scratch), not
 * on the C stack: a topic may have 65,535 levels (a valid MQTT topic of
 * separators only), and every level is one more state on the path.
 */
#include <pthread.h>
#include "tls.h"
#include <stdlib.h>

#include "internal.h"
#include "mix64.h"

/* ------------------------------------------------------------------------
 * Per-thread scratch buffers
 * ---------------------------------------------------------------------- */

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static CST_TLS scratch *tls_scratch;

static void scratch_free(void *p)
{
    scratch *sc = p;
    if (sc == NULL)
        return;
    free(sc->w);
    free(sc->ids);
    free(sc->uniq);
    free(sc->groups);
    free(sc->shares);
    free(sc->path);
    free(sc->upath);
    free(sc->mstack);
    free(sc->memo);
    free(sc->reads);
    free(sc);
    tls_scratch = NULL;
}

static void scratch_key_init(void) { (void)pthread_key_create(&scratch_key, scratch_free); }

scratch *scratch_get(void)
{
    scratch *sc = tls_scratch;
    if (sc != NULL)
        return sc;
    pthread_once(&scratch_once, scratch_key_init);
    sc = calloc(1, sizeof *sc);
    if (sc == NULL)
        return NULL;
    tls_scratch = sc;
    pthread_setspecific(scratch_key, sc);
    return sc;
}

int scratch_reserve(void **buf, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need)
        ncap *= 2;
    void *p = realloc(*buf, ncap * elem);
    if (p == NULL)
        return -1;
    *buf = p;
    *cap = ncap;
    return 0;
}

/* ------------------------------------------------------------------------
 * The walk
 * ---------------------------------------------------------------------- */

typedef struct mctx {
    ctx *c;
    const word *w;
    size_t n;
    int dollar;                /* the dollar rule hides wildcards at word 0 */
    int memo;                  /* many-level wildcard allowed anywhere */
    int first_only;            /* has_subscribers: stop at the first match */
    int found;
    int oom;
    scratch *sc;
    size_t ngroups;
    size_t depth;
    cst_groups *out;           /* match(): groups written as found */
    int trunc;
    int route;                 /* route(): also collect the share groups */
    size_t nshares;            /* share-group S-nodes found (sc->shares) */
    int record;                /* note each main node read (sc->reads) */
    size_t nreads;
} mctx;

/* The memo holds two kinds of entry, told apart by the key's low bit (S-nodes
 * are aligned):
 *  - (S-node, word index), key = the S-node: the state was visited;
 *  - many-level wildcard S-node sm, key = sm | 1, j = the smallest word index
 *    from which its words have been handed out (see open_level).
 * The second kind is found by its key alone, so it hashes with j = 0. */
static size_t memo_hash(uintptr_t key, uint64_t j, size_t cap)
{
    if (key & 1)
        j = 0;
    return (size_t)((key ^ (j * UINT64_C(0x9e3779b97f4a7c15))) * UINT64_C(0xff51afd7ed558ccd) >>
                    20) &
           (cap - 1);
}

/* Room for one more entry (at most half full); 0, or -1 out of memory. */
static int memo_reserve(mctx *x)
{
    scratch *sc = x->sc;
    if (sc->memoused * 2 < sc->memocap)
        return 0;
    size_t ncap = sc->memocap ? sc->memocap * 2 : 256;
    memo_slot *nm = calloc(ncap, sizeof *nm);
    if (nm == NULL) {
        x->oom = 1;
        return -1;
    }
    size_t used = 0;
    for (size_t i = 0; i < sc->memocap; i++) {
        memo_slot *o = &sc->memo[i];
        if (o->stamp != sc->stamp)
            continue;
        size_t h = memo_hash(o->key, o->j, ncap);
        while (nm[h].stamp == sc->stamp)
            h = (h + 1) & (ncap - 1);
        nm[h] = *o;
        used++;
    }
    free(sc->memo);
    sc->memo = nm;
    sc->memocap = ncap;
    sc->memoused = used;
    return 0;
}

static int memo_seen(mctx *x, const snode *sn, size_t j)
{
    if (memo_reserve(x) < 0)
        return 0;
    scratch *sc = x->sc;
    uintptr_t key = (uintptr_t)sn;
    size_t h = memo_hash(key, j, sc->memocap);
    while (sc->memo[h].stamp == sc->stamp) {
        if (sc->memo[h].key == key && sc->memo[h].j == j)
            return 1;
        h = (h + 1) & (sc->memocap - 1);
    }
    sc->memo[h] = (memo_slot){key, j, sc->stamp};
    sc->memoused++;
    return 0;
}

/* The many-level wildcard sm is to hand out its word indices from `from` on:
 * returns the smallest index it handed out from before in this walk (SIZE_MAX
 * if none), and records `from` if it is smaller. */
static size_t memo_multi_from(mctx *x, const snode *sm, size_t from)
{
    if (memo_reserve(x) < 0)
        return SIZE_MAX;
    scratch *sc = x->sc;
    uintptr_t key = (uintptr_t)sm | 1;
    size_t h = memo_hash(key, 0, sc->memocap);
    while (sc->memo[h].stamp == sc->stamp) {
        if (sc->memo[h].key == key) {
            size_t before = (size_t)sc->memo[h].j;
            if (from < before)
                sc->memo[h].j = from;
            return before;
        }
        h = (h + 1) & (sc->memocap - 1);
    }
    sc->memo[h] = (memo_slot){key, from, sc->stamp};
    sc->memoused++;
    return SIZE_MAX;
}

static void emit_group(mctx *x, snode *sn)
{
    cst_groups *o = x->out;
    const cst_dialect *d = &x->c->t->d;
    size_t plen = 0;
    for (size_t i = 0; i < x->depth; i++)
        plen += x->sc->path[i]->wlen + (i ? d->sep_len : 0);
    size_t pat0 = o->need_pat, ids0 = o->need_ids, g = o->need_groups;
    o->need_pat += plen;
    o->need_ids += sn->nsubs;
    o->need_groups += 1;
    if (x->trunc || o->need_pat > o->pat_cap || o->need_ids > o->ids_cap ||
        o->need_groups > o->groups_cap) {
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
    o->ngroups = g + 1;
}

static void emit(mctx *x, snode *sn)
{
    x->found = 1;
    if (x->first_only)
        return;
    if (x->out != NULL) {
        emit_group(x, sn);
        return;
    }
    if (x->ngroups >= x->sc->gcap &&
        scratch_reserve((void **)&x->sc->groups, &x->sc->gcap, x->ngroups + 1,
                        sizeof(snode *)) < 0) {
        x->oom = 1;
        return;
    }
    x->sc->groups[x->ngroups++] = sn;
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
 * updates in flight and done (trie.c, gcas); a walk that began with none in
 * flight and ends reading the same count saw no update begin or end, so it
 * read exactly the updates done before it began (an update raises the count
 * before its CAS and marks its end after, with release; the walk reads the
 * count with acquire on both sides).  When the count moved, the walk runs
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

static inline mainnode *read_main(mctx *x, inode *in)
{
    mainnode *m = gcas_read(x->c, in);
    if (x->record) {
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

static inline mainnode *read_noted(void *x, inode *in) { return read_main(x, in); }

/* The S-node of literal word w in the topic level whose top C-node is cn. */
static inline snode *find_literal(mctx *x, cnode *cn, const word *w)
{
    return level_find(cn, w, read_noted, x);
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
        scratch_reserve((void **)&sc->shares, &sc->shcap, x->nshares + 1, sizeof(snode *)) < 0) {
        x->oom = 1;
        return;
    }
    sc->shares[x->nshares++] = sn;
}

/* Every group S-node of the share level whose main node (at hash level lev)
 * is m.  Recursion over hash levels only: at most MAX_HASH_LEVEL / 5 + 1
 * deep, whatever the input. */
static void shares_below(mctx *x, mainnode *m, unsigned lev)
{
    switch (m->h.kind) {
    case K_CNODE: {
        cnode *cn = (cnode *)m;
        for (uint32_t i = (uint32_t)popc(cn->m.h.b2); i < cn->n; i++) {
            cst_hdr *b = cn->array[i];
            if (b->kind == K_SNODE)
                share_add(x, (snode *)b);
            else if (lev < MAX_HASH_LEVEL)
                shares_below(x, read_main(x, (inode *)b), lev + 5);
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
 *            ..., end words consumed (one F_NODE each, in that order).
 * depth is the S-node's index on the path (match() rebuilds the pattern from
 * sc->path[0..depth]); multis counts the many-level wildcards on the path up
 * to the state (for F_MULTI: above it).  Frames are pushed in the reverse of
 * the order they are visited in, so the walk visits states in the order of
 * the recursive formulation: the zero-word pattern, the many-level wildcard,
 * the literal word, the one-level wildcard.
 */
enum { F_NODE, F_MULTI };

typedef struct mframe {
    snode *sn;
    size_t j;
    size_t end;
    size_t depth;
    uint32_t multis;
    uint8_t kind;
    uint8_t memo_on;
} mframe;

static void push_grow(mctx *x, size_t *sp, mframe f)
{
    scratch *sc = x->sc;
    if (scratch_reserve((void **)&sc->mstack, &sc->mstackcap, *sp + 1, sizeof(mframe)) < 0) {
        x->oom = 1;
        return;
    }
    sc->mstack[(*sp)++] = f;
}

static inline void push(mctx *x, size_t *sp, mframe f)
{
    scratch *sc = x->sc;
    if (__builtin_expect(*sp < sc->mstackcap, 1))
        sc->mstack[(*sp)++] = f;
    else
        push_grow(x, sp, f);
}

/* Push the states that follow a topic level (the C-node under in) with i
 * words consumed. */
static void open_level(mctx *x, size_t *sp, inode *in, size_t i, int memo_on, int is_top,
                       size_t depth, uint32_t multis)
{
    mainnode *m = read_main(x, in);
    if (m->h.kind != K_CNODE)
        return; /* an entombed (empty) topic level */
    cnode *cn = (cnode *)m;
    int hide = x->dollar && i == 0;
    if (i < x->n) {
        /* The states are taken in the reverse order of their pushes, so the
         * one-level wildcard's S-node and the literal's next level are read
         * last: fetch them now, while the walk goes on elsewhere. */
        snode *ss = (snode *)spec_get(cn, W_SINGLE - 1);
        if (ss && !hide) {
            __builtin_prefetch(ss);
            push(x, sp, (mframe){ss, i + 1, 0, depth, multis, F_NODE, (uint8_t)memo_on});
        }
        snode *sn = find_literal(x, cn, &x->w[i]);
        if (sn) {
            if (sn->child != NULL)
                __builtin_prefetch(sn->child);
            push(x, sp, (mframe){sn, i + 1, 0, depth, multis, F_NODE, (uint8_t)memo_on});
        }
    }
    snode *sm = (snode *)spec_get(cn, W_MULTI - 1);
    if (sm && !hide) {
        size_t min = (size_t)x->c->t->d.multi_min;
        size_t from = i + min, end = x->n;
        if (x->memo && multis >= 1 && from <= end) {
            /* Below another many-level wildcard this one is reached from many
             * word indices; each index from `from` to the end is handed out
             * once in the walk, so a lookup costs O(states), not O(states *
             * words): skip what an earlier expansion covers (it hands out
             * every index from its own start on). */
            size_t before = memo_multi_from(x, sm, from);
            if (before <= from)
                from = end + 1;
            else if (before <= end)
                end = before - 1;
        }
        if (from <= end)
            push(x, sp, (mframe){sm, from, end, depth, multis, F_MULTI, 0});
    }
    if (is_top && x->n == 0) {
        snode *e = (snode *)spec_get(cn, W_EMPTY_PATTERN - 1);
        if (e)
            push(x, sp, (mframe){e, 0, 0, depth, multis, F_NODE, (uint8_t)memo_on});
    }
    if (x->route && i == x->n && !is_top) {
        /* the S-node above matched the whole topic: its pattern's groups */
        snode *g = (snode *)spec_get(cn, W_SHARE - 1);
        if (g != NULL && g->child != NULL)
            shares_below(x, read_main(x, g->child), 0);
    }
}

/* The walk: states from the trie's top level until none is left. */
static void match_walk(mctx *x, inode *root)
{
    size_t sp = 0;
    int64_t steps = 0;
    open_level(x, &sp, root, 0, 0, 1, 0, 0);
    while (sp > 0 && !x->oom && !(x->found && x->first_only)) {
        steps++;
        mframe *f = &x->sc->mstack[sp - 1];
        if (f->kind == F_MULTI) {
            /* A state (S-node, word index) can be reached twice only through
             * two many-level wildcards on the path (each consuming a varying
             * number of words): below the first one every state has one way
             * in, so the memo (a hash probe per state) starts at the second. */
            snode *sm = f->sn;
            uint8_t memo = (uint8_t)(x->memo && f->multis >= 1);
            mframe node = {sm, f->j, 0, f->depth, f->multis + 1, F_NODE, memo};
            if (sm->child == NULL || only_shares(x, sm->child)) {
                /* Nothing follows the wildcard: only "consume every word" can
                 * match (memoised as above: an earlier wildcard may reach this
                 * level again). */
                node.j = x->n;
                sp--;
            } else if (f->j < f->end) {
                f->j++;
            } else {
                sp--;
            }
            push(x, &sp, node);
            continue;
        }
        mframe cur = *f;
        sp--;
        snode *sn = cur.sn;
        if (cur.memo_on && memo_seen(x, sn, cur.j))
            continue;
        if (cur.depth >= x->sc->pathcap &&
            scratch_reserve((void **)&x->sc->path, &x->sc->pathcap, cur.depth + 1,
                            sizeof(snode *)) < 0) {
            x->oom = 1;
            break;
        }
        x->sc->path[cur.depth] = sn;
        x->depth = cur.depth + 1;
        if (cur.j == x->n && sn->nsubs > 0)
            emit(x, sn);
        if (sn->child)
            open_level(x, &sp, sn->child, cur.j, cur.memo_on, 0, cur.depth + 1, cur.multis);
    }
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

/* One walk from root: the answer's state (found, groups, shares, match()'s
 * output) starts empty, so a walk that is run again starts afresh. */
static void walk_once(mctx *x, inode *root)
{
    x->found = x->trunc = 0;
    x->ngroups = x->nshares = x->depth = x->nreads = 0;
    if (x->out != NULL)
        x->out->ngroups = x->out->need_pat = x->out->need_ids = x->out->need_groups = 0;
    x->sc->stamp++;
    x->sc->memoused = 0;
    match_walk(x, root);
}

/* Parse the topic and run the walk over the trie; x must be zeroed but for
 * first_only/out.  Returns 0 or a CST_E* code. */
static int walk_topic(mctx *x, ctx *c, const char *topic, size_t len)
{
    const cst_dialect *d = &c->t->d;
    scratch *sc = scratch_get();
    if (sc == NULL)
        return CST_ENOMEM;
    int64_t n = parse_words(c->t, topic, len, 0, sc);
    if (n < 0)
        return (int)n;
    x->c = c;
    x->sc = sc;
    x->w = sc->w;
    x->n = (size_t)n;
    x->dollar = d->dollar_rule && n > 0 && sc->w[0].len > 0 && sc->w[0].p[0] == '$';
    x->memo = d->multi != NULL && !d->multi_last_only;
    if (c->t->readonly) {
        walk_once(x, root_read(c));
        return x->oom ? CST_ENOMEM : 0;
    }
    int retries = atomic_load_explicit(&walk_retries, memory_order_relaxed);
    for (int attempt = 0; attempt < retries; attempt++) {
        /* acquire: the walk's reads stay after this read of the count, and
         * every update it counts as done is in the mains the walk reads. */
        uint64_t w0 = atomic_load_explicit(&c->t->updates, memory_order_acquire);
        x->record = attempt > 0; /* a quiet trie needs no note of the reads */
        inode *root = root_read(c);
        walk_once(x, root);
        if (x->oom)
            return CST_ENOMEM;
        /* acquire: not read before the walk's own reads. */
        if ((w0 & UPD_IN_FLIGHT) == 0 &&
            atomic_load_explicit(&c->t->updates, memory_order_acquire) == w0)
            return 0; /* no update began or ended during the walk */
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

/* Collect the ids of the groups found, each once, into out (up to cap). */
static int64_t collect_ids(mctx *x, uint64_t *out, size_t cap)
{
    scratch *sc = x->sc;
    if (x->ngroups == 0)
        return 0;
    if (x->ngroups == 1) {
        snode *sn = sc->groups[0];
        if (cap >= sn->nsubs)
            return (int64_t)snode_emit(sn, out);
        if (scratch_reserve((void **)&sc->ids, &sc->idcap, sn->nsubs, sizeof(uint64_t)) < 0)
            return CST_ENOMEM;
        snode_emit(sn, sc->ids);
        if (cap)
            memcpy(out, sc->ids, cap * sizeof(uint64_t));
        return sn->nsubs;
    }
    size_t total = 0;
    for (size_t g = 0; g < x->ngroups; g++)
        total += sc->groups[g]->nsubs;
    size_t tcap = 16;
    while (tcap < total * 2)
        tcap *= 2;
    if (scratch_reserve((void **)&sc->ids, &sc->idcap, total, sizeof(uint64_t)) < 0 ||
        scratch_reserve((void **)&sc->uniq, &sc->uniqcap, tcap, sizeof(uint64_t)) < 0)
        return CST_ENOMEM;
    size_t k = 0;
    for (size_t g = 0; g < x->ngroups; g++) {
        k += snode_emit(sc->groups[g], sc->ids + k);
    }
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

int64_t cst_lookup(cst_trie *t, const char *topic, size_t len, uint64_t *out, size_t cap)
{
    ctx c;
    if (ctx_enter(&c, t) < 0)
        return CST_ENOMEM;
    mctx x = {0};
    int64_t r = walk_topic(&x, &c, topic, len);
    if (r == 0)
        r = collect_ids(&x, out, cap);
    if (r >= 0 && (size_t)r <= cap)
        count_lookup(&c); /* a caller whose buffer was too small asks again */
    ctx_exit(&c);
    return r;
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

int cst_match(cst_trie *t, const char *topic, size_t len, cst_groups *out)
{
    ctx c;
    if (ctx_enter(&c, t) < 0)
        return CST_ENOMEM;
    mctx x = {0};
    x.out = out;
    out->ngroups = out->need_pat = out->need_ids = out->need_groups = 0;
    int r = walk_topic(&x, &c, topic, len);
    if (r == 0 && !x.trunc)
        count_lookup(&c);
    ctx_exit(&c);
    if (r < 0)
        return r;
    return x.trunc ? CST_ETRUNC : (int)out->ngroups;
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
        sn = w->kind == W_LITERAL ? find_literal(&x, (cnode *)m, w)
                                  : (snode *)spec_get((cnode *)m, w->kind - 1u);
        if (sn == NULL)
            break;
        in = k + 1 < n ? sn->child : NULL;
        if (k + 1 < n && in == NULL)
            sn = NULL;
    }
    int64_t r = 0;
    if (sn != NULL && sn->nsubs > 0) {
        if (scratch_reserve((void **)&sc->groups, &sc->gcap, 1, sizeof(snode *)) < 0) {
            r = CST_ENOMEM;
        } else {
            sc->groups[0] = sn;
            x.ngroups = 1;
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

int cst_topic_get(cst_trie *t, const char *topic, size_t len, uint64_t *id)
{
    *id = 0;
    scratch *sc;
    int64_t n = topic_key_words(t, topic, len, &sc);
    if (n < 0)
        return (int)n;
    int64_t got = words_subscribers(t, sc, n, id, 1);
    return got < 0 ? (int)got : got > 0;
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

static uint64_t share_of(const snode *sn) { return share_id_read(sn->word); }

static int cmp_share(const void *a, const void *b)
{
    uint64_t x = share_of(*(snode *const *)a), y = share_of(*(snode *const *)b);
    return (x > y) - (x < y);
}

/* The union of the members of g[0..k) (k >= 2) into sc->uniq, in id order
 * (the same candidates give the same order); their number or CST_ENOMEM. */
static int64_t members_union(scratch *sc, snode **g, size_t k)
{
    size_t total = 0;
    for (size_t i = 0; i < k; i++)
        total += g[i]->nsubs;
    if (scratch_reserve((void **)&sc->uniq, &sc->uniqcap, total, sizeof(uint64_t)) < 0)
        return CST_ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < k; i++)
        n += snode_emit(g[i], sc->uniq + n);
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
static int pick_member(mctx *x, snode **g, size_t k, cst_pick_fn pick, void *arg,
                       uint64_t *member)
{
    scratch *sc = x->sc;
    const uint64_t *cand = NULL; /* NULL: g[0]'s set, not copied */
    size_t n;
    if (k == 1) {
        n = g[0]->nsubs;
        if (n <= SUBS_INLINE)
            cand = snode_ids(g[0]);
    } else {
        int64_t u = members_union(sc, g, k);
        if (u < 0)
            return (int)u;
        n = (size_t)u;
        cand = sc->uniq;
    }
    uint64_t v = 0;
    int how = pick(arg, share_of(g[0]), n, &v);
    if (how == CST_PICK_INDEX) {
        uint64_t i = v < n ? v : v % n;
        *member = cand ? cand[i] : set_nth(g[0]->set, i);
        return 0;
    }
    if (how != CST_PICK_HASH)
        return CST_EPICK;
    if (cand == NULL) {
        if (scratch_reserve((void **)&sc->uniq, &sc->uniqcap, n, sizeof(uint64_t)) < 0)
            return CST_ENOMEM;
        set_emit(g[0]->set, sc->uniq);
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
    if (r >= 0) {
        size_t np = (size_t)r, ns = x.nshares;
        snode **g = x.sc->shares;
        if (ns > 1)
            qsort(g, ns, sizeof(snode *), cmp_share);
        size_t ngroups = 0;
        for (size_t i = 0; i < ns; i++)
            ngroups += i == 0 || share_of(g[i]) != share_of(g[i - 1]);
        *nplain = np;
        r = (int64_t)(np + ngroups);
        if ((size_t)r <= cap) {
            size_t k = np;
            for (size_t i = 0; i < ns && r >= 0;) {
                size_t j = i + 1;
                while (j < ns && share_of(g[j]) == share_of(g[i]))
                    j++;
                int st = pick_member(&x, g + i, j - i, pick, arg, &out[k]);
                if (st < 0)
                    r = st;
                else
                    shares[k++ - np] = share_of(g[i]);
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
    for (; r < nrows; r++) {
        if (!row_is_valid(validity, validity_offset, r)) {
            if (row_status)
                row_status[r] = 1;
            continue;
        }
        int64_t a, b;
        if (offsets64) {
            a = ((const int64_t *)offsets)[r];
            b = ((const int64_t *)offsets)[r + 1];
        } else {
            a = ((const int32_t *)offsets)[r];
            b = ((const int32_t *)offsets)[r + 1];
        }
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
        }
        rows_in_epoch++;
        mctx x = {0};
        int st = walk_topic(&x, &c, data + a, (size_t)(b - a));
        if (st == CST_ENOMEM) {
            status = CST_ENOMEM;
            break;
        }
        if (st < 0 || x.ngroups == 0) {
            if (st == 0)
                count_lookup(&c);
            if (row_status)
                row_status[r] = (int8_t)st;
            skip = 0;
            continue;
        }
        /* Collect this row's ids (each once), from this one walk. */
        size_t total = 0;
        for (size_t g = 0; g < x.ngroups; g++)
            total += x.sc->groups[g]->nsubs;
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
