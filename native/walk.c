/*
 * walk.c - whole-trie traversals over a consistent (read-only) snapshot:
 * iteration in bounded chunks, exact size with per-C-node caching, stats, the
 * invariant checker and the tree dump used by the tests.
 *
 * Size caching: a C-node reachable from a read-only snapshot has a frozen
 * subtree (every I-node below it is of its generation or older, and those
 * generations no longer accept commits), so its pair count never changes and
 * is cached in the node.  C-nodes are shared between a snapshot and the live
 * trie until a write renews them, so len() after a few writes recounts only
 * the renewed paths.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

/* ------------------------------------------------------------------------
 * Size
 * ---------------------------------------------------------------------- */

/* Every walk below keeps its pending nodes on a heap stack (never the C
 * stack: a trie may be 65,535 topic levels deep). */
typedef struct wframe {
    mainnode *m;
    uint32_t i;                /* next entry of m */
    int64_t acc;               /* count: the pairs below m so far */
    int64_t depth;             /* stats: topic depth of m's words */
    int share;                 /* stats: m is in a share level (nodes.h) */
} wframe;

static int wpush(wframe **st, size_t *n, size_t *cap, wframe f)
{
    if (scratch_reserve((void **)st, cap, *n + 1, sizeof(wframe)) < 0)
        return -1;
    (*st)[(*n)++] = f;
    return 0;
}

static uint32_t entry_count(const mainnode *m);
static cst_hdr *entry_at(const mainnode *m, uint32_t i);

/* The pairs below main node m (post-order; C-node counts are cached, see the
 * top of this file), or CST_ENOMEM. */
static int64_t count_main(ctx *c, mainnode *m)
{
    wframe *st = NULL;
    size_t n = 0, cap = 0;
    int64_t total = 0;
    if (wpush(&st, &n, &cap, (wframe){m, 0, 0, 0, 0}) < 0)
        return CST_ENOMEM;
    while (n > 0) {
        wframe *f = &st[n - 1];
        if (f->i < entry_count(f->m)) {
            cst_hdr *b = entry_at(f->m, f->i++);
            inode *ch = (inode *)b;
            if (b->kind == K_SNODE) {
                f->acc += ((snode *)b)->nsubs;
                ch = ((snode *)b)->child;
            }
            if (ch == NULL)
                continue;
            mainnode *cm = gcas_read(c, ch);
            /* relaxed: the cached value is a pure function of a frozen subtree. */
            int64_t cached = cm->h.kind == K_CNODE
                                 ? atomic_load_explicit(&cn_tail((cnode *)cm)->cached_pairs,
                                                        memory_order_relaxed)
                                 : -1;
            if (cached >= 0)
                f->acc += cached;
            else if (wpush(&st, &n, &cap, (wframe){cm, 0, 0, 0, 0}) < 0) {
                free(st);
                return CST_ENOMEM;
            }
            continue;
        }
        if (f->m->h.kind == K_CNODE)
            atomic_store_explicit(&cn_tail((cnode *)f->m)->cached_pairs, f->acc,
                                  memory_order_relaxed);
        int64_t v = f->acc;
        if (--n > 0)
            st[n - 1].acc += v;
        else
            total = v;
    }
    free(st);
    return total;
}

int64_t cst_len(cst_trie *t)
{
    cst_trie *snap = t;
    if (!t->readonly && (snap = cst_snapshot(t, 1)) == NULL)
        return CST_ENOMEM;
    ctx c;
    int64_t r = CST_ENOMEM;
    if (ctx_enter(&c, snap) == 0) {
        r = count_main(&c, gcas_read(&c, root_read(&c)));
        ctx_exit(&c);
    }
    if (snap != t)
        cst_free(snap);
    return r;
}

/* ------------------------------------------------------------------------
 * Stats
 * ---------------------------------------------------------------------- */

static int stats_walk(ctx *c, mainnode *root_main, cst_stats *s)
{
    wframe *st = NULL;
    size_t n = 0, cap = 0;
    if (wpush(&st, &n, &cap, (wframe){root_main, 0, 0, 1, 0}) < 0)
        return CST_ENOMEM;
    while (n > 0) {
        wframe f = st[--n];
        switch (f.m->h.kind) {
        case K_CNODE: s->cnodes++; break;
        case K_TNODE: s->tnodes++; break;
        case K_LNODE: s->lnodes++; break;
        default: break;
        }
        for (uint32_t i = 0; i < entry_count(f.m); i++) {
            cst_hdr *b = entry_at(f.m, i);
            if (b->kind == K_INODE) {
                s->inodes++;
                if (wpush(&st, &n, &cap,
                          (wframe){gcas_read(c, (inode *)b), 0, 0, f.depth, f.share}) < 0)
                    goto oom;
                continue;
            }
            snode *sn = (snode *)b;
            s->snodes++;
            s->pairs += sn->nsubs;
            if (sn->nsubs > 0)
                s->patterns++;
            if (f.share) {
                s->share_pairs += sn->nsubs;
                s->share_groups += sn->nsubs > 0;
            } else if (f.depth > s->max_depth && sn->h.b1 != W_SHARE) {
                s->max_depth = f.depth;
            }
            if (sn->nsubs > SUBS_INLINE) {
                uint64_t cnt = 0;
                int64_t nodes = set_check(sn->set, 0, &cnt);
                if (nodes > 0)
                    s->setnodes += nodes;
            }
            if (sn->child) {
                s->inodes++;
                if (wpush(&st, &n, &cap,
                          (wframe){gcas_read(c, sn->child), 0, 0, f.depth + 1,
                                   sn->h.b1 == W_SHARE}) < 0)
                    goto oom;
            }
        }
    }
    free(st);
    return CST_OK;
oom:
    free(st);
    return CST_ENOMEM;
}

int cst_stats_get(cst_trie *t, cst_stats *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < LOOKUP_STRIPES; i++)
        out->lookups += (int64_t)atomic_load_explicit(&t->lookups[i * STRIPE_WORDS],
                                                      memory_order_relaxed);
    cst_trie *snap = t;
    if (!t->readonly && (snap = cst_snapshot(t, 1)) == NULL)
        return CST_ENOMEM;
    ctx c;
    int r = CST_ENOMEM;
    if (ctx_enter(&c, snap) == 0) {
        inode *root = root_read(&c);
        out->inodes = 1;
        out->generation = (int64_t)root->gen;
        int64_t lookups = out->lookups, generation = out->generation;
        r = stats_walk(&c, gcas_read(&c, root), out);
        if (r < 0) {
            memset(out, 0, sizeof *out);
            out->lookups = lookups;
            out->generation = generation;
        }
        ctx_exit(&c);
    }
    if (snap != t)
        cst_free(snap);
    return r;
}

/* ------------------------------------------------------------------------
 * Iteration
 * ---------------------------------------------------------------------- */

typedef struct frame {
    mainnode *m;
    uint32_t idx;
    int level_top;             /* popping it leaves a topic level */
} frame;

enum { STAGE_NEXT, STAGE_ENTRY, STAGE_CHILD };

struct cst_iter {
    cst_trie *snap;            /* owned read-only snapshot: keeps every node alive */
    frame *frames;
    size_t nframes, fcap;
    snode **path;
    size_t depth, pcap;
    snode *cur;
    int stage;
    set_cursor sc;
    uint32_t done;             /* inline ids of cur already delivered */
    int one_done;
    int started;
    int per_pair;              /* one id per entry (cst_iter_new_pairs) */
};

static int push_frame(cst_iter *it, mainnode *m, int level_top)
{
    if (scratch_reserve((void **)&it->frames, &it->fcap, it->nframes + 1, sizeof(frame)) < 0)
        return -1;
    it->frames[it->nframes++] = (frame){m, 0, level_top};
    return 0;
}

cst_iter *cst_iter_new(cst_trie *t)
{
    cst_iter *it = calloc(1, sizeof *it);
    if (it == NULL)
        return NULL;
    it->snap = cst_snapshot(t, 1);
    if (it->snap == NULL) {
        free(it);
        return NULL;
    }
    return it;
}

cst_iter *cst_iter_new_pairs(cst_trie *t)
{
    cst_iter *it = cst_iter_new(t);
    if (it != NULL)
        it->per_pair = 1;
    return it;
}

void cst_iter_free(cst_iter *it)
{
    if (it == NULL)
        return;
    cst_free(it->snap);
    free(it->frames);
    free(it->path);
    free(it);
}

static uint32_t entry_count(const mainnode *m)
{
    switch (m->h.kind) {
    case K_CNODE: return ((const cnode *)m)->n;
    case K_LNODE: return ((const lnode *)m)->n;
    case K_TNODE: return ((const tnode *)m)->sn ? 1 : 0;
    default: return 0;
    }
}

static cst_hdr *entry_at(const mainnode *m, uint32_t i)
{
    switch (m->h.kind) {
    case K_CNODE: return ((const cnode *)m)->array[i];
    case K_LNODE: return &((const lnode *)m)->sn[i]->h;
    default: return &((const tnode *)m)->sn->h;
    }
}

/* it->cur is a group of a share level: the path ends in a share marker. */
static int at_share(const cst_iter *it)
{
    return it->depth > 0 && it->path[it->depth - 1]->h.b1 == W_SHARE;
}

/* The words of it->cur's pattern: the path and cur, or for a share group
 * the path up to its marker (the group's filter). */
static size_t pattern_words(const cst_iter *it, const snode **last)
{
    if (at_share(it)) {
        *last = it->path[it->depth - 2];
        return it->depth - 2;
    }
    *last = it->cur;
    return it->depth;
}

/* Length of the pattern of it->cur. */
static size_t pattern_len(const cst_iter *it, const cst_dialect *d)
{
    const snode *last;
    size_t k = pattern_words(it, &last);
    size_t len = last->wlen + k * d->sep_len;
    for (size_t i = 0; i < k; i++)
        len += it->path[i]->wlen;
    return len;
}

static void pattern_write(const cst_iter *it, const cst_dialect *d, char *p)
{
    const snode *last;
    size_t k = pattern_words(it, &last);
    for (size_t i = 0; i < k; i++) {
        memcpy(p, it->path[i]->word, it->path[i]->wlen);
        p += it->path[i]->wlen;
        memcpy(p, d->sep, d->sep_len);
        p += d->sep_len;
    }
    memcpy(p, last->word, last->wlen);
}

int cst_iter_next(cst_iter *it, cst_chunk *out)
{
    const cst_dialect *d = &it->snap->d;
    out->nentries = 0;
    out->need_pat = out->need_ids = out->need_entries = 0;
    size_t pat = 0, ids = 0;
    ctx c;
    if (ctx_enter(&c, it->snap) < 0)
        return CST_ENOMEM;
    int r = 0;
    if (!it->started) {
        it->started = 1;
        if (push_frame(it, gcas_read(&c, root_read(&c)), 0) < 0) {
            r = CST_ENOMEM;
            goto done;
        }
    }
    for (;;) {
        if (it->stage == STAGE_ENTRY) {
            size_t plen = pattern_len(it, d);
            if (out->nentries >= out->entries_cap || pat + plen > out->pat_cap ||
                ids >= out->ids_cap) {
                if (out->nentries == 0) {
                    out->need_pat = plen;
                    out->need_ids = 1;
                    out->need_entries = 1;
                    r = CST_ETRUNC;
                }
                break;
            }
            pattern_write(it, d, out->pat + pat);
            pat += plen;
            if (out->share)
                out->share[out->nentries] = at_share(it) ? share_id_read(it->cur->word) : 0;
            size_t got;
            int finished;
            if (it->cur->nsubs <= SUBS_INLINE) {
                /* inline ids, from it->done on (one per entry for per_pair) */
                const uint64_t *inl = snode_ids(it->cur);
                size_t room = it->per_pair ? 1 : out->ids_cap - ids;
                got = 0;
                while (got < room && it->done < it->cur->nsubs)
                    out->ids[ids + got++] = inl[it->done++];
                finished = it->done == it->cur->nsubs;
            } else {
                got = set_cursor_next(&it->sc, out->ids + ids,
                                      it->per_pair ? 1 : out->ids_cap - ids);
                finished = set_cursor_done(&it->sc);
            }
            ids += got;
            out->pat_end[out->nentries] = (int64_t)pat;
            out->ids_end[out->nentries] = (int64_t)ids;
            out->nentries++;
            if (!finished && it->per_pair)
                continue; /* the next id of this pattern, as its own entry */
            if (!finished)
                break; /* ids buffer full; continue this entry next call */
            it->stage = STAGE_CHILD;
            continue;
        }
        if (it->stage == STAGE_CHILD) {
            it->stage = STAGE_NEXT;
            if (it->cur->child) {
                if (scratch_reserve((void **)&it->path, &it->pcap, it->depth + 1,
                                    sizeof(snode *)) < 0 ||
                    push_frame(it, gcas_read(&c, it->cur->child), 1) < 0) {
                    r = CST_ENOMEM;
                    break;
                }
                it->path[it->depth++] = it->cur;
            }
            continue;
        }
        if (it->nframes == 0)
            break;
        frame *f = &it->frames[it->nframes - 1];
        if (f->idx >= entry_count(f->m)) {
            if (f->level_top)
                it->depth--;
            it->nframes--;
            continue;
        }
        cst_hdr *b = entry_at(f->m, f->idx++);
        /* The walk is a chain of cache misses; start loading the next sibling
         * (and, through an S-node, its next level) while this one is done. */
        if (f->idx < entry_count(f->m))
            __builtin_prefetch(entry_at(f->m, f->idx));
        if (b->kind == K_SNODE && ((snode *)b)->child != NULL)
            __builtin_prefetch(((snode *)b)->child);
        if (b->kind == K_INODE) {
            if (push_frame(it, gcas_read(&c, (inode *)b), 0) < 0) {
                r = CST_ENOMEM;
                break;
            }
            continue;
        }
        it->cur = (snode *)b;
        if (it->cur->nsubs > 0 && (out->share != NULL || !at_share(it))) {
            it->stage = STAGE_ENTRY;
            it->done = 0;
            if (it->cur->nsubs > SUBS_INLINE)
                set_cursor_init(&it->sc, it->cur->set);
        } else {
            it->stage = STAGE_CHILD;
        }
    }
done:
    ctx_exit(&c);
    return r < 0 ? r : (int)out->nentries;
}

/* ------------------------------------------------------------------------
 * Invariant checker
 * ---------------------------------------------------------------------- */

/* A main node still to be checked, with what its place requires. */
typedef struct cframe {
    mainnode *m;
    unsigned lev;              /* its hash level */
    int level_top;             /* hash level 0 of a topic level */
    int trie_root;             /* the trie's top C-node */
    uint64_t igen;             /* the generation of the I-node holding it */
    int share;                 /* it is in a share level (group ids) */
    size_t depth;              /* the topic level of its words */
} cframe;

typedef struct chk {
    ctx *c;
    int strict;
    char *msg;
    size_t cap;
    int failed;
    cframe *st;                /* main nodes still to check */
    size_t n, stcap;
} chk;

static int fail(chk *k, const char *what, const void *node)
{
    if (!k->failed && k->msg && k->cap)
        snprintf(k->msg, k->cap, "%s (node %p)", what, node);
    k->failed = 1;
    return -1;
}

static int check_later(chk *k, cframe f)
{
    if (scratch_reserve((void **)&k->st, &k->stcap, k->n + 1, sizeof(cframe)) < 0)
        return fail(k, "out of memory in the checker", f.m);
    k->st[k->n++] = f;
    return 0;
}

/* An I-node over words of topic level depth is padded exactly when nodes.h's
 * pad_level says so. */
static int check_padding(chk *k, const inode *in, size_t depth)
{
    if (((in->h.b3 & HDR_PADDED) != 0) != pad_level(depth))
        return fail(k, pad_level(depth) ? "I-node of a top topic level is not padded"
                                        : "I-node below the top topic levels is padded",
                    in);
    return 0;
}

static int check_sn(chk *k, snode *sn, uint64_t gen, int share, size_t depth)
{
    if (sn->h.kind != K_SNODE)
        return fail(k, "expected an S-node", sn);
    if (atomic_load_explicit(&sn->h.rc, memory_order_relaxed) == 0)
        return fail(k, "S-node with reference count 0", sn);
    if (sn->nsubs > SUBS_INLINE) {
        uint64_t cnt = 0;
        if (set_check(sn->set, 0, &cnt) < 0)
            return fail(k, "broken subscriber set", sn);
        if (cnt != sn->nsubs)
            return fail(k, "subscriber count differs from the set's size", sn);
    } else {
        if (sn->nsubs != 1 && sn->one != 0)
            return fail(k, "a small subscriber set is not inline", sn);
        const uint64_t *ids = snode_ids(sn);
        for (uint32_t i = 0; i < sn->nsubs; i++)
            for (uint32_t j = 0; j < i; j++)
                if (ids[i] == ids[j])
                    return fail(k, "an inline subscriber id appears twice", sn);
    }
    if (sn->h.b1 == W_LITERAL && sn->hash != word_hash(sn->word, sn->wlen))
        return fail(k, "S-node hash does not match its word", sn);
    if (share) {
        if (sn->h.b1 != W_LITERAL || sn->wlen != SHARE_ID_BYTES || share_id_read(sn->word) == 0)
            return fail(k, "a share level holds something other than a group id", sn);
        if (sn->child != NULL)
            return fail(k, "a share group has a next topic level", sn);
    }
    if (sn->h.b1 == W_SHARE && (sn->nsubs != 0 || sn->wlen != 0))
        return fail(k, "a share marker has subscribers or a word", sn);
    if (sn->child == NULL) {
        if (k->strict && sn->nsubs == 0)
            return fail(k, "S-node with no subscribers and no child was not pruned", sn);
        return 0;
    }
    if (sn->child->h.kind != K_INODE)
        return fail(k, "S-node child is not an I-node", sn);
    if (sn->child->gen > gen)
        return fail(k, "child I-node of a newer generation than its parent", sn);
    if (check_padding(k, sn->child, depth + 1) < 0)
        return -1;
    mainnode *cm = gcas_read(k->c, sn->child);
    if (k->strict && cm->h.kind == K_TNODE)
        return fail(k, "entombed topic level left in a quiescent trie", cm);
    return check_later(k,
                       (cframe){cm, 0, 1, 0, sn->child->gen, sn->h.b1 == W_SHARE, depth + 1});
}

/* Check one main node; its children are queued (check_later), not recursed. */
static int check_main(chk *k, cframe fr)
{
    mainnode *m = fr.m;
    unsigned lev = fr.lev;
    if (atomic_load_explicit(&m->h.rc, memory_order_relaxed) == 0)
        return fail(k, "main node with reference count 0", m);
    if (k->strict && atomic_load_explicit(&m->prev, memory_order_seq_cst) != 0)
        return fail(k, "GCAS left pending in a quiescent trie", m);
    switch (m->h.kind) {
    case K_CNODE: {
        cnode *cn = (cnode *)m;
        unsigned spec = cn->m.h.b2;
        if (cn->m.h.b1 != lev)
            return fail(k, "C-node at the wrong hash level", cn);
        if (cn->n != (uint32_t)(popc_map(cn->bitmap) + popc(spec)))
            return fail(k, "C-node size differs from its bitmaps", cn);
        if (spec >> SPEC_SLOTS)
            return fail(k, "C-node spec mask out of range", cn);
        if (spec && lev != 0)
            return fail(k, "wildcard slots below hash level 0", cn);
        if ((spec & (1u << (W_EMPTY_PATTERN - 1))) && !fr.trie_root)
            return fail(k, "zero-word pattern outside the trie's top C-node", cn);
        if ((spec & (1u << (W_SHARE - 1))) && fr.trie_root)
            return fail(k, "share groups in the trie's top C-node (no pattern above)", cn);
        if (spec && fr.share)
            return fail(k, "wildcard or share slot in a share level", cn);
        if (cn_tail(cn)->gen > fr.igen)
            return fail(k, "C-node of a newer generation than its I-node", cn);
        if (k->strict) {
            /* R6: only a transfer copy in flight borrows its children */
            if (atomic_load_explicit(&cn_tail(cn)->xfer, memory_order_acquire) != XFER_ALL)
                return fail(k, "reachable C-node does not own its children", cn);
            if (lev > 0 && (cn->n == 0 || (cn->n == 1 && cn->array[0]->kind == K_SNODE)))
                return fail(k, "C-node below hash level 0 was not contracted", cn);
            if (fr.level_top && !fr.trie_root && cn->n == 0)
                return fail(k, "empty topic level was not entombed", cn);
        }
        uint32_t pos = (uint32_t)popc(spec); /* the branches follow the spec slots */
        for (unsigned f = 0; f < (1u << CN_BITS); f++) {
            if (!(cn->bitmap & CN_BIT(f)))
                continue;
            cst_hdr *b = cn->array[pos++];
            if (b->kind == K_INODE) {
                inode *in = (inode *)b;
                if (in->gen > cn_tail(cn)->gen)
                    return fail(k, "I-node of a newer generation than its C-node", in);
                if (lev > MAX_HASH_LEVEL)
                    return fail(k, "hash level overflow", in);
                if (check_padding(k, in, fr.depth) < 0)
                    return -1;
                mainnode *sm = gcas_read(k->c, in);
                if (k->strict && sm->h.kind == K_TNODE)
                    return fail(k, "tomb left in a quiescent trie", sm);
                if (sm->h.kind == K_LNODE && lev + CN_BITS <= MAX_HASH_LEVEL)
                    return fail(k, "L-node above the last hash level", sm);
                if (check_later(k, (cframe){sm, lev + CN_BITS, 0, 0, in->gen, fr.share, fr.depth}) < 0)
                    return -1;
            } else if (b->kind == K_SNODE) {
                snode *sn = (snode *)b;
                if (sn->h.b1 != W_LITERAL)
                    return fail(k, "wildcard S-node in a hashed slot", sn);
                if (frag(sn->hash, lev) != f)
                    return fail(k, "S-node in the wrong hash slot", sn);
                if (check_sn(k, sn, cn_tail(cn)->gen, fr.share, fr.depth) < 0)
                    return -1;
            } else {
                return fail(k, "C-node branch is neither I-node nor S-node", b);
            }
        }
        for (unsigned s = 0; s < SPEC_SLOTS; s++) {
            snode *sn = (snode *)spec_get(cn, s);
            if (sn == NULL)
                continue;
            if (sn->h.kind != K_SNODE || sn->h.b1 != s + 1)
                return fail(k, "wrong S-node in a wildcard slot", sn);
            if (check_sn(k, sn, cn_tail(cn)->gen, 0, fr.depth) < 0)
                return -1;
        }
        return 0;
    }
    case K_TNODE: {
        tnode *tn = (tnode *)m;
        if (k->strict)
            return fail(k, "tomb left in a quiescent trie", tn);
        return tn->sn ? check_sn(k, tn->sn, fr.igen, fr.share, fr.depth) : 0;
    }
    case K_LNODE: {
        lnode *ln = (lnode *)m;
        if (ln->n < 2)
            return fail(k, "L-node with fewer than two words", ln);
        for (uint32_t i = 0; i < ln->n; i++) {
            if (ln->sn[i]->hash != ln->sn[0]->hash)
                return fail(k, "L-node words with different hashes", ln);
            for (uint32_t j = 0; j < i; j++)
                if (ln->sn[i]->wlen == ln->sn[j]->wlen &&
                    memcmp(ln->sn[i]->word, ln->sn[j]->word, ln->sn[i]->wlen) == 0)
                    return fail(k, "L-node holds a word twice", ln);
            if (check_sn(k, ln->sn[i], fr.igen, fr.share, fr.depth) < 0)
                return -1;
        }
        return 0;
    }
    default:
        return fail(k, "unknown main node kind", m);
    }
}

int cst_check(cst_trie *t, int strict, char *msg, size_t msg_cap)
{
    if (msg && msg_cap)
        msg[0] = 0;
    ctx c;
    if (ctx_enter(&c, t) < 0)
        return CST_ENOMEM;
    chk k = {&c, strict, msg, msg_cap, 0, NULL, 0, 0};
    inode *root = root_read(&c);
    int r = check_padding(&k, root, 0);
    if (r == 0)
        r = check_later(&k, (cframe){gcas_read(&c, root), 0, 1, 1, root->gen, 0, 0});
    while (r == 0 && k.n > 0)
        r = check_main(&k, k.st[--k.n]);
    free(k.st);
    ctx_exit(&c);
    return r < 0 ? CST_EINVAL : 0;
}

/* ------------------------------------------------------------------------
 * Dump
 * ---------------------------------------------------------------------- */

/* A line still to print: a main node, an S-node, or an I-node header. */
typedef struct ditem {
    const void *p;
    int kind;                  /* 0 main node, 1 S-node, 2 I-node line */
    int indent;
    int share;                 /* in a share level: S-nodes are group ids */
} ditem;

typedef struct dumper {
    ctx *c;
    char *buf;
    size_t cap, len;
    ditem *st;
    size_t n, stcap;
    int oom;
} dumper;

static void put(dumper *d, int indent, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#include <stdarg.h>
static void put(dumper *d, int indent, const char *fmt, ...)
{
    char line[512];
    /* Deep tries are drawn at most 100 levels of indentation wide. */
    int shown = indent > 200 ? 200 : indent;
    int n = snprintf(line, sizeof line, "%*s", shown, "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    size_t l = strlen(line);
    if (d->len + l + 1 < d->cap) {
        memcpy(d->buf + d->len, line, l);
        d->buf[d->len + l] = '\n';
        if (d->len + l + 1 < d->cap)
            d->buf[d->len + l + 1] = 0;
    }
    d->len += l + 1;
}

static void dump_later(dumper *d, const void *p, int kind, int indent, int share)
{
    if (scratch_reserve((void **)&d->st, &d->stcap, d->n + 1, sizeof(ditem)) < 0) {
        d->oom = 1;
        return;
    }
    d->st[d->n++] = (ditem){p, kind, indent, share};
}

static void dump_sn(dumper *d, const snode *sn, int indent, int share)
{
    static const char *kinds[] = {"word", "one-level", "many-level", "zero-word", "share"};
    char ids[128] = "";
    if (sn->nsubs == 1)
        snprintf(ids, sizeof ids, " id=%" PRIu64, snode_ids(sn)[0]);
    if (share && sn->wlen == SHARE_ID_BYTES)
        put(d, indent, "S group %" PRIu64 " subs=%u%s", share_id_read(sn->word), sn->nsubs, ids);
    else
        put(d, indent, "S %s '%.*s' subs=%u%s", kinds[sn->h.b1 <= W_SHARE ? sn->h.b1 : 0],
            (int)(sn->wlen > 200 ? 200 : sn->wlen), sn->word, sn->nsubs, ids);
    if (sn->child)
        dump_later(d, sn->child, 2, indent + 2, sn->h.b1 == W_SHARE);
}

/* Print one main node; its branches are queued in reverse, so that they come
 * out in order (pre-order, as a recursive dump would print them). */
static void dump_main(dumper *d, const mainnode *m, int indent, int share)
{
    switch (m->h.kind) {
    case K_CNODE: {
        const cnode *cn = (const cnode *)m;
        put(d, indent, "C lev=%u gen=%" PRIu64 " bitmap=%0*" PRIx64 " spec=%x n=%u", cn->m.h.b1,
            cn_tail(cn)->gen, (int)(sizeof(cnmap) * 2), (uint64_t)cn->bitmap, cn->m.h.b2, cn->n);
        for (uint32_t i = cn->n; i-- > 0;) {
            const cst_hdr *b = cn->array[i];
            dump_later(d, b, b->kind == K_INODE ? 2 : 1, indent + 2, share);
        }
        break;
    }
    case K_TNODE:
        put(d, indent, "T%s", ((const tnode *)m)->sn ? "" : " (empty level)");
        if (((const tnode *)m)->sn)
            dump_later(d, ((const tnode *)m)->sn, 1, indent + 2, share);
        break;
    case K_LNODE:
        put(d, indent, "L n=%u", ((const lnode *)m)->n);
        for (uint32_t i = ((const lnode *)m)->n; i-- > 0;)
            dump_later(d, ((const lnode *)m)->sn[i], 1, indent + 2, share);
        break;
    default:
        put(d, indent, "?");
    }
}

size_t cst_dump(cst_trie *t, char *buf, size_t cap)
{
    if (buf && cap)
        buf[0] = 0;
    ctx c;
    if (ctx_enter(&c, t) < 0)
        return 0;
    dumper d = {&c, buf, buf ? cap : 0, 0, NULL, 0, 0, 0};
    inode *root = root_read(&c);
    put(&d, 0, "I gen=%" PRIu64 "%s (root)", root->gen, t->readonly ? " read-only" : "");
    dump_later(&d, gcas_read(&c, root), 0, 2, 0);
    while (d.n > 0 && !d.oom) {
        ditem it = d.st[--d.n];
        if (it.kind == 0) {
            dump_main(&d, it.p, it.indent, it.share);
        } else if (it.kind == 1) {
            dump_sn(&d, it.p, it.indent, it.share);
        } else {
            inode *in = (inode *)it.p;
            put(&d, it.indent, "I gen=%" PRIu64, in->gen);
            dump_later(&d, gcas_read(&c, in), 0, it.indent + 2, it.share);
        }
    }
    if (d.oom)
        put(&d, 0, "... (out of memory: dump cut short)");
    free(d.st);
    ctx_exit(&c);
    return d.len;
}
