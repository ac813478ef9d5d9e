/*
 * trie.c - the concurrent subscription trie: node lifecycle, GCAS, RDCSS,
 * subscribe, unsubscribe, snapshot, clear.
 *
 * The structure follows Prokopec et al., "Concurrent Tries with Efficient
 * Non-Blocking Snapshots" (the Ctrie), adapted to topic words as in the
 * concurrent subscription trie: each topic level is a Ctrie over word hashes,
 * and an S-node (a word) holds the subscriber set of the pattern ending there
 * and the I-node of the next topic level.  Names mirror the paper: gcas,
 * gcas_commit, gcas_read, rdcss_root, rdcss_complete, rdcss_read_root,
 * clean, to_contracted, and numbered cases in the update functions.
 *
 * Departures from the paper, each argued where it is made:
 *  - generations are 64-bit integers from one global counter (never object
 *    identities, which a port once compared as equal);
 *  - FAILED(prev) is a tagged pointer instead of an allocated F-node;
 *  - the RDCSS descriptor decides commit/abort by a CAS on its own state word
 *    before any helper swings the root, so every helper and the initiator
 *    agree on the outcome;
 *  - a write renews only the branch it descends through (the paper renews a
 *    whole C-node), and lookups read old-generation paths without renewing:
 *    an old-generation I-node still reachable from the live root has seen no
 *    write since the snapshot (every write renews its path first), so its
 *    contents are current;
 *  - a T-node may entomb nothing: an empty topic level (its hash-level-0
 *    C-node lost its last branch) is entombed as T-node(NULL) and the parent
 *    S-node drops its child (or the S-node goes, when it has no subscribers).
 *
 * Reclamation
 * -----------
 * Nodes are reference counted and freed through EBR (ebr.c).  The rules:
 *  R1. A reference stored in a published node or slot is released only through
 *      retire() (deferred past every open epoch section), because readers may
 *      have loaded it.
 *  R2. A node that was never published (its CAS failed, or an allocation
 *      failed while building it) is released at once: no reader has seen it.
 *  R3. A node whose count reaches zero frees itself and releases its own
 *      references at once: its count reached zero through R1 releases, so it
 *      was unreachable for every open section, and so is everything reachable
 *      only through it.
 *  R4. Taking a reference (node_retain) happens only on a node reachable from
 *      something the taker loaded in its open section, whose owner's deferred
 *      release cannot run before the section closes: counts never rise from 0.
 *  R5. At a GCAS the I-node's reference to the old main moves into the new
 *      main's prev; the committer releases it (R1), or a rollback moves it back
 *      into the I-node and retires the failed main instead.
 *  R6. Transfer copies.  Copying a C-node retains each child it keeps, and the
 *      old C-node's death releases them again: two touches of every child's
 *      cache line per update, a third of an update's cache misses.  So when an
 *      update copies a C-node `cn` that owns all its children (xfer ==
 *      XFER_ALL) and that only its I-node refers to (rc == 1), the copy
 *      borrows the children instead (no retains): it owns only the child it
 *      adds (xfer = that index, or XFER_NONE).  If its GCAS commits, the copy
 *      becomes the owner of everything (xfer = XFER_ALL) and `cn` keeps only
 *      the child the copy dropped (xfer = xfer_old), both set by the initiator
 *      before its section ends, so before `cn` can die.  If the GCAS fails or
 *      is rolled back, the copy dies owning only its own new child.  No one
 *      can take a reference to `cn` after such a commit: a main node is
 *      retained only by a renewal (inode_copy) or a snapshot, and both mean a
 *      new generation, which makes the commit fail (gcas_commit case 4); an
 *      RDCSS that retained `cn` as its expected main aborts once the root's
 *      main moved.  Sharing that existed before (a snapshot's I-node or a
 *      renewed copy holding `cn`) shows as rc >= 2, since the share was
 *      published before the update reached `cn` through acquire loads.
 *      A copy that is not committed yet (xfer != XFER_ALL) is copied the
 *      ordinary way.  Whether a node is a transfer copy is read from
 *      xfer_old, written once when it is made, never from xfer: by the time
 *      its initiator runs transfer_done, a later transfer copy of it may
 *      already have set its xfer (the torture test found that one).
 */
#include <pthread.h>
#include "tls.h"
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

/* Sentinels of the update functions (unique, never a valid result):
 * RESTART - start again from the root (a GCAS failed or a path was renewed);
 * DESCEND - go on at the I-node in upd.next (one hash level or one topic
 *           level down): the driver (update_walk) pushes it on its path;
 * AGAIN   - run the same I-node again (its branch was renewed). */
#define RESTART (-1000)
#define DESCEND (-1001)
#define AGAIN (-1002)

static _Atomic uint64_t generation_counter;

uint64_t new_gen(void)
{
    /* relaxed: generations need only be unique, not ordered with other data. */
    return atomic_fetch_add_explicit(&generation_counter, 1, memory_order_relaxed) + 1;
}

/* ------------------------------------------------------------------------
 * Atomic accessors.  Each names the reordering it forbids.
 * ---------------------------------------------------------------------- */

static inline mainnode *load_main(inode *in)
{
    /* seq_cst: GCAS reads main after its CAS on prev and the root (gcas_read
     * in internal.h); also acquire: the main node's fields are visible. */
    return atomic_load_explicit(&in->main, memory_order_seq_cst);
}

static inline int cas_main(inode *in, mainnode *expected, mainnode *desired)
{
    /* seq_cst: publishes the fully initialised new main (release) and is
     * ordered before the following root read of gcas_commit (StoreLoad). */
    return atomic_compare_exchange_strong_explicit(&in->main, &expected, desired,
                                                   memory_order_seq_cst,
                                                   memory_order_seq_cst);
}

static inline uintptr_t load_prev(mainnode *m)
{
    /* seq_cst: the commit decision reads prev, then the root, then CASes prev. */
    return atomic_load_explicit(&m->prev, memory_order_seq_cst);
}

static inline int cas_prev(mainnode *m, uintptr_t expected, uintptr_t desired)
{
    /* seq_cst: a commit or failure mark must not be reordered with the root
     * generation read that justified it. */
    return atomic_compare_exchange_strong_explicit(&m->prev, &expected, desired,
                                                   memory_order_seq_cst,
                                                   memory_order_seq_cst);
}

static inline uintptr_t load_root(cst_trie *t)
{
    /* seq_cst: the root read of GCAS commit must not move before its CAS. */
    return atomic_load_explicit(&t->root, memory_order_seq_cst);
}

static inline int cas_root(cst_trie *t, uintptr_t expected, uintptr_t desired)
{
    /* seq_cst: RDCSS swings the root after reading the old root's main. */
    return atomic_compare_exchange_strong_explicit(&t->root, &expected, desired,
                                                   memory_order_seq_cst,
                                                   memory_order_seq_cst);
}

/* ------------------------------------------------------------------------
 * Node lifecycle
 * ---------------------------------------------------------------------- */

typedef struct rdcss_desc rdcss_desc;

struct rdcss_desc {
    cst_hdr h;
    inode *ov;                 /* owned: the root's old I-node */
    mainnode *expmain;         /* compared only */
    inode *nv;                 /* owned: the proposed new root */
    _Atomic int state;         /* DESC_UNDECIDED, DESC_COMMITTED, DESC_ABORTED */
};

static void *dead_link(cst_hdr *h)
{
    switch (h->kind) {
    case K_INODE: return &((inode *)h)->gen;
    case K_CNODE:
    case K_TNODE:
    case K_LNODE: return &((mainnode *)h)->prev;
    case K_SNODE: return &((snode *)h)->hash;
    case K_DESC: return &((rdcss_desc *)h)->ov;
    default: abort();
    }
}

enum { DESC_UNDECIDED = 0, DESC_COMMITTED = 1, DESC_ABORTED = 2 };

void node_retain(cst_hdr *h)
{
    /* relaxed: a reference is taken only while another is held (R4). */
    atomic_fetch_add_explicit(&h->rc, 1, memory_order_relaxed);
}

static size_t lnode_size(uint32_t n) { return sizeof(lnode) + n * sizeof(snode *); }

/* Request the lines of a C-node's n children for writing, before a loop that
 * retains or releases each: a locked increment waits for its line, so
 * without this a copy of a 64-way C-node after a snapshot (no transfer, R6)
 * or the death of one waits for up to 64 misses one after another. */
static inline void prefetch_children(cst_hdr *const *a, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        __builtin_prefetch(a[i], 1);
}

/*
 * Destruction is iterative: a node whose count reaches zero is pushed on a
 * per-thread list of dead nodes, linked through a field that destruction no
 * longer reads (dead_link), and only the outermost node_release frees them,
 * one at a time.  Freeing a chain of 65,535 topic levels (I-node, C-node,
 * S-node, ... each holding the next) so needs no C stack and no allocation.
 */
static CST_TLS cst_hdr *dead_head;
static CST_TLS int dead_draining;

/* The address of the pointer-sized field of a dead node that carries the
 * list link: one its destruction does not read (gen, prev, hash, ov). */
static void *dead_link(cst_hdr *h);

static void dead_push(cst_hdr *h)
{
    memcpy(dead_link(h), &dead_head, sizeof dead_head);
    dead_head = h;
}

static cst_hdr *dead_pop(void)
{
    cst_hdr *h = dead_head;
    memcpy(&dead_head, dead_link(h), sizeof dead_head);
    return h;
}

static size_t inode_bytes(const inode *in)
{
    return in->h.b3 & HDR_PADDED ? CST_INODE_PADDED_BYTES : sizeof *in;
}

/* Free one dead node; its references go to node_release (and so, when they
 * were the last, onto the dead list). */
static void node_destroy(cst_hdr *h)
{
    switch (h->kind) {
    case K_INODE: {
        inode *in = (inode *)h;
        node_release(&atomic_load_explicit(&in->main, memory_order_relaxed)->h);
        node_free(&in->h, inode_bytes(in));
        break;
    }
    case K_CNODE: {
        /* prev is never an owned reference at this point (R5); xfer says
         * which children it still holds (R6). */
        cnode *cn = (cnode *)h;
        int32_t x = atomic_load_explicit(&cn_tail(cn)->xfer, memory_order_acquire);
        if (x == XFER_ALL) {
            prefetch_children(cn->array, cn->n);
            for (uint32_t i = 0; i < cn->n; i++)
                node_release(cn->array[i]);
        } else if (x >= 0) {
            node_release(cn->array[x]);
        }
        node_free(&cn->m.h, cnode_size(cn->n));
        break;
    }
    case K_TNODE: {
        tnode *tn = (tnode *)h;
        if (tn->sn)
            node_release(&tn->sn->h);
        node_free(&tn->m.h, sizeof *tn);
        break;
    }
    case K_LNODE: {
        lnode *ln = (lnode *)h;
        for (uint32_t i = 0; i < ln->n; i++)
            node_release(&ln->sn[i]->h);
        node_free(&ln->m.h, lnode_size(ln->n));
        break;
    }
    case K_SNODE: {
        snode *sn = (snode *)h;
        if (sn->child)
            node_release(&sn->child->h);
        if (sn->nsubs > SUBS_INLINE)
            set_release(sn->set); /* recursion bounded by the set's 13 levels */
        node_free(&sn->h, snode_size(sn->wlen, sn->nsubs));
        break;
    }
    case K_DESC:
        /* The descriptor's references were handed on by the CAS winner. */
        node_free(h, sizeof(rdcss_desc));
        break;
    default:
        abort();
    }
}

void node_release(cst_hdr *h)
{
    /* acq_rel: the final release sees all writes to the node (acquire) and
     * every earlier use of it happens before the free (release). */
    if (atomic_fetch_sub_explicit(&h->rc, 1, memory_order_acq_rel) != 1)
        return;
    dead_push(h);
    if (dead_draining)
        return; /* an outer node_release on this thread frees it */
    dead_draining = 1;
    while (dead_head != NULL)
        node_destroy(dead_pop());
    dead_draining = 0;
}

static void release_cb(void *p) { node_release(p); }

void retire(ctx *c, cst_hdr *h)
{
    if (c->prompt)
        ebr_retire_prompt(c->rec, h, release_cb);
    else
        ebr_retire(c->rec, h, release_cb);
}

/* Memory for a node of the given kind with its header set (one reference):
 * from the thread's node block while a bulk build carves, else cst_alloc. */
static void *node_alloc(size_t size, uint8_t kind)
{
    int in_block;
    cst_hdr *h = cst_block_alloc(size, &in_block);
    if (h == NULL)
        return NULL;
    atomic_init(&h->rc, 1);
    h->kind = kind;
    h->b1 = h->b2 = 0;
    h->b3 = in_block ? HDR_IN_BLOCK : 0;
    return h;
}

void node_free(cst_hdr *h, size_t size)
{
    if (h->b3 & HDR_IN_BLOCK)
        cst_block_free(h, size);
    else
        cst_dealloc(h, size);
}

inode *inode_new(uint64_t gen, mainnode *main, int padded)
{
    inode *in = node_alloc(padded ? CST_INODE_PADDED_BYTES : sizeof *in, K_INODE);
    if (in == NULL)
        return NULL;
    if (padded)
        in->h.b3 |= HDR_PADDED;
    in->gen = gen;
    atomic_init(&in->main, main);
    return in;
}

cnode *cnode_alloc(uint32_t n, unsigned lev, uint64_t gen)
{
    cnode *cn = node_alloc(cnode_size(n), K_CNODE);
    if (cn == NULL)
        return NULL;
    cn->m.h.b1 = (uint8_t)lev;
    atomic_init(&cn->m.prev, 0);
    cn->bitmap = 0;
    cn->n = n;
    cnode_tail *tl = cn_tail(cn);
    tl->gen = gen;
    atomic_init(&tl->cached_pairs, -1);
    atomic_init(&tl->xfer, XFER_ALL);
    tl->xfer_old = XFER_ALL; /* not a transfer copy */
    return cn;
}

static tnode *tnode_new(snode *sn)
{
    tnode *tn = node_alloc(sizeof *tn, K_TNODE);
    if (tn == NULL)
        return NULL;
    atomic_init(&tn->m.prev, 0);
    tn->sn = sn;
    return tn;
}

lnode *lnode_alloc(uint32_t n)
{
    lnode *ln = node_alloc(lnode_size(n), K_LNODE);
    if (ln == NULL)
        return NULL;
    atomic_init(&ln->m.prev, 0);
    ln->n = n;
    return ln;
}

/* A new S-node for word w (see internal.h: ids copied, set and child taken over). */
snode *snode_make(const char *p, uint32_t wlen, uint8_t kind, uint64_t hash, uint32_t nsubs,
                  const uint64_t *ids, setnode *set, inode *child)
{
    snode *sn = node_alloc(snode_size(wlen, nsubs), K_SNODE);
    if (sn == NULL)
        return NULL;
    sn->h.b1 = kind;
    sn->wlen = wlen;
    sn->nsubs = nsubs;
    sn->hash = hash;
    if (nsubs > SUBS_INLINE)
        sn->set = set;
    else
        sn->one = nsubs == 1 ? ids[0] : 0;
    sn->child = child;
    memcpy(sn->word, p, wlen);
    if (nsubs >= 2 && nsubs <= SUBS_INLINE)
        memcpy(sn->word + snode_ids_at(wlen), ids, (size_t)nsubs * sizeof(uint64_t));
    return sn;
}

/* A copy of sn with other subscribers and child (see snode_make). */
static snode *snode_with(const snode *sn, uint32_t nsubs, const uint64_t *ids, setnode *set,
                         inode *child)
{
    return snode_make(sn->word, sn->wlen, sn->h.b1, sn->hash, nsubs, ids, set, child);
}

/* A copy of sn with the same subscribers and `child` (whose reference is
 * taken over on success; on failure, NULL, and child is still the caller's). */
static snode *snode_with_child(const snode *sn, inode *child)
{
    int big = sn->nsubs > SUBS_INLINE;
    if (big)
        set_retain(sn->set);
    snode *nsn = snode_with(sn, sn->nsubs, snode_ids(sn), sn->set, child);
    if (nsn == NULL && big)
        set_release(sn->set);
    return nsn;
}

/* May an update copy main node m as a transfer copy (R6)? */
static int may_transfer(const mainnode *m)
{
    if (m->h.kind != K_CNODE)
        return 0;
    const cnode *cn = (const cnode *)m;
    /* acquire: see a share published before we reached m (R6), and the
     * initiator's xfer store of a committed transfer copy. */
    return atomic_load_explicit(&((mainnode *)m)->h.rc, memory_order_acquire) == 1 &&
           atomic_load_explicit(&cn_tail(cn)->xfer, memory_order_acquire) == XFER_ALL;
}

/*
 * A new C-node equal to cn except that the entry for `key` (a hash fragment,
 * or a spec slot when is_spec) becomes nb (NULL removes it).  nb's reference
 * is taken over; every other entry is retained, or, for a transfer copy
 * (R6), borrowed.
 */
static cnode *cn_with(const cnode *cn, uint64_t gen, int is_spec, unsigned key, cst_hdr *nb,
                      int transfer)
{
    cnmap bitmap = cn->bitmap;
    unsigned spec = cn->m.h.b2;
    cnmap bit = CN_BIT(key);
    int had = is_spec ? (spec & bit) != 0 : (bitmap & bit) != 0;
    if (is_spec)
        spec = (unsigned)(nb ? (spec | bit) : (spec & ~bit));
    else
        bitmap = nb ? (bitmap | bit) : (bitmap & ~bit);
    uint32_t n = (uint32_t)(popc_map(bitmap) + popc(spec));
    cnode *ncn = cnode_alloc(n, cn->m.h.b1, gen);
    if (ncn == NULL)
        return NULL;
    ncn->bitmap = bitmap;
    ncn->m.h.b2 = (uint8_t)spec;
    /* Position of the edited entry in the old and new arrays. */
    uint32_t pos = is_spec ? (uint32_t)popc(cn->m.h.b2 & (bit - 1))
                           : (uint32_t)(popc(cn->m.h.b2) + popc_map(cn->bitmap & (bit - 1)));
    uint32_t o = 0, w = 0;
    int32_t new_at = XFER_NONE;
    if (!transfer)
        prefetch_children(cn->array, cn->n);
    for (; o < cn->n; o++) {
        if (o == pos) {
            if (nb) {
                new_at = (int32_t)w;
                ncn->array[w++] = nb;
            }
            if (had)
                continue;
        }
        if (!transfer)
            node_retain(cn->array[o]);
        ncn->array[w++] = cn->array[o];
    }
    if (o == pos && nb && !had) {
        new_at = (int32_t)w;
        ncn->array[w++] = nb;
    }
    if (transfer) {
        atomic_init(&cn_tail(ncn)->xfer, new_at);
        cn_tail(ncn)->xfer_old = had ? (int32_t)pos : XFER_NONE;
    }
    return ncn;
}

/* Commit the transfer copy nm of m (R6): nm owns every child from now on, m
 * only the one nm dropped.  Called by the GCAS's initiator after it
 * committed, inside its section. */
static void transfer_done(mainnode *m, mainnode *nm)
{
    if (nm->h.kind != K_CNODE)
        return;
    cnode *ncn = (cnode *)nm;
    /* Decided by xfer_old, written once when ncn was made: ncn's xfer may
     * already name what a later transfer copy of ncn left it. */
    if (cn_tail(ncn)->xfer_old == XFER_ALL)
        return; /* an ordinary copy */
    /* release: a thread that sees XFER_ALL and copies ncn by transfer, and
     * whoever frees m (after our section ends), see these stores. */
    atomic_store_explicit(&cn_tail(ncn)->xfer, XFER_ALL, memory_order_release);
    atomic_store_explicit(&cn_tail((cnode *)m)->xfer, cn_tail(ncn)->xfer_old,
                          memory_order_release);
}

static cnode *cn_empty(unsigned lev, uint64_t gen) { return cnode_alloc(0, lev, gen); }

/* A hash-level-0 C-node holding only sn. */
static cnode *cn_single(snode *sn, uint64_t gen)
{
    cnode *cn = cnode_alloc(1, 0, gen);
    if (cn == NULL)
        return NULL;
    if (sn->h.b1 == W_LITERAL)
        cn->bitmap = CN_BIT(frag(sn->hash, 0));
    else
        cn->m.h.b2 = (uint8_t)(1u << (sn->h.b1 - 1));
    cn->array[0] = &sn->h;
    return cn;
}

/* ------------------------------------------------------------------------
 * GCAS and RDCSS
 * ---------------------------------------------------------------------- */

static inode *rdcss_read_root(ctx *c, int abort_pending);

mainnode *gcas_commit(ctx *c, inode *in, mainnode *m)
{
    for (;;) {
        uintptr_t p = load_prev(m);
        inode *r = rdcss_read_root(c, 1);
        if (p == 0)
            return m; /* case 1: committed */
        if (p & FAILED_BIT) {
            /* case 2: failed - roll the I-node back to the old main (R5). */
            mainnode *old = (mainnode *)(p & ~FAILED_BIT);
            if (cas_main(in, m, old)) {
                retire(c, &m->h);
                return old;
            }
            m = load_main(in);
            continue;
        }
        mainnode *pm = (mainnode *)p;
        if (r->gen == in->gen && !c->t->readonly) {
            /* case 3: same generation - commit and release the old main. */
            if (cas_prev(m, p, 0)) {
                retire(c, &pm->h);
                return m;
            }
            continue;
        }
        /* case 4: the generation changed (a snapshot was taken): fail it. */
        cas_prev(m, p, p | FAILED_BIT);
        m = load_main(in);
    }
}

/* gcas_read itself is inline in internal.h: lookups call it once per topic
 * level, and its common case (no GCAS pending) is two loads. */

/*
 * GCAS: replace in's main `old` by n if, when the change commits, the root is
 * still of in's generation.  Returns 1 when n is committed, 0 when it was not
 * installed (n is then released here: it was never published, R2) or was
 * rolled back (n was retired by the rollback).
 */
static void frozen_drop(ctx *c);

static int gcas(ctx *c, inode *in, mainnode *old, mainnode *n)
{
    _Atomic uint64_t *count = upd_stripe(c->t, c->stripe);
    /* relaxed: the raise needs only to come before cas_main, and cas_main is
     * a release - a walk that reads n (acquire) reads this raise with its
     * closing read of the count (match.c, walk_topic). */
    atomic_fetch_add_explicit(count, UPD_BEGIN, memory_order_relaxed);
    int done = 0;
    atomic_store_explicit(&n->prev, (uintptr_t)old, memory_order_relaxed);
    if (cas_main(in, old, n)) {
        gcas_commit(c, in, n);
        done = load_prev(n) == 0;
    } else {
        atomic_store_explicit(&n->prev, 0, memory_order_relaxed);
        node_release(&n->h);
    }
    /* release: forbids moving the CAS (and the commit) after the end mark, so
     * a walk that reads "nothing in flight" (acquire) also reads the new main. */
    atomic_fetch_add_explicit(count, UPD_END, memory_order_release);
    /* The root's main changed: the frozen root no longer equals the trie. */
    if (done && atomic_load_explicit(&c->t->frozen, memory_order_relaxed) != NULL &&
        (uintptr_t)in == atomic_load_explicit(&c->t->root, memory_order_relaxed))
        frozen_drop(c);
    return done;
}

static inode *rdcss_complete(ctx *c, int abort_pending)
{
    for (;;) {
        uintptr_t v = load_root(c->t);
        if (!(v & ROOT_DESC_BIT))
            return (inode *)v;
        rdcss_desc *d = (rdcss_desc *)(v & ~ROOT_DESC_BIT);
        /* seq_cst: the decision is read after the root that held d. */
        int s = atomic_load_explicit(&d->state, memory_order_seq_cst);
        if (s == DESC_UNDECIDED) {
            int want = DESC_ABORTED;
            if (!abort_pending && gcas_read(c, d->ov) == d->expmain)
                want = DESC_COMMITTED;
            int expected = DESC_UNDECIDED;
            /* seq_cst: the decision is ordered after the read of ov's main. */
            atomic_compare_exchange_strong_explicit(&d->state, &expected, want,
                                                    memory_order_seq_cst,
                                                    memory_order_seq_cst);
            s = atomic_load_explicit(&d->state, memory_order_seq_cst);
        }
        inode *target = s == DESC_COMMITTED ? d->nv : d->ov;
        if (cas_root(c->t, v, (uintptr_t)target)) {
            /* The winner hands the root's reference to target and drops the
             * other one and the descriptor (R1). */
            retire(c, s == DESC_COMMITTED ? &d->ov->h : &d->nv->h);
            retire(c, &d->h);
            return target;
        }
    }
}

static inode *rdcss_read_root(ctx *c, int abort_pending)
{
    uintptr_t v = load_root(c->t);
    if (!(v & ROOT_DESC_BIT))
        return (inode *)v;
    return rdcss_complete(c, abort_pending);
}

inode *root_read(ctx *c) { return rdcss_read_root(c, 0); }

/* 1 = the root moved from ov to nv; 0 = it did not (nv released); < 0 error. */
static int rdcss_root(ctx *c, inode *ov, mainnode *expmain, inode *nv)
{
    rdcss_desc *d = node_alloc(sizeof *d, K_DESC);
    if (d == NULL) {
        node_release(&nv->h);
        return CST_ENOMEM;
    }
    d->ov = ov;
    d->expmain = expmain;
    d->nv = nv;
    atomic_init(&d->state, DESC_UNDECIDED);
    if (!cas_root(c->t, (uintptr_t)ov, (uintptr_t)d | ROOT_DESC_BIT)) {
        node_free(&d->h, sizeof *d);
        node_release(&nv->h);
        return 0;
    }
    rdcss_complete(c, 0);
    return atomic_load_explicit(&d->state, memory_order_seq_cst) == DESC_COMMITTED;
}

/* ------------------------------------------------------------------------
 * Contexts
 * ---------------------------------------------------------------------- */

int ctx_enter(ctx *c, cst_trie *t)
{
    c->t = t;
    c->prompt = 0;
    c->stripe = UPD_GLOBAL;
    c->rec = ebr_enter();
    return c->rec ? 0 : CST_ENOMEM;
}

void ctx_exit(ctx *c) { ebr_exit(c->rec); }

/* ------------------------------------------------------------------------
 * Building blocks of updates
 * ---------------------------------------------------------------------- */

/* The S-node chain for words[k..last], the last one holding subscriber id. */
static snode *chain(const word *w, size_t k, size_t last, uint64_t id, uint64_t gen)
{
    snode *below = NULL;
    for (size_t i = last + 1; i-- > k;) {
        inode *child = NULL;
        if (below != NULL) {
            cnode *cn = cn_single(below, gen);
            if (cn == NULL) {
                node_release(&below->h);
                return NULL;
            }
            child = inode_new(gen, &cn->m, pad_level(i + 1));
            if (child == NULL) {
                node_release(&cn->m.h);
                return NULL;
            }
        }
        below = snode_make(w[i].p, w[i].len, w[i].kind, w[i].hash, i == last ? 1 : 0, &id,
                           NULL, child);
        if (below == NULL) {
            if (child)
                node_release(&child->h);
            return NULL;
        }
    }
    return below;
}

/* A main node holding a and b (different words) from hash level lev down;
 * takes over both references.  Its I-nodes are padded if `padded`. */
static mainnode *dual(snode *a, snode *b, unsigned lev, uint64_t gen, int padded)
{
    if (lev > MAX_HASH_LEVEL) {
        lnode *ln = lnode_alloc(2);
        if (ln == NULL)
            goto fail;
        ln->sn[0] = a;
        ln->sn[1] = b;
        return &ln->m;
    }
    uint32_t fa = frag(a->hash, lev), fb = frag(b->hash, lev);
    if (fa != fb) {
        cnode *cn = cnode_alloc(2, lev, gen);
        if (cn == NULL)
            goto fail;
        cn->bitmap = CN_BIT(fa) | CN_BIT(fb);
        cn->array[0] = fa < fb ? &a->h : &b->h;
        cn->array[1] = fa < fb ? &b->h : &a->h;
        return &cn->m;
    }
    mainnode *sub = dual(a, b, lev + CN_BITS, gen, padded);
    if (sub == NULL)
        return NULL;
    inode *in = inode_new(gen, sub, padded);
    if (in == NULL) {
        node_release(&sub->h);
        return NULL;
    }
    cnode *cn = cnode_alloc(1, lev, gen);
    if (cn == NULL) {
        node_release(&in->h);
        return NULL;
    }
    cn->bitmap = CN_BIT(fa);
    cn->array[0] = &in->h;
    return &cn->m;
fail:
    node_release(&a->h);
    node_release(&b->h);
    return NULL;
}

/* A copy of I-node `in` in generation gen (its committed main is shared). */
static inode *inode_copy(ctx *c, inode *in, uint64_t gen)
{
    mainnode *m = gcas_read(c, in);
    node_retain(&m->h);
    inode *cp = inode_new(gen, m, (in->h.b3 & HDR_PADDED) != 0);
    if (cp == NULL)
        node_release(&m->h);
    return cp;
}

/* A copy of ln with S-node i replaced by sn (NULL removes it). */
static lnode *ln_with(const lnode *ln, uint32_t i, snode *sn)
{
    uint32_t n = ln->n + (i == ln->n ? 1 : 0) - (sn == NULL ? 1 : 0);
    lnode *nl = lnode_alloc(n);
    if (nl == NULL)
        return NULL;
    uint32_t w = 0;
    for (uint32_t o = 0; o < ln->n; o++) {
        if (o == i) {
            if (sn)
                nl->sn[w++] = sn;
            continue;
        }
        node_retain(&ln->sn[o]->h);
        nl->sn[w++] = ln->sn[o];
    }
    if (i == ln->n)
        nl->sn[w++] = sn;
    return nl;
}

/*
 * to_contracted: the form a main node should take after a removal.  Below the
 * top of a topic level (lev > 0) a C-node with no branches, or only one
 * S-node, is entombed so that the parent can pull the S-node up; the top of a
 * topic level is entombed only when empty and when it is not the trie root.
 * Takes over m's reference; returns m itself or a new T-node (NULL: no memory).
 */
static mainnode *to_contracted(mainnode *m, unsigned lev, int is_trie_root)
{
    snode *keep = NULL;
    if (m->h.kind == K_CNODE) {
        cnode *cn = (cnode *)m;
        if (lev > 0) {
            if (cn->n > 1 || (cn->n == 1 && cn->array[0]->kind != K_SNODE))
                return m;
            keep = cn->n ? (snode *)cn->array[0] : NULL;
        } else if (cn->n > 0 || is_trie_root) {
            return m;
        }
    } else if (m->h.kind == K_LNODE) {
        lnode *ln = (lnode *)m;
        if (ln->n > 1)
            return m;
        keep = ln->n ? ln->sn[0] : NULL;
    } else {
        return m;
    }
    if (keep)
        node_retain(&keep->h);
    tnode *tn = tnode_new(keep);
    if (tn == NULL) {
        if (keep)
            node_release(&keep->h);
        node_release(&m->h);
        return NULL;
    }
    node_release(&m->h); /* never published (R2) */
    return &tn->m;
}

/*
 * The resurrection of branch b: NULL when b is still what it should be, or
 * *repl set to what should replace it (possibly NULL = drop the branch):
 * an I-node whose main is a T-node gives way to the entombed S-node; an
 * S-node whose next topic level is entombed loses its child, or disappears
 * when it has no subscribers.  Returns -1 on no memory, 1 if a change.
 */
static int resurrect(ctx *c, cst_hdr *b, cst_hdr **repl)
{
    if (b->kind == K_INODE) {
        mainnode *m = gcas_read(c, (inode *)b);
        if (m->h.kind != K_TNODE)
            return 0;
        snode *sn = ((tnode *)m)->sn;
        if (sn)
            node_retain(&sn->h);
        *repl = sn ? &sn->h : NULL;
        return 1;
    }
    snode *sn = (snode *)b;
    if (sn->child == NULL || gcas_read(c, sn->child)->h.kind != K_TNODE)
        return 0;
    if (sn->nsubs == 0) {
        *repl = NULL;
        return 1;
    }
    snode *nsn = snode_with_child(sn, NULL);
    if (nsn == NULL)
        return -1;
    *repl = &nsn->h;
    return 1;
}

/* Where a word's S-node sits inside a main node. */
typedef struct slot {
    int in_lnode;
    int is_spec;
    unsigned key;              /* hash fragment, spec slot, or L-node index */
} slot;

/* A new main equal to m with the S-node at `at` replaced by nb (NULL drops);
 * a transfer copy (R6) when `transfer` and m allows it. */
static mainnode *main_with(const mainnode *m, const slot *at, uint64_t gen, cst_hdr *nb,
                           int transfer)
{
    if (at->in_lnode)
        return (mainnode *)ln_with((const lnode *)m, at->key, (snode *)nb);
    return (mainnode *)cn_with((const cnode *)m, gen, at->is_spec, at->key, nb,
                               transfer && may_transfer(m));
}

/* The number of branches of a C-node or L-node. */
static uint32_t entry_count(const mainnode *m)
{
    return m->h.kind == K_CNODE ? ((const cnode *)m)->n : ((const lnode *)m)->n;
}

/* Branch i of a C-node or L-node, and the slot it sits in. */
static cst_hdr *entry_at(const mainnode *m, uint32_t i, slot *at)
{
    if (m->h.kind == K_LNODE) {
        *at = (slot){1, 0, i};
        return &((const lnode *)m)->sn[i]->h;
    }
    const cnode *cn = (const cnode *)m;
    uint32_t ns = (uint32_t)popc(cn->m.h.b2); /* the spec slots come first */
    cnmap bits = i < ns ? cn->m.h.b2 : cn->bitmap;
    uint32_t rank = i < ns ? i : i - ns;
    for (uint32_t r = 0; r < rank; r++)
        bits &= bits - 1; /* drop the lowest set bit */
    *at = (slot){0, i < ns, (unsigned)__builtin_ctzll(bits)};
    return cn->array[i];
}

/*
 * clean: compress the main node of `in` (resurrect entombed branches, drop
 * dead words, contract).  Best effort and lock-free: it retries only while
 * `in` is still of the trie's current generation.  Returns 1 when `in` is
 * clean (or not ours to clean), 0 when it gave up (the generation moved, or
 * 64 lost races), CST_ENOMEM when a copy could not be allocated.
 */
static int clean(ctx *c, inode *in, unsigned lev, int is_trie_root, uint64_t startgen)
{
    for (int attempt = 0; attempt < 64; attempt++) {
        mainnode *m = gcas_read(c, in);
        if (m->h.kind != K_CNODE && m->h.kind != K_LNODE)
            return 1;
        /* Descending, so that an L-node index still names the same word
         * after a later (higher) one was dropped. */
        mainnode *cur = NULL; /* the compressed copy, built lazily */
        for (uint32_t i = entry_count(m); i-- > 0;) {
            slot at;
            cst_hdr *repl = NULL;
            int r = resurrect(c, entry_at(m, i, &at), &repl);
            if (r == 0)
                continue;
            mainnode *next = r < 0 ? NULL : main_with(cur ? cur : m, &at, startgen, repl, 0);
            if (next == NULL) {
                if (repl)
                    node_release(repl);
                if (cur)
                    node_release(&cur->h);
                return CST_ENOMEM;
            }
            if (cur)
                node_release(&cur->h);
            cur = next;
        }
        if (cur == NULL)
            return 1;
        mainnode *nm = to_contracted(cur, lev, is_trie_root);
        if (nm == NULL)
            return CST_ENOMEM;
        if (gcas(c, in, m, nm))
            return 1;
        if (rdcss_read_root(c, 0)->gen != startgen)
            return 0;
    }
    return 0;
}

/* ------------------------------------------------------------------------
 * Subscribe and unsubscribe
 * ---------------------------------------------------------------------- */

/* One I-node on the path of an update: topic word k, hash level lev. */
typedef struct upd_frame {
    inode *in;
    size_t k;
    unsigned lev;
} upd_frame;

typedef struct upd {
    ctx *c;
    const word *w;
    size_t last;
    uint64_t id;
    uint64_t startgen;
    int insert;                /* 1 subscribe, 0 unsubscribe, UPD_PUT put */
    int touch;                 /* walk the path only: renew it and clean tombs */
    int dirty;                 /* a cleanup gave up: a tomb may be left behind */
    upd_frame next;            /* where a DESCEND goes on */
    uint64_t old;              /* UPD_PUT: the id replaced (when had) */
    int had;
} upd;

/* Publish a new main for `in`: 1/0 as the caller wants on success, RESTART on
 * failure.  nm == NULL means an allocation failed. */
static int publish(upd *u, inode *in, mainnode *m, mainnode *nm, int ok)
{
    if (nm == NULL)
        return CST_ENOMEM;
    if (!gcas(u->c, in, m, nm))
        return RESTART;
    transfer_done(m, nm);
    return ok;
}

/* The word of level k was found as S-node sn at `at` in main m of in. */
static int at_word(upd *u, inode *in, mainnode *m, const slot *at, snode *sn, size_t k,
                   unsigned lev, int in_is_root)
{
    uint64_t gen = u->startgen;
    if (k == u->last) {
        if (u->touch)
            return 0;
        int present = snode_has(sn, u->id);
        uint32_t n = sn->nsubs;
        if (u->insert == UPD_PUT) {
            /* case 4p: a topic index's put - the set becomes {id}, the id
             * replaced (an index topic holds at most one) is reported */
            if (n > 1)
                return CST_EINVAL; /* not a topic index's word */
            u->had = n == 1;
            u->old = n == 1 ? snode_ids(sn)[0] : 0;
            if (present)
                return 0;
            if (sn->child)
                node_retain(&sn->child->h);
            snode *nsn = snode_with(sn, 1, &u->id, NULL, sn->child);
            if (nsn == NULL) {
                if (sn->child)
                    node_release(&sn->child->h);
                return CST_ENOMEM;
            }
            mainnode *nm = main_with(m, at, gen, &nsn->h, 1);
            if (nm == NULL)
                node_release(&nsn->h);
            return publish(u, in, m, nm, n == 0);
        }
        if (u->insert) {
            if (present)
                return 0;
            /* case 4a: add the subscriber to this pattern's set (inline up
             * to SUBS_INLINE ids, then a CHAMP set) */
            uint64_t ids[SUBS_INLINE + 1];
            setnode *set = NULL;
            if (n <= SUBS_INLINE) {
                memcpy(ids, snode_ids(sn), (size_t)n * sizeof(uint64_t));
                ids[n] = u->id;
                if (n == SUBS_INLINE && (set = set_build(ids, n + 1)) == NULL)
                    return CST_ENOMEM;
            } else if (set_insert(sn->set, u->id, &set) < 0) {
                return CST_ENOMEM;
            }
            if (sn->child)
                node_retain(&sn->child->h);
            snode *nsn = snode_with(sn, n + 1, ids, set, sn->child);
            if (nsn == NULL) {
                if (set)
                    set_release(set);
                if (sn->child)
                    node_release(&sn->child->h);
                return CST_ENOMEM;
            }
            mainnode *nm = main_with(m, at, gen, &nsn->h, 1);
            if (nm == NULL)
                node_release(&nsn->h);
            return publish(u, in, m, nm, 1);
        }
        if (!present)
            return 0;
        /* case 4e: remove the subscriber; drop the word when nothing is left */
        snode *nsn = NULL;
        int child_dead = sn->child == NULL ||
                         gcas_read(u->c, sn->child)->h.kind == K_TNODE;
        if (!(n == 1 && child_dead)) {
            uint64_t ids[SUBS_INLINE + 1];
            setnode *set = NULL;
            if (n <= SUBS_INLINE + 1) {
                /* the rest fits inline */
                uint64_t all[SUBS_INLINE + 1];
                size_t got = snode_emit(sn, all), keep = 0;
                for (size_t i = 0; i < got; i++)
                    if (all[i] != u->id)
                        ids[keep++] = all[i];
            } else {
                uint64_t left;
                if (set_remove(sn->set, u->id, &set, &left, n) < 0)
                    return CST_ENOMEM;
            }
            inode *child = child_dead ? NULL : sn->child;
            if (child)
                node_retain(&child->h);
            nsn = snode_with(sn, n - 1, ids, set, child);
            if (nsn == NULL) {
                if (set)
                    set_release(set);
                if (child)
                    node_release(&child->h);
                return CST_ENOMEM;
            }
        }
        mainnode *nm = main_with(m, at, gen, nsn ? &nsn->h : NULL, 1);
        if (nm == NULL) {
            if (nsn)
                node_release(&nsn->h);
            return CST_ENOMEM;
        }
        nm = to_contracted(nm, lev, in_is_root);
        return publish(u, in, m, nm, 1);
    }
    inode *ch = sn->child;
    if (ch == NULL) {
        if (!u->insert)
            return 0;
        /* case 4b: extend the word with a chain for the remaining words */
        snode *tail = chain(u->w, k + 1, u->last, u->id, gen);
        if (tail == NULL)
            return CST_ENOMEM;
        cnode *lc = cn_single(tail, gen);
        if (lc == NULL) {
            node_release(&tail->h);
            return CST_ENOMEM;
        }
        inode *ni = inode_new(gen, &lc->m, pad_level(k + 1));
        if (ni == NULL) {
            node_release(&lc->m.h);
            return CST_ENOMEM;
        }
        snode *nsn = snode_with_child(sn, ni);
        if (nsn == NULL) {
            node_release(&ni->h);
            return CST_ENOMEM;
        }
        mainnode *nm = main_with(m, at, gen, &nsn->h, 1);
        if (nm == NULL)
            node_release(&nsn->h);
        return publish(u, in, m, nm, 1);
    }
    if (ch->gen != gen) {
        /* case 4c: renew the next topic level's I-node into our generation */
        inode *cp = inode_copy(u->c, ch, gen);
        if (cp == NULL)
            return CST_ENOMEM;
        snode *nsn = snode_with_child(sn, cp);
        if (nsn == NULL) {
            node_release(&cp->h);
            return CST_ENOMEM;
        }
        mainnode *nm = main_with(m, at, gen, &nsn->h, 1);
        if (nm == NULL) {
            node_release(&nsn->h);
            return CST_ENOMEM;
        }
        /* Renewed: run this I-node again, which now descends into the copy
         * (restarting from the root would make renewing a path of d levels
         * cost O(d^2)).  Not renewed: `in` changed or lost its generation. */
        if (!gcas(u->c, in, m, nm))
            return RESTART;
        transfer_done(m, nm);
        return AGAIN;
    }
    /* case 4d: descend into the next topic level */
    (void)in_is_root;
    u->next = (upd_frame){ch, k + 1, 0};
    return DESCEND;
}

/*
 * The update at I-node `in`: topic word k, hash level lev.  parent is the
 * I-node whose main holds the branch to `in` (NULL for the trie root).
 */
static int update_level(upd *u, inode *in, size_t k, unsigned lev, inode *parent,
                        unsigned plev, int parent_is_root)
{
    uint64_t gen = u->startgen;
    int in_is_root = parent == NULL;
    mainnode *m = gcas_read(u->c, in);
    const word *wk = &u->w[k];
    switch (m->h.kind) {
    case K_CNODE: {
        cnode *cn = (cnode *)m;
        slot at = {0, wk->kind != W_LITERAL, 0};
        cst_hdr *b;
        if (at.is_spec) {
            at.key = (unsigned)wk->kind - 1;
            b = spec_get(cn, at.key);
        } else {
            at.key = frag(wk->hash, lev);
            cnmap bit = CN_BIT(at.key);
            b = (cn->bitmap & bit) ? cn->array[popc(cn->m.h.b2) + popc_map(cn->bitmap & (bit - 1))]
                                   : NULL;
        }
        if (b == NULL) {
            if (!u->insert)
                return 0;
            /* case 1: a free slot - add the chain of the remaining words */
            snode *sn = chain(u->w, k, u->last, u->id, gen);
            if (sn == NULL)
                return CST_ENOMEM;
            cnode *ncn = cn_with(cn, gen, at.is_spec, at.key, &sn->h, may_transfer(m));
            if (ncn == NULL)
                node_release(&sn->h);
            return publish(u, in, m, ncn ? &ncn->m : NULL, 1);
        }
        if (b->kind == K_INODE) {
            inode *sub = (inode *)b;
            if (sub->gen == gen) {
                /* case 2: descend one hash level */
                u->next = (upd_frame){sub, k, lev + CN_BITS};
                return DESCEND;
            }
            /* case 2b: renew the branch into our generation, then retry */
            inode *cp = inode_copy(u->c, sub, gen);
            if (cp == NULL)
                return CST_ENOMEM;
            cnode *ncn = cn_with(cn, gen, 0, at.key, &cp->h, may_transfer(m));
            if (ncn == NULL) {
                node_release(&cp->h);
                return CST_ENOMEM;
            }
            if (!gcas(u->c, in, m, &ncn->m))
                return RESTART;
            transfer_done(m, &ncn->m);
            return AGAIN;
        }
        snode *sn = (snode *)b;
        if (!at.is_spec && !word_eq(sn, wk)) {
            if (!u->insert)
                return 0;
            /* case 3: another word shares this hash fragment: go one level down */
            snode *nsn = chain(u->w, k, u->last, u->id, gen);
            if (nsn == NULL)
                return CST_ENOMEM;
            node_retain(&sn->h);
            mainnode *d = dual(sn, nsn, lev + CN_BITS, gen, pad_level(k));
            if (d == NULL)
                return CST_ENOMEM;
            inode *ni = inode_new(gen, d, pad_level(k));
            if (ni == NULL) {
                node_release(&d->h);
                return CST_ENOMEM;
            }
            cnode *ncn = cn_with(cn, gen, 0, at.key, &ni->h, may_transfer(m));
            if (ncn == NULL)
                node_release(&ni->h);
            return publish(u, in, m, ncn ? &ncn->m : NULL, 1);
        }
        return at_word(u, in, m, &at, sn, k, lev, in_is_root);
    }
    case K_TNODE:
        /* case 5: a tomb - help compress the parent, then restart.  If the
         * tomb cannot be cleaned for want of memory, the update cannot get
         * past it: restarting would meet it again forever, so fail (nothing
         * but renewals has happened). */
        if (parent != NULL && clean(u->c, parent, plev, parent_is_root, gen) == CST_ENOMEM)
            return CST_ENOMEM;
        return RESTART;
    case K_LNODE: {
        /* case 6: full-hash collisions - a list of S-nodes */
        lnode *ln = (lnode *)m;
        for (uint32_t i = 0; i < ln->n; i++) {
            if (word_eq(ln->sn[i], wk)) {
                slot at = {1, 0, i};
                return at_word(u, in, m, &at, ln->sn[i], k, lev, in_is_root);
            }
        }
        if (!u->insert)
            return 0;
        snode *sn = chain(u->w, k, u->last, u->id, gen);
        if (sn == NULL)
            return CST_ENOMEM;
        lnode *nl = ln_with(ln, ln->n, sn);
        if (nl == NULL)
            node_release(&sn->h);
        return publish(u, in, m, nl ? &nl->m : NULL, 1);
    }
    default:
        abort();
    }
}

/*
 * One attempt of an update from the root: update_level at each I-node of the
 * path, which grows on the heap (scratch), never on the C stack.  When the
 * change is a removal that committed (1), each level then, deepest first,
 * cleans its I-node if the child it descended into became a tomb (the
 * paper's cleanParent on the way back up).
 */
static int update_walk(upd *u, inode *root, scratch *sc)
{
    if (scratch_reserve((void **)&sc->upath, &sc->upathcap, 1, sizeof(upd_frame)) < 0)
        return CST_ENOMEM;
    upd_frame *path = sc->upath;
    size_t top = 0;
    path[0] = (upd_frame){root, 0, 0};
    int r;
    for (;;) {
        inode *parent = top ? path[top - 1].in : NULL;
        unsigned plev = top ? path[top - 1].lev : 0;
        r = update_level(u, path[top].in, path[top].k, path[top].lev, parent, plev, top == 1);
        if (r == AGAIN)
            continue;
        if (r != DESCEND)
            break;
        /* the check inline: once per level descended, and the call cost
         * more than it (~40 instructions a level, 50k IoT pairs) */
        if (top + 2 > sc->upathcap &&
            scratch_reserve((void **)&sc->upath, &sc->upathcap, top + 2, sizeof(upd_frame)) < 0) {
            r = CST_ENOMEM; /* only renewals happened so far: nothing changed */
            break;
        }
        path = sc->upath;
        path[++top] = u->next;
    }
    if (r == 1 && !u->insert) {
        for (size_t d = top; d-- > 0;) {
            if (gcas_read(u->c, path[d + 1].in)->h.kind == K_TNODE &&
                clean(u->c, path[d].in, path[d].lev, d == 0, u->startgen) != 1)
                u->dirty = 1;
        }
    }
    return r;
}

/* The update of the n words in sc->w (parsed and validated). */
static int update_words(cst_trie *t, scratch *sc, int64_t n, uint64_t sub, int insert,
                        uint64_t *old)
{
    ctx c;
    if (ctx_enter(&c, t) < 0)
        return CST_ENOMEM;
    c.stripe = upd_stripe_of(sc->w, n);
    upd u = {&c, sc->w, (size_t)n - 1, sub, 0, insert, 0, 0, {NULL, 0, 0}, 0, 0};
    int r;
    do {
        inode *root = root_read(&c);
        u.startgen = root->gen;
        u.had = 0;
        r = update_walk(&u, root, sc);
    } while (r == RESTART);
    if (old != NULL && r >= 0)
        *old = u.had ? u.old : 0;
    if (r > 0) /* relaxed: a size estimate, nothing is ordered by it */
        atomic_fetch_add_explicit(upd_pairs(t, c.stripe), insert ? 1 : -1, memory_order_relaxed);
    if (u.dirty) {
        /* A cleanup gave up (a snapshot moved the generation, or memory ran
         * out): walk the same path again in the current generation, which
         * renews it and cleans every tomb on it (case 5), changing nothing
         * else.  Bounded: a failure here leaves the tomb to the next writer
         * or to cst_compact. */
        u.touch = 1;
        for (int attempt = 0; attempt < 64; attempt++) {
            inode *root = root_read(&c);
            u.startgen = root->gen;
            if (update_walk(&u, root, sc) != RESTART)
                break;
        }
    }
    ctx_exit(&c);
    return r;
}

/* The cache's writer steps around a change of the trie (cache.c, W1-W4):
 * count in, `kill` (the entries of the cached topics a filter matches, or
 * every entry), run `call`, count out.  The cache is read inside an epoch
 * section that lasts past the change (cache.c, "A new cache"); `fail` is
 * returned when the section cannot be opened.  Returns call's result. */
#define CACHED(t, type, fail, kill, call)                                               \
    do {                                                                                \
        ebr_record *rec_ = ebr_enter();                                                 \
        if (rec_ == NULL)                                                               \
            return (fail);                                                              \
        /* seq_cst: ordered with cst_cache_set's publication */                          \
        cst_cache *k_ = atomic_load_explicit(&(t)->cache, memory_order_seq_cst);       \
        type r_;                                                                        \
        if (k_ == NULL) {                                                               \
            r_ = (call);                                                                \
        } else {                                                                        \
            cache_write_begin(k_);                                                      \
            kill;                                                                       \
            r_ = (call);                                                                \
            cache_write_end(k_);                                                        \
        }                                                                               \
        ebr_exit(rec_);                                                                 \
        return r_;                                                                      \
    } while (0)

/* update_words for the other files (internal.h): the topic index's put and
 * remove.  An entry of its own, so that trie.c's calls stay direct calls of
 * a static function. */
int words_update(cst_trie *t, scratch *sc, int64_t n, uint64_t sub, int insert, uint64_t *old)
{
    /* a topic-index write on a handle with a cache (a subscription trie used
     * as an index): every entry dies first */
    CACHED(t, int, CST_ENOMEM, cache_invalidate_all(k_),
           update_words(t, sc, n, sub, insert, old));
}

static int update_uncached(cst_trie *t, const char *pattern, size_t len, uint64_t sub, int insert)
{
    scratch *sc = scratch_get();
    if (sc == NULL)
        return CST_ENOMEM;
    int64_t n = parse_words(t, pattern, len, 1, sc);
    if (n < 0)
        return (int)n;
    return update_words(t, sc, n, sub, insert, NULL);
}

/* An update of filter (pattern, len): the entries it may change die first.
 * A pattern the query rejects changes nothing. */
#define CACHED_WRITE(t, pattern, len, call)                                             \
    CACHED(t, int, CST_ENOMEM, cache_invalidate(k_, (pattern), (len)), call)

static int update(cst_trie *t, const char *pattern, size_t len, uint64_t sub, int insert)
{
    if (t->readonly)
        return CST_EREADONLY;
    CACHED_WRITE(t, pattern, len, update_uncached(t, pattern, len, sub, insert));
}

int cst_subscribe(cst_trie *t, const char *pattern, size_t len, uint64_t sub)
{
    return update(t, pattern, len, sub, 1);
}

int cst_unsubscribe(cst_trie *t, const char *pattern, size_t len, uint64_t sub)
{
    return update(t, pattern, len, sub, 0);
}

int64_t share_words(cst_trie *t, const char *pattern, size_t len, uint64_t share,
                    char idbuf[SHARE_ID_BYTES], scratch *sc)
{
    if (share == 0)
        return CST_EINVAL;
    int64_t n = parse_words(t, pattern, len, 1, sc);
    if (n < 0)
        return n;
    if (scratch_reserve((void **)&sc->w, &sc->wcap, (size_t)n + 2, sizeof(word)) < 0)
        return CST_ENOMEM;
    share_id_write(idbuf, share);
    sc->w[n] = (word){.p = idbuf, .len = 0, .kind = W_SHARE, .hash = 0};
    sc->w[n + 1] = (word){.p = idbuf,
                          .len = SHARE_ID_BYTES,
                          .kind = W_LITERAL,
                          .hash = word_hash(idbuf, SHARE_ID_BYTES)};
    return n + 2;
}

/* Join (insert) or leave group `share` on pattern as subscriber sub: the
 * pair (pattern + marker + group word, sub), one ordinary update. */
static int share_update_uncached(cst_trie *t, const char *pattern, size_t len, uint64_t share,
                                 uint64_t sub, int insert)
{
    scratch *sc = scratch_get();
    if (sc == NULL)
        return CST_ENOMEM;
    char idbuf[SHARE_ID_BYTES];
    int64_t n = share_words(t, pattern, len, share, idbuf, sc);
    if (n < 0)
        return (int)n;
    return update_words(t, sc, n, sub, insert, NULL);
}

static int share_update(cst_trie *t, const char *pattern, size_t len, uint64_t share,
                        uint64_t sub, int insert)
{
    if (t->readonly)
        return CST_EREADONLY;
    CACHED_WRITE(t, pattern, len, share_update_uncached(t, pattern, len, share, sub, insert));
}

int cst_share_subscribe(cst_trie *t, const char *pattern, size_t len, uint64_t share,
                        uint64_t sub)
{
    return share_update(t, pattern, len, share, sub, 1);
}

int cst_share_unsubscribe(cst_trie *t, const char *pattern, size_t len, uint64_t share,
                          uint64_t sub)
{
    return share_update(t, pattern, len, share, sub, 0);
}

int64_t cst_subscribe_batch(cst_trie *t, const char *data, const int64_t *offsets,
                            const uint64_t *ids, int64_t n, uint8_t *results,
                            int64_t *added, int *status)
{
    *added = 0;
    *status = CST_OK;
    for (int64_t i = 0; i < n; i++) {
        int r = update(t, data + offsets[i], (size_t)(offsets[i + 1] - offsets[i]), ids[i], 1);
        if (r < 0) {
            *status = r;
            return i;
        }
        if (results)
            results[i] = (uint8_t)r;
        *added += r;
    }
    return n;
}

/* ------------------------------------------------------------------------
 * Handles, snapshots, clear
 * ---------------------------------------------------------------------- */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static void engine_init(void) { words_seed_init(); }

cst_trie *handle_new(const cst_dialect *d, inode *root, int readonly, const uint8_t *bytecls)
{
    /* 64-byte aligned: the lookup counters have lines of their own */
    void *block = cst_alloc(sizeof(cst_trie) + CST_SPACING - 1);
    if (block == NULL)
        return NULL;
    cst_trie *t = (cst_trie *)(((uintptr_t)block + CST_SPACING - 1) & ~(uintptr_t)(CST_SPACING - 1));
    /* Everything but the lookup stripes: of those only each stripe's first
     * word is ever read or written (initialised below), and the rest is
     * padding.  Every snapshot makes a handle, and zeroing 2 KiB of padding
     * would cost about a third of it. */
    memset(t, 0, offsetof(cst_trie, lookups));
    t->block = block;
    static _Atomic uint64_t serials;
    /* relaxed: a number, unique by the RMW alone */
    t->serial = atomic_fetch_add_explicit(&serials, 1, memory_order_relaxed) + 1;
    size_t need = d->sep_len + d->single_len + d->multi_len + 3;
    t->tokens = cst_alloc(need);
    if (t->tokens == NULL) {
        cst_dealloc(block, sizeof(cst_trie) + CST_SPACING - 1);
        return NULL;
    }
    if (!readonly) {
        size_t bytes = (size_t)UPD_STRIPES * UPD_STRIPE_WORDS * sizeof(uint64_t) + CST_SPACING - 1;
        t->upd_block = cst_alloc(bytes);
        if (t->upd_block == NULL) {
            cst_dealloc(t->tokens, need);
            cst_dealloc(block, sizeof(cst_trie) + CST_SPACING - 1);
            return NULL;
        }
        t->upd = (_Atomic uint64_t *)(((uintptr_t)t->upd_block + CST_SPACING - 1) &
                                      ~(uintptr_t)(CST_SPACING - 1));
        for (size_t i = 0; i < (size_t)UPD_STRIPES * UPD_STRIPE_WORDS; i++)
            atomic_init(&t->upd[i], 0);
    }
    t->tokens_len = need;
    t->d = *d;
    char *p = t->tokens;
    memcpy(p, d->sep, d->sep_len);
    t->d.sep = p;
    p += d->sep_len + 1;
    if (d->single) {
        memcpy(p, d->single, d->single_len);
        t->d.single = p;
        p += d->single_len + 1;
    } else {
        t->d.single_len = 0;
    }
    if (d->multi) {
        memcpy(p, d->multi, d->multi_len);
        t->d.multi = p;
    } else {
        t->d.multi_len = 0;
    }
    t->readonly = readonly;
    if (bytecls != NULL) /* a snapshot or copy: the source's classes */
        memcpy(t->bytecls, bytecls, sizeof t->bytecls);
    else
        words_classes_init(t);
    atomic_init(&t->root, (uintptr_t)root);
    atomic_init(&t->frozen, NULL);
    for (size_t i = 0; i < LOOKUP_STRIPES; i++)
        atomic_init(&t->lookups[i * STRIPE_WORDS], 0);
    return t;
}

/* Give a handle's own memory back (its nodes go through EBR). */
static void handle_free(cst_trie *t)
{
    cache_free(atomic_load_explicit(&t->cache, memory_order_relaxed));
    if (t->upd_block != NULL)
        cst_dealloc(t->upd_block,
                    (size_t)UPD_STRIPES * UPD_STRIPE_WORDS * sizeof(uint64_t) + CST_SPACING - 1);
    cst_dealloc(t->tokens, t->tokens_len);
    cst_dealloc(t->block, sizeof(cst_trie) + CST_SPACING - 1);
}

cst_trie *cst_new(const cst_dialect *d)
{
    pthread_once(&init_once, engine_init);
    if (d == NULL || d->sep == NULL || d->sep_len == 0 || d->multi_min < 0 || d->multi_min > 1)
        return NULL;
    cnode *cn = cn_empty(0, 0);
    if (cn == NULL)
        return NULL;
    inode *root = inode_new(new_gen(), &cn->m, 1);
    if (root == NULL) {
        node_release(&cn->m.h);
        return NULL;
    }
    cn_tail(cn)->gen = root->gen;
    cst_trie *t = handle_new(d, root, 0, NULL);
    if (t == NULL)
        node_release(&root->h);
    return t;
}

/* ------------------------------------------------------------------------
 * Shared frozen roots
 *
 * Read-only snapshots of a trie that nothing has written since its last
 * freeze share that frozen root.  Many threads taking such snapshots at once
 * would all count on the root's one reference count; so a shared root sits
 * in a holder whose count is split in shards, one line each, and a snapshot
 * counts in its thread's shard.  Rules:
 *  H1. The trie's slot (t->frozen) owns the holder while it is there; only
 *      a section that loaded it from the slot takes a shard count, and only
 *      while the slot held it (the snapshot compares the trie's root main).
 *  H2. Replacing or clearing the slot closes the holder through EBR: the
 *      close runs once every section that may have loaded it has ended, so
 *      no count is taken after it (closed, set then, only ever goes 0 -> 1).
 *  H3. After the close the shards only go down.  Whoever sees them sum to
 *      zero after the close (the closer, or the last snapshot to drop its
 *      count, which reads `closed` after its decrement: both sides write,
 *      then read the other's word, all seq_cst) tries to mark the holder
 *      freed; the one CAS that wins releases its root and retires the holder
 *      (a snapshot that has just dropped its count may still be reading it,
 *      inside its section).  No section can reach the root through the
 *      holder then: the trie's slot let go of it a grace period ago and
 *      every snapshot that counted in it has been freed.
 * ---------------------------------------------------------------------- */

#define FROZEN_SHARDS 16

typedef struct frozen_shard {
    _Atomic int64_t n;
    char pad[CST_SPACING - sizeof(int64_t)];
} frozen_shard;

struct frozen {
    inode *root;               /* owned */
    _Atomic int closed;
    _Atomic int freed;
    void *block;               /* what cst_alloc gave (the holder is aligned) */
    _Alignas(CST_SPACING) frozen_shard shard[FROZEN_SHARDS];
};

static size_t frozen_bytes(void) { return sizeof(struct frozen) + CST_SPACING - 1; }

/* A holder for r (its reference is taken over); NULL when out of memory. */
static struct frozen *frozen_new(inode *r)
{
    void *block = cst_alloc(frozen_bytes());
    if (block == NULL)
        return NULL;
    struct frozen *fz =
        (struct frozen *)(((uintptr_t)block + CST_SPACING - 1) & ~(uintptr_t)(CST_SPACING - 1));
    memset(fz, 0, sizeof *fz);
    fz->root = r;
    fz->block = block;
    atomic_init(&fz->closed, 0);
    atomic_init(&fz->freed, 0);
    for (size_t i = 0; i < FROZEN_SHARDS; i++)
        atomic_init(&fz->shard[i].n, 0);
    return fz;
}

static void frozen_dealloc(void *p)
{
    struct frozen *fz = p;
    cst_dealloc(fz->block, frozen_bytes());
}

/* H3: free fz if it is closed, no shard counts and nobody freed it yet.  Its
 * root goes at once; its own memory through EBR, since a snapshot that has
 * just dropped its count may still read `closed` and the shards. */
static void frozen_try_free(struct frozen *fz)
{
    int64_t sum = 0;
    for (size_t i = 0; i < FROZEN_SHARDS; i++)
        /* seq_cst: after this thread's own write (close or decrement) */
        sum += atomic_load_explicit(&fz->shard[i].n, memory_order_seq_cst);
    int expected = 0;
    if (sum != 0 || !atomic_compare_exchange_strong_explicit(&fz->freed, &expected, 1,
                                                             memory_order_acq_rel,
                                                             memory_order_relaxed))
        return;
    node_release(&fz->root->h); /* no section can reach it through fz (H3) */
    ebr_retire_any(fz, frozen_dealloc);
}

/* The EBR release of a holder the slot let go of (H2).  It runs inside a
 * section of its own: once `closed` is set, a snapshot dropping its last count
 * may free the holder, which then waits for this section too. */
static void frozen_close_cb(void *p)
{
    struct frozen *fz = p;
    ebr_record *rec = ebr_enter();
    if (rec == NULL) {
        fputs("cstrie: out of memory in reclamation bookkeeping\n", stderr);
        abort();
    }
    /* seq_cst: written before the shards are summed (H3) */
    atomic_store_explicit(&fz->closed, 1, memory_order_seq_cst);
    frozen_try_free(fz);
    ebr_exit(rec);
}

/* A snapshot takes a count on fz (inside a section that loaded it, H1). */
static unsigned frozen_get(ctx *c, struct frozen *fz)
{
    unsigned s = ebr_record_index(c->rec) % FROZEN_SHARDS;
    /* relaxed: the holder cannot close before this section ends (H2) */
    atomic_fetch_add_explicit(&fz->shard[s].n, 1, memory_order_relaxed);
    return s;
}

/* A snapshot drops its count (H3). */
static void frozen_put(struct frozen *fz, unsigned s)
{
    /* seq_cst: the decrement, then the read of closed */
    atomic_fetch_sub_explicit(&fz->shard[s].n, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&fz->closed, memory_order_seq_cst))
        frozen_try_free(fz);
}

/* Let the slot's holder go (H2); promptly when the operation is a drop. */
static void frozen_release(ctx *c, struct frozen *fz)
{
    if (fz == NULL)
        return;
    if (c->prompt)
        ebr_retire_prompt(c->rec, fz, frozen_close_cb);
    else
        ebr_retire(c->rec, fz, frozen_close_cb);
}

/* Forget the handle's frozen root (its main is no longer the trie's). */
static void frozen_drop(ctx *c)
{
    /* acq_rel: the exchange takes the slot's holder exactly once */
    frozen_release(c, atomic_exchange_explicit(&c->t->frozen, NULL, memory_order_acq_rel));
}

/* Offer fz as the handle's frozen root. */
static void frozen_set(ctx *c, struct frozen *fz)
{
    /* acq_rel: publishes fz (a sharing snapshot reads its fields) and takes
     * the old slot's holder */
    frozen_release(c, atomic_exchange_explicit(&c->t->frozen, fz, memory_order_acq_rel));
}

void cst_free(cst_trie *t)
{
    if (t == NULL)
        return;
    ctx c;
    if (ctx_enter(&c, t) == 0) {
        inode *root = root_read(&c);
        /* Prompt when this handle holds the last reference to its root: the
         * whole trie (or snapshot) comes back when this call returns if no
         * other thread is inside an engine call, else at their next exits.
         * A snapshot sharing its frozen root with the trie or other
         * snapshots frees nothing now: no need to make every thread help. */
        c.prompt = t->holder == NULL &&
                   atomic_load_explicit(&root->h.rc, memory_order_relaxed) == 1;
        frozen_release(&c, atomic_exchange_explicit(&t->frozen, NULL, memory_order_acq_rel));
        if (t->holder != NULL) {
            frozen_put(t->holder, t->shard); /* the last count frees the root at once */
        } else {
            retire(&c, &root->h);
        }
        ctx_exit(&c);
    }
    handle_free(t);
}

int cst_is_readonly(const cst_trie *t) { return t->readonly; }

/* The read-only snapshot's step alone: move the live trie to a new
 * generation over the same main node, so that the old root (returned with a
 * reference of its own) is frozen - every later update copies its path into
 * the new generation (gcas_commit case 4).  A lookup whose walk keeps meeting
 * updates ends on this (match.c). */
inode *root_freeze(ctx *c)
{
    for (;;) {
        inode *r = rdcss_read_root(c, 0);
        if (c->t->readonly) {
            node_retain(&r->h);
            return r;
        }
        mainnode *expmain = gcas_read(c, r);
        node_retain(&expmain->h);
        inode *nv = inode_new(new_gen(), expmain, 1);
        if (nv == NULL) {
            node_release(&expmain->h);
            return NULL;
        }
        node_retain(&r->h); /* the caller's reference, if RDCSS succeeds */
        int ok = rdcss_root(c, r, expmain, nv);
        if (ok > 0)
            return r;
        retire(c, &r->h);
        if (ok < 0)
            return NULL;
    }
}

cst_trie *cst_snapshot(cst_trie *t, int readonly)
{
    ctx c;
    if (ctx_enter(&c, t) < 0)
        return NULL;
    cst_trie *snap = NULL;
    inode *snaproot = NULL;
    if (readonly && !t->readonly) {
        /* A trie whose root's main is still its frozen root's main is in the
         * frozen state (every I-node below a frozen root is frozen, and the
         * first write after a freeze changes the root's main: its path
         * starts with a renewal of the root's branch): share that root, no
         * RDCSS, no new generation.  The snapshot is the trie at the moment
         * of the read of the root's main.  acquire: the frozen root's fields. */
        struct frozen *fz = atomic_load_explicit(&t->frozen, memory_order_acquire);
        if (fz != NULL) {
            inode *r = rdcss_read_root(&c, 0);
            if (r != fz->root && gcas_read(&c, r) == gcas_read(&c, fz->root)) {
                unsigned shard = frozen_get(&c, fz);
                snap = handle_new(&t->d, fz->root, 1, t->bytecls);
                if (snap == NULL) {
                    frozen_put(fz, shard);
                } else {
                    snap->holder = fz;
                    snap->shard = shard;
                }
                goto out;
            }
        }
    }
    if (readonly && t->readonly && t->holder != NULL) {
        /* A snapshot of a snapshot that shares a frozen root: share it too
         * (it cannot be closed and freed while t counts in it). */
        unsigned shard = frozen_get(&c, t->holder);
        snap = handle_new(&t->d, t->holder->root, 1, t->bytecls);
        if (snap == NULL) {
            frozen_put(t->holder, shard);
        } else {
            snap->holder = t->holder;
            snap->shard = shard;
        }
        goto out;
    }
    for (;;) {
        inode *r = rdcss_read_root(&c, 0);
        mainnode *expmain = gcas_read(&c, r);
        if (t->readonly) {
            /* The source is frozen: a read-only snapshot shares its root; a
             * writable copy gets a generation of its own over the same main. */
            node_retain(&expmain->h);
            if (readonly) {
                node_release(&expmain->h);
                node_retain(&r->h);
                snaproot = r;
            } else if ((snaproot = inode_new(new_gen(), expmain, 1)) == NULL) {
                node_release(&expmain->h);
                goto out;
            }
            break;
        }
        node_retain(&expmain->h);
        inode *nv = inode_new(new_gen(), expmain, 1);
        if (nv == NULL) {
            node_release(&expmain->h);
            goto out;
        }
        node_retain(&r->h); /* the snapshot's own reference, if RDCSS succeeds */
        int ok = rdcss_root(&c, r, expmain, nv);
        if (ok < 0) {
            retire(&c, &r->h);
            goto out;
        }
        if (!ok) {
            retire(&c, &r->h);
            continue;
        }
        if (readonly) {
            /* The old generation is frozen from now on: a holder takes the
             * snapshot's reference to it, the snapshot counts in it, and the
             * trie offers it to the next snapshots while nothing is written. */
            struct frozen *fz = frozen_new(r);
            if (fz == NULL) {
                snaproot = r; /* no holder: this snapshot alone, as usual */
                break;
            }
            unsigned shard = frozen_get(&c, fz);
            snap = handle_new(&t->d, r, 1, t->bytecls);
            if (snap == NULL) {
                frozen_put(fz, shard);
                frozen_release(&c, fz); /* closed and freed after a grace period */
                goto out;
            }
            snap->holder = fz;
            snap->shard = shard;
            frozen_set(&c, fz);
            goto out;
        } else {
            /* A writable copy gets a generation of its own over expmain. */
            node_retain(&expmain->h);
            snaproot = inode_new(new_gen(), expmain, 1);
            retire(&c, &r->h);
            if (snaproot == NULL) {
                node_release(&expmain->h);
                goto out;
            }
        }
        break;
    }
    snap = handle_new(&t->d, snaproot, readonly, t->bytecls);
    if (snap == NULL)
        retire(&c, &snaproot->h);
out:
    if (snap != NULL)
        pairs_reset(snap, pairs_estimate(t));
    ctx_exit(&c);
    return snap;
}

static cst_trie *clear_take(cst_trie *t);
static int clear_if(cst_trie *t, cst_trie *expected);
static int clear_all(cst_trie *t);

/* A clear with a cache: every entry dies (gen) before the trie changes. */
#define CACHED_CLEAR(t, type, fail, call) CACHED(t, type, fail, cache_invalidate_all(k_), call)

int64_t pairs_estimate(const cst_trie *t)
{
    if (t->upd == NULL)
        return t->pairs; /* read-only: set when it was made */
    int64_t n = 0;
    for (unsigned s = 0; s < UPD_STRIPES; s++)
        n += atomic_load_explicit(upd_pairs(t, s), memory_order_relaxed);
    return n;
}

void pairs_reset(cst_trie *t, int64_t n)
{
    if (t->upd == NULL) {
        t->pairs = n; /* a read-only handle, before anyone else has it */
        return;
    }
    for (unsigned s = 0; s < UPD_STRIPES; s++)
        atomic_store_explicit(upd_pairs(t, s), s == UPD_GLOBAL ? n : 0, memory_order_relaxed);
}

static cst_trie *clear_take_counted(cst_trie *t)
{
    cst_trie *snap = clear_take(t);
    if (snap != NULL)
        pairs_reset(t, 0);
    return snap;
}

/* r, the result of a clear; `emptied` is the r of a clear that emptied t. */
static int cleared(cst_trie *t, int r, int emptied)
{
    if (r == emptied)
        pairs_reset(t, 0);
    return r;
}

cst_trie *cst_clear_take(cst_trie *t)
{
    CACHED_CLEAR(t, cst_trie *, NULL, clear_take_counted(t));
}
int cst_clear_if(cst_trie *t, cst_trie *expected)
{
    CACHED_CLEAR(t, int, CST_ENOMEM, cleared(t, clear_if(t, expected), 1));
}
int cst_clear(cst_trie *t) { CACHED_CLEAR(t, int, CST_ENOMEM, cleared(t, clear_all(t), CST_OK)); }

static cst_trie *clear_take(cst_trie *t)
{
    /* Take a read-only snapshot and, if nothing was written since, empty the
     * new root: the cleared pairs are then exactly the snapshot's. */
    if (t->readonly)
        return NULL;
    for (;;) {
        cst_trie *snap = cst_snapshot(t, 1);
        if (snap == NULL)
            return NULL;
        ctx c;
        if (ctx_enter(&c, t) < 0) {
            cst_free(snap);
            return NULL;
        }
        inode *root = root_read(&c);
        mainnode *m = gcas_read(&c, root);
        inode *sroot = (inode *)atomic_load_explicit(&snap->root, memory_order_seq_cst);
        int same = gcas_read(&c, sroot) == m;
        int ok = 0;
        if (same) {
            cnode *cn = cn_empty(0, root->gen);
            if (cn == NULL) {
                ctx_exit(&c);
                cst_free(snap);
                return NULL;
            }
            ok = gcas(&c, root, m, &cn->m);
        }
        ctx_exit(&c);
        if (ok)
            return snap;
        cst_free(snap);
    }
}

static int clear_if(cst_trie *t, cst_trie *expected)
{
    if (t->readonly)
        return CST_EREADONLY;
    ctx c;
    if (ctx_enter(&c, t) < 0)
        return CST_ENOMEM;
    inode *root = root_read(&c);
    mainnode *m = gcas_read(&c, root);
    inode *eroot = (inode *)atomic_load_explicit(&expected->root, memory_order_seq_cst);
    int r = 0;
    if (!(atomic_load_explicit(&expected->root, memory_order_seq_cst) & ROOT_DESC_BIT) &&
        gcas_read(&c, eroot) == m) {
        cnode *cn = cn_empty(0, root->gen);
        r = cn == NULL ? CST_ENOMEM : gcas(&c, root, m, &cn->m);
    }
    ctx_exit(&c);
    return r;
}

static int clear_all(cst_trie *t)
{
    if (t->readonly)
        return CST_EREADONLY;
    ctx c;
    if (ctx_enter(&c, t) < 0)
        return CST_ENOMEM;
    int r = CST_OK;
    for (;;) {
        inode *root = root_read(&c);
        mainnode *m = gcas_read(&c, root);
        cnode *cn = cn_empty(0, root->gen);
        if (cn == NULL) {
            r = CST_ENOMEM;
            break;
        }
        if (gcas(&c, root, m, &cn->m))
            break;
    }
    ctx_exit(&c);
    return r;
}

/* ------------------------------------------------------------------------
 * Compaction: clean every tomb of the current generation, bottom-up.  Tombs
 * are always semantically empty; they normally disappear at once, but a
 * cleanup that ran out of memory (or lost to a snapshot) leaves one until a
 * write passes by.  This walk removes them all.
 * ---------------------------------------------------------------------- */

/* The I-node below branch b of a main node (a deeper hash level or the next
 * topic level), or NULL. */
static inode *branch_child(cst_hdr *b)
{
    return b->kind == K_INODE ? (inode *)b : ((snode *)b)->child;
}

/* 1 if a T-node is reachable from main node m, 0 if not, -1 when out of
 * memory (read-only walk with a heap stack). */
static int has_tomb(ctx *c, mainnode *m)
{
    mainnode **stack = NULL;
    size_t n = 0, cap = 0;
    int found = 0;
    if (scratch_reserve((void **)&stack, &cap, 1, sizeof *stack) < 0)
        return -1;
    stack[n++] = m;
    while (n > 0 && !found) {
        mainnode *x = stack[--n];
        if (x->h.kind == K_TNODE) {
            found = 1;
            break;
        }
        for (uint32_t i = 0; i < entry_count(x); i++) {
            slot at;
            inode *ch = branch_child(entry_at(x, i, &at));
            if (ch == NULL)
                continue;
            if (scratch_reserve((void **)&stack, &cap, n + 1, sizeof *stack) < 0) {
                found = -1;
                break;
            }
            stack[n++] = gcas_read(c, ch);
        }
    }
    free(stack);
    return found;
}

/* A pending I-node of the compaction walk (compact_walk). */
typedef struct cframe {
    inode *in;
    mainnode *m;               /* the main node being scanned; NULL: read it again */
    uint32_t i;                /* the next entry of m to look at */
    unsigned lev;
    int attempt;
} cframe;

/*
 * Compact below `root` (of the current generation gen): post-order, with the
 * pending I-nodes on a heap stack.  At each I-node: compact every child that
 * leads to a tomb first (renewing into gen, as any write would, a child
 * I-node of an older generation: the trie was snapshotted since; only paths
 * that lead to a tomb are renewed), then clean the I-node itself.
 */
static void compact_walk(ctx *c, inode *root, uint64_t gen)
{
    cframe *st = NULL;
    size_t n = 0, cap = 0;
    if (scratch_reserve((void **)&st, &cap, 1, sizeof *st) < 0)
        return;
    st[n++] = (cframe){root, NULL, 0, 0, 0};
    while (n > 0) {
        cframe *f = &st[n - 1];
        if (f->m == NULL) {
            if (f->attempt++ >= 16) {
                n--;
                continue;
            }
            f->m = gcas_read(c, f->in);
            f->i = 0;
            if (f->m->h.kind == K_TNODE) {
                n--;
                continue;
            }
        }
        mainnode *renewed = NULL;
        int failed = 0, pushed = 0;
        while (f->i < entry_count(f->m)) {
            slot at;
            cst_hdr *b = entry_at(f->m, f->i++, &at);
            int is_in = b->kind == K_INODE;
            inode *ch = branch_child(b);
            if (ch == NULL)
                continue;
            mainnode *cm = gcas_read(c, ch);
            if (cm->h.kind == K_TNODE || has_tomb(c, cm) != 1)
                continue; /* a tombed child is clean()'s job, below */
            if (ch->gen == gen) {
                if (scratch_reserve((void **)&st, &cap, n + 1, sizeof *st) < 0) {
                    failed = 1;
                    break;
                }
                st[n++] = (cframe){ch, NULL, 0, is_in ? f->lev + CN_BITS : 0, 0};
                pushed = 1;
                break;
            }
            /* renew this branch into gen, then look again */
            inode *cp = inode_copy(c, ch, gen);
            if (cp == NULL) {
                failed = 1;
                break;
            }
            cst_hdr *nb = &cp->h;
            if (!is_in) {
                snode *nsn = snode_with_child((snode *)b, cp);
                if (nsn == NULL) {
                    node_release(&cp->h);
                    failed = 1;
                    break;
                }
                nb = &nsn->h;
            }
            renewed = main_with(f->m, &at, gen, nb, 0);
            if (renewed == NULL) {
                node_release(nb);
                failed = 1;
            }
            break;
        }
        if (pushed)
            continue; /* f (maybe moved by the reserve) resumes after the child */
        if (failed) {
            n--;
            continue;
        }
        if (renewed != NULL) {
            if (!gcas(c, f->in, f->m, renewed) && rdcss_read_root(c, 0)->gen != gen)
                n--;
            else
                f->m = NULL; /* look again */
            continue;
        }
        clean(c, f->in, f->lev, n == 1, gen);
        n--;
    }
    free(st);
}

int cst_compact(cst_trie *t)
{
    if (t->readonly)
        return CST_EREADONLY;
    ctx c;
    if (ctx_enter(&c, t) < 0)
        return CST_ENOMEM;
    inode *root = root_read(&c);
    compact_walk(&c, root, root->gen);
    ctx_exit(&c);
    return CST_OK;
}

/* ------------------------------------------------------------------------
 * Reclamation and allocator glue
 * ---------------------------------------------------------------------- */

int64_t cst_reclaim(void) { return ebr_barrier(); }
void *cst_read_enter(void) { return ebr_enter(); }
void cst_read_exit(void *section) { ebr_exit(section); }
uint64_t cst_epoch(void) { return ebr_epoch(); }
uint64_t cst_epoch_advance(void) { return ebr_try_advance(); }
void cst_thread_detach(void) { ebr_thread_detach(); }
int64_t cst_live_allocations(void) { return cst_alloc_live_count(); }
int64_t cst_live_bytes(void) { return cst_alloc_live_bytes(); }
void cst_fail_allocations_after(int64_t n) { cst_alloc_fail_after(n); }
