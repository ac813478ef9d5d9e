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

static int64_t count_main(ctx *c, mainnode *m);

static int64_t count_sn(ctx *c, snode *sn)
{
    return (int64_t)sn->nsubs + (sn->child ? count_main(c, gcas_read(c, sn->child)) : 0);
}

static int64_t count_main(ctx *c, mainnode *m)
{
    switch (m->h.kind) {
    case K_CNODE: {
        cnode *cn = (cnode *)m;
        /* relaxed: the cached value is a pure function of a frozen subtree. */
        int64_t cached = atomic_load_explicit(&cn->cached_pairs, memory_order_relaxed);
        if (cached >= 0)
            return cached;
        int64_t sum = 0;
        for (uint32_t i = 0; i < cn->n; i++) {
            cst_hdr *b = cn->array[i];
            sum += b->kind == K_INODE ? count_main(c, gcas_read(c, (inode *)b))
                                      : count_sn(c, (snode *)b);
        }
        atomic_store_explicit(&cn->cached_pairs, sum, memory_order_relaxed);
        return sum;
    }
    case K_TNODE:
        return ((tnode *)m)->sn ? count_sn(c, ((tnode *)m)->sn) : 0;
    case K_LNODE: {
        lnode *ln = (lnode *)m;
        int64_t sum = 0;
        for (uint32_t i = 0; i < ln->n; i++)
            sum += count_sn(c, ln->sn[i]);
        return sum;
    }
    default:
        return 0;
    }
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

static void stats_main(ctx *c, mainnode *m, cst_stats *s, int64_t depth);

static void stats_sn(ctx *c, snode *sn, cst_stats *s, int64_t depth)
{
    s->snodes++;
    s->pairs += sn->nsubs;
    if (sn->nsubs > 0)
        s->patterns++;
    if (depth > s->max_depth)
        s->max_depth = depth;
    if (sn->nsubs >= 2) {
        uint64_t cnt = 0;
        int64_t nodes = set_check(sn->subs.set, 0, &cnt);
        if (nodes > 0)
            s->setnodes += nodes;
    }
    if (sn->child) {
        s->inodes++;
        stats_main(c, gcas_read(c, sn->child), s, depth + 1);
    }
}

static void stats_main(ctx *c, mainnode *m, cst_stats *s, int64_t depth)
{
    switch (m->h.kind) {
    case K_CNODE: {
        cnode *cn = (cnode *)m;
        s->cnodes++;
        for (uint32_t i = 0; i < cn->n; i++) {
            cst_hdr *b = cn->array[i];
            if (b->kind == K_INODE) {
                s->inodes++;
                stats_main(c, gcas_read(c, (inode *)b), s, depth);
            } else {
                stats_sn(c, (snode *)b, s, depth);
            }
        }
        break;
    }
    case K_TNODE:
        s->tnodes++;
        if (((tnode *)m)->sn)
            stats_sn(c, ((tnode *)m)->sn, s, depth);
        break;
    case K_LNODE: {
        lnode *ln = (lnode *)m;
        s->lnodes++;
        for (uint32_t i = 0; i < ln->n; i++)
            stats_sn(c, ln->sn[i], s, depth);
        break;
    }
    default:
        break;
    }
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
        stats_main(&c, gcas_read(&c, root), out, 1);
        ctx_exit(&c);
        r = CST_OK;
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

enum { STAGE_NEXT, STAGE_GROUP, STAGE_CHILD };

struct cst_iter {
    cst_trie *snap;            /* owned read-only snapshot: keeps every node alive */
    frame *frames;
    size_t nframes, fcap;
    snode **path;
    size_t depth, pcap;
    snode *cur;
    int stage;
    set_cursor sc;
    int one_done;
    int started;
    int per_pair;              /* one id per group (cst_iter_new_pairs) */
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

/* Length of the pattern of it->cur (path + cur). */
static size_t pattern_len(const cst_iter *it, const cst_dialect *d)
{
    size_t len = it->cur->wlen + it->depth * d->sep_len;
    for (size_t i = 0; i < it->depth; i++)
        len += it->path[i]->wlen;
    return len;
}

static void pattern_write(const cst_iter *it, const cst_dialect *d, char *p)
{
    for (size_t i = 0; i < it->depth; i++) {
        memcpy(p, it->path[i]->word, it->path[i]->wlen);
        p += it->path[i]->wlen;
        memcpy(p, d->sep, d->sep_len);
        p += d->sep_len;
    }
    memcpy(p, it->cur->word, it->cur->wlen);
}

int cst_iter_next(cst_iter *it, cst_groups *out)
{
    const cst_dialect *d = &it->snap->d;
    out->ngroups = 0;
    out->need_pat = out->need_ids = out->need_groups = 0;
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
        if (it->stage == STAGE_GROUP) {
            size_t plen = pattern_len(it, d);
            if (out->ngroups >= out->groups_cap || pat + plen > out->pat_cap ||
                ids >= out->ids_cap) {
                if (out->ngroups == 0) {
                    out->need_pat = plen;
                    out->need_ids = 1;
                    out->need_groups = 1;
                    r = CST_ETRUNC;
                }
                break;
            }
            pattern_write(it, d, out->pat + pat);
            pat += plen;
            size_t got;
            int finished;
            if (it->cur->nsubs == 1) {
                out->ids[ids] = it->cur->subs.one;
                got = 1;
                finished = 1;
            } else {
                got = set_cursor_next(&it->sc, out->ids + ids,
                                      it->per_pair ? 1 : out->ids_cap - ids);
                finished = set_cursor_done(&it->sc);
            }
            ids += got;
            out->pat_end[out->ngroups] = (int64_t)pat;
            out->ids_end[out->ngroups] = (int64_t)ids;
            out->ngroups++;
            if (!finished && it->per_pair)
                continue; /* the next id of this pattern, as its own group */
            if (!finished)
                break; /* ids buffer full; continue this group next call */
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
        if (it->cur->nsubs > 0) {
            it->stage = STAGE_GROUP;
            if (it->cur->nsubs >= 2)
                set_cursor_init(&it->sc, it->cur->subs.set);
        } else {
            it->stage = STAGE_CHILD;
        }
    }
done:
    ctx_exit(&c);
    return r < 0 ? r : (int)out->ngroups;
}

/* ------------------------------------------------------------------------
 * Invariant checker
 * ---------------------------------------------------------------------- */

typedef struct chk {
    ctx *c;
    int strict;
    char *msg;
    size_t cap;
    int failed;
} chk;

static int fail(chk *k, const char *what, const void *node)
{
    if (!k->failed && k->msg && k->cap)
        snprintf(k->msg, k->cap, "%s (node %p)", what, node);
    k->failed = 1;
    return -1;
}

static int check_main(chk *k, mainnode *m, unsigned lev, int level_top, int trie_root,
                      uint64_t igen);

static int check_sn(chk *k, snode *sn, uint64_t gen)
{
    if (sn->h.kind != K_SNODE)
        return fail(k, "expected an S-node", sn);
    if (atomic_load_explicit(&sn->h.rc, memory_order_relaxed) == 0)
        return fail(k, "S-node with reference count 0", sn);
    if (sn->nsubs >= 2) {
        uint64_t cnt = 0;
        if (set_check(sn->subs.set, 0, &cnt) < 0)
            return fail(k, "broken subscriber set", sn);
        if (cnt != sn->nsubs)
            return fail(k, "subscriber count differs from the set's size", sn);
    }
    if (sn->h.b1 == W_LITERAL && sn->hash != word_hash(sn->word, sn->wlen))
        return fail(k, "S-node hash does not match its word", sn);
    if (sn->child == NULL) {
        if (k->strict && sn->nsubs == 0)
            return fail(k, "S-node with no subscribers and no child was not pruned", sn);
        return 0;
    }
    if (sn->child->h.kind != K_INODE)
        return fail(k, "S-node child is not an I-node", sn);
    if (sn->child->gen > gen)
        return fail(k, "child I-node of a newer generation than its parent", sn);
    mainnode *cm = gcas_read(k->c, sn->child);
    if (k->strict && cm->h.kind == K_TNODE)
        return fail(k, "entombed topic level left in a quiescent trie", cm);
    return check_main(k, cm, 0, 1, 0, sn->child->gen);
}

static int check_main(chk *k, mainnode *m, unsigned lev, int level_top, int trie_root,
                      uint64_t igen)
{
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
        if (cn->n != (uint32_t)(popc(cn->bitmap) + popc(spec)))
            return fail(k, "C-node size differs from its bitmaps", cn);
        if (spec >> SPEC_SLOTS)
            return fail(k, "C-node spec mask out of range", cn);
        if (spec && lev != 0)
            return fail(k, "wildcard slots below hash level 0", cn);
        if ((spec & (1u << (W_EMPTY_PATTERN - 1))) && !trie_root)
            return fail(k, "zero-word pattern outside the trie's top C-node", cn);
        if (cn->gen > igen)
            return fail(k, "C-node of a newer generation than its I-node", cn);
        if (k->strict) {
            if (lev > 0 && (cn->n == 0 || (cn->n == 1 && cn->array[0]->kind == K_SNODE)))
                return fail(k, "C-node below hash level 0 was not contracted", cn);
            if (level_top && !trie_root && cn->n == 0)
                return fail(k, "empty topic level was not entombed", cn);
        }
        uint32_t pos = 0;
        for (unsigned f = 0; f < 32; f++) {
            if (!(cn->bitmap & (1u << f)))
                continue;
            cst_hdr *b = cn->array[pos++];
            if (b->kind == K_INODE) {
                inode *in = (inode *)b;
                if (in->gen > cn->gen)
                    return fail(k, "I-node of a newer generation than its C-node", in);
                if (lev + 5 > MAX_HASH_LEVEL + 5)
                    return fail(k, "hash level overflow", in);
                mainnode *sm = gcas_read(k->c, in);
                if (k->strict && sm->h.kind == K_TNODE)
                    return fail(k, "tomb left in a quiescent trie", sm);
                if (sm->h.kind == K_LNODE && lev + 5 <= MAX_HASH_LEVEL)
                    return fail(k, "L-node above the last hash level", sm);
                if (check_main(k, sm, lev + 5, 0, 0, in->gen) < 0)
                    return -1;
            } else if (b->kind == K_SNODE) {
                snode *sn = (snode *)b;
                if (sn->h.b1 != W_LITERAL)
                    return fail(k, "wildcard S-node in a hashed slot", sn);
                if (frag(sn->hash, lev) != f)
                    return fail(k, "S-node in the wrong hash slot", sn);
                if (check_sn(k, sn, cn->gen) < 0)
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
            if (check_sn(k, sn, cn->gen) < 0)
                return -1;
        }
        return 0;
    }
    case K_TNODE: {
        tnode *tn = (tnode *)m;
        if (k->strict)
            return fail(k, "tomb left in a quiescent trie", tn);
        return tn->sn ? check_sn(k, tn->sn, igen) : 0;
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
            if (check_sn(k, ln->sn[i], igen) < 0)
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
    chk k = {&c, strict, msg, msg_cap, 0};
    inode *root = root_read(&c);
    int r = check_main(&k, gcas_read(&c, root), 0, 1, 1, root->gen);
    ctx_exit(&c);
    return r < 0 ? CST_EINVAL : 0;
}

/* ------------------------------------------------------------------------
 * Dump
 * ---------------------------------------------------------------------- */

typedef struct dumper {
    ctx *c;
    char *buf;
    size_t cap, len;
} dumper;

static void put(dumper *d, int indent, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#include <stdarg.h>
static void put(dumper *d, int indent, const char *fmt, ...)
{
    char line[512];
    int n = snprintf(line, sizeof line, "%*s", indent * 2, "");
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

static void dump_main(dumper *d, mainnode *m, int indent);

static void dump_sn(dumper *d, snode *sn, int indent)
{
    static const char *kinds[] = {"word", "one-level", "many-level", "zero-word"};
    char ids[128] = "";
    if (sn->nsubs == 1)
        snprintf(ids, sizeof ids, " id=%" PRIu64, sn->subs.one);
    put(d, indent, "S %s '%.*s' subs=%u%s", kinds[sn->h.b1 & 3], (int)(sn->wlen > 200 ? 200 : sn->wlen),
        sn->word, sn->nsubs, ids);
    if (sn->child) {
        put(d, indent + 1, "I gen=%" PRIu64, sn->child->gen);
        dump_main(d, gcas_read(d->c, sn->child), indent + 2);
    }
}

static void dump_main(dumper *d, mainnode *m, int indent)
{
    switch (m->h.kind) {
    case K_CNODE: {
        cnode *cn = (cnode *)m;
        put(d, indent, "C lev=%u gen=%" PRIu64 " bitmap=%08x spec=%x n=%u", cn->m.h.b1, cn->gen,
            cn->bitmap, cn->m.h.b2, cn->n);
        for (uint32_t i = 0; i < cn->n; i++) {
            cst_hdr *b = cn->array[i];
            if (b->kind == K_INODE) {
                put(d, indent + 1, "I gen=%" PRIu64, ((inode *)b)->gen);
                dump_main(d, gcas_read(d->c, (inode *)b), indent + 2);
            } else {
                dump_sn(d, (snode *)b, indent + 1);
            }
        }
        break;
    }
    case K_TNODE:
        put(d, indent, "T%s", ((tnode *)m)->sn ? "" : " (empty level)");
        if (((tnode *)m)->sn)
            dump_sn(d, ((tnode *)m)->sn, indent + 1);
        break;
    case K_LNODE:
        put(d, indent, "L n=%u", ((lnode *)m)->n);
        for (uint32_t i = 0; i < ((lnode *)m)->n; i++)
            dump_sn(d, ((lnode *)m)->sn[i], indent + 1);
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
    dumper d = {&c, buf, buf ? cap : 0, 0};
    inode *root = root_read(&c);
    put(&d, 0, "I gen=%" PRIu64 "%s (root)", root->gen, t->readonly ? " read-only" : "");
    dump_main(&d, gcas_read(&c, root), 1);
    ctx_exit(&c);
    return d.len;
}
