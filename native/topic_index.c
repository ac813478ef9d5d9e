/*
 * topic_index.c - the topic index: a trie used the other way round.  Its
 * keys are literal topics, each holding one id (cst_topic_put, _remove and
 * _get: ordinary updates and reads of the topic's words, every one literal),
 * and it answers reverse queries: every stored topic that a filter matches
 * (the retained-message question: a client subscribes to sensors/+/temp;
 * which stored topics does it get?).  The same walk over a subscription
 * trie lists the stored filters that may share a topic with a filter
 * (cst_rquery_filters).
 *
 * An index's levels hold literal words only.  A reverse query runs the
 * filter as an automaton down that tree.
 *
 * The filter, normalised (as cstrie/relations.py does it): a run of wildcards
 * with s one-word wildcards and k >= 1 many-word ones matches any
 * s + k * multi_min or more words, so it becomes that many RQ_ANY items and
 * one RQ_STAR (zero or more words).  No two RQ_STAR are adjacent, and
 * multi_min is gone.  Positions 0..m of the normalised filter are the
 * automaton's states; m accepts.
 *
 * The walk: a topic level (the C-node under an S-node) is reached with S,
 * the set of positions alive after the words above it (closed: a position
 * before an RQ_STAR brings the one after it).  A word w of the level leads to
 * step(S, w): j+1 for a literal equal to w or an RQ_ANY at j, j itself for an
 * RQ_STAR at j.  The topic ending at w matches when m is in step(S, w), and
 * the level below w is walked only when some position other than m is alive.
 * When every alive position expects a literal, the level is probed for those
 * words (a hash probe each) instead of read whole: that is why a query costs
 * what the filter's literal words leave open, not the size of the index.
 * The index is a tree, so each topic is reached once, by one path, with one
 * set: each topic comes once, with no memo table.  The sets live on a stack,
 * one per topic level on the current path.
 *
 * The $ rule (MQTT): a filter whose first word is a wildcard matches no topic
 * whose first word starts with '$'; such top-level words are skipped.
 *
 * The walk keeps its state between calls (cst_rquery_next fills a buffer and
 * returns), on a read-only snapshot that the query owns: the nodes it points
 * to stay alive (the snapshot holds them) and do not change.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ------------------------------------------------------------------------
 * Keys: literal topics with one id each
 * ---------------------------------------------------------------------- */

/* A topic's words as an index stores them, in this thread's scratch (*scp):
 * every word literal (a wildcard token in a topic is a literal word, where
 * the dialect allows one), and the zero-word topic in the top level's
 * zero-word slot.  The count, or a CST_E* code. */
static int64_t topic_key_words(cst_trie *t, const char *topic, size_t len, scratch **scp)
{
    scratch *sc = *scp = scratch_get();
    if (sc == NULL)
        return CST_ENOMEM;
    int64_t n = parse_words(t, topic, len, 0, sc);
    if (n == 0)
        n = parse_words(t, topic, len, 1, sc);
    return n;
}

int cst_topic_put(cst_trie *t, const char *topic, size_t len, uint64_t id, uint64_t *old)
{
    *old = 0;
    if (t->readonly)
        return CST_EREADONLY;
    scratch *sc;
    int64_t n = topic_key_words(t, topic, len, &sc);
    if (n < 0)
        return (int)n;
    return words_update(t, sc, n, id, UPD_PUT, old);
}

int cst_topic_remove(cst_trie *t, const char *topic, size_t len, uint64_t *old)
{
    *old = 0;
    if (t->readonly)
        return CST_EREADONLY;
    scratch *sc;
    int64_t n = topic_key_words(t, topic, len, &sc);
    if (n < 0)
        return (int)n;
    /* Read the id, then remove exactly that id: a put that replaced it in
     * between makes the removal find nothing, and the loop reads again.
     * Lock-free: each turn that fails saw another update land. */
    for (;;) {
        uint64_t id;
        int64_t got = words_subscribers(t, sc, n, &id, 1);
        if (got <= 0)
            return (int)got;
        int r = words_update(t, sc, n, id, 0, NULL);
        if (r != 0) {
            if (r == 1)
                *old = id;
            return r;
        }
    }
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

/* ------------------------------------------------------------------------
 * Reverse queries: the query's state
 * ---------------------------------------------------------------------- */

enum { RQ_LIT, RQ_ANY, RQ_STAR };

typedef struct rq_item {
    uint8_t kind;
    word w;              /* RQ_LIT: the word (its bytes in q->text) */
} rq_item;

/*
 * A pending piece of the walk.  F_LEVEL: the entries of main node m (a
 * topic level's C-node at some hash level, an L-node or a T-node) from pos
 * on, all read.  F_PROBE: the top C-node cn of a level whose alive positions
 * all expect literals; pos runs over those positions.  Both at topic depth
 * `depth` (the words above are path[0 .. depth)), with the alive set
 * sets[set .. set + nset).  owns_set: popping the frame drops its set.
 */
enum { F_LEVEL, F_PROBE };

typedef struct rq_frame {
    mainnode *m;
    uint32_t pos;
    uint8_t kind;
    uint8_t owns_set;
    size_t depth;
    size_t set, nset;
} rq_frame;

struct cst_rquery {
    cst_trie *snap;      /* read-only snapshot the query walks */
    char *text;          /* the filter's bytes (items point into it) */
    rq_item *items;
    size_t m;
    int dollar;          /* first filter word is a wildcard, dialect has the $ rule */
    int filters;         /* walking stored filters (a subscription trie), not topics */
    int started;
    rq_frame *st;
    size_t sp, stcap;
    uint32_t *sets;
    size_t nsets, setcap;
    snode **path;
    size_t pathcap;
    uint32_t *tmp;       /* the next set, built before it is kept */
    size_t tmpcap;
};

static int grow(void **buf, size_t *cap, size_t need, size_t elem)
{
    return scratch_reserve(buf, cap, need, elem);
}

/* ------------------------------------------------------------------------
 * The filter
 * ---------------------------------------------------------------------- */

static int normalise(cst_rquery *q, cst_trie *t, const char *filter, size_t len)
{
    scratch *sc = scratch_get();
    if (sc == NULL)
        return CST_ENOMEM;
    int64_t n = parse_words(t, filter, len, 1, sc);
    if (n < 0)
        return (int)n;
    q->text = malloc(len + 1);
    if (q->text == NULL)
        return CST_ENOMEM;
    memcpy(q->text, filter, len);
    size_t multi_min = (size_t)t->d.multi_min;
    /* at most one item per word, plus multi_min per many-word wildcard */
    size_t cap = (size_t)n * (multi_min + 1) + 1;
    q->items = malloc(cap * sizeof *q->items);
    if (q->items == NULL)
        return CST_ENOMEM;
    size_t m = 0;
    if (n == 1 && sc->w[0].kind == W_EMPTY_PATTERN) {
        q->m = 0; /* the zero-word filter matches the zero-word topic only */
        return 0;
    }
    q->dollar = t->d.dollar_rule && sc->w[0].kind != W_LITERAL;
    for (int64_t i = 0; i < n;) {
        const word *w = &sc->w[i];
        if (w->kind == W_LITERAL) {
            q->items[m] = (rq_item){RQ_LIT, *w};
            q->items[m++].w.p = q->text + (w->p - filter);
            i++;
            continue;
        }
        size_t singles = 0, multis = 0;
        for (; i < n && sc->w[i].kind != W_LITERAL; i++)
            *(sc->w[i].kind == W_SINGLE ? &singles : &multis) += 1;
        size_t anys = singles + multis * multi_min;
        for (size_t k = 0; k < anys; k++)
            q->items[m++] = (rq_item){.kind = RQ_ANY};
        if (multis)
            q->items[m++] = (rq_item){.kind = RQ_STAR};
    }
    q->m = m;
    return 0;
}

/* ------------------------------------------------------------------------
 * Alive sets
 * ---------------------------------------------------------------------- */

/* Append position j and what an RQ_STAR at j lets through (j + 1) to the
 * sorted set out[0 .. *k), once each.  Steps visit positions in increasing
 * order and add j or j + 1, so appending keeps it sorted. */
static void add_closed(const cst_rquery *q, uint32_t *out, size_t *k, uint32_t j)
{
    for (;;) {
        if (*k == 0 || out[*k - 1] < j)
            out[(*k)++] = j;
        else if (out[*k - 1] != j)
            return; /* cannot happen: positions only grow */
        if (j < q->m && q->items[j].kind == RQ_STAR)
            j++;
        else
            return;
    }
}


/* One arbitrary topic word from the sorted set S[0 .. n) into out. */
static size_t step_any(const cst_rquery *q, const uint32_t *S, size_t n, uint32_t *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t j = S[i];
        if (j < q->m)
            add_closed(q, out, &k, q->items[j].kind == RQ_STAR ? j : j + 1);
    }
    return k;
}

/* step(S, word of sn) into q->tmp (room for m + 1); returns its size.  A
 * stored filter's wildcard word (filters mode) stands for any word
 * (one-level) or any run of at least multi_min words (many-level): the
 * positions some such choice reaches. */
static size_t step(cst_rquery *q, const uint32_t *S, size_t n, const snode *sn)
{
    size_t k = 0;
    if (q->filters && sn->h.b1 == W_SINGLE)
        return step_any(q, S, n, q->tmp);
    if (q->filters && sn->h.b1 == W_MULTI) {
        /* Some run of t >= multi_min words takes position j to p >= j when
         * the items j .. p-1 hold at least multi_min literal or one-word
         * items (one word each), or an RQ_STAR among items j .. p absorbs
         * the words that are short.  The smallest alive position reaches
         * whatever a larger one does: one sweep from it, O(m). */
        size_t nonstar = 0;
        int star = 0;
        for (uint32_t p = S[0]; p <= q->m; p++) {
            star |= p < q->m && q->items[p].kind == RQ_STAR;
            if (star || nonstar >= (size_t)q->snap->d.multi_min)
                q->tmp[k++] = p;
            nonstar += p < q->m && q->items[p].kind != RQ_STAR;
        }
        return k;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t j = S[i];
        if (j == q->m)
            continue;
        const rq_item *it = &q->items[j];
        if (it->kind == RQ_STAR)
            add_closed(q, q->tmp, &k, j);
        else if (it->kind == RQ_ANY || word_eq(sn, &it->w))
            add_closed(q, q->tmp, &k, j + 1);
    }
    return k;
}

/* ------------------------------------------------------------------------
 * The walk
 * ---------------------------------------------------------------------- */

static int push(cst_rquery *q, rq_frame f)
{
    if (grow((void **)&q->st, &q->stcap, q->sp + 1, sizeof *q->st) < 0)
        return CST_ENOMEM;
    q->st[q->sp++] = f;
    return 0;
}

/* Push the topic level under I-node in, reached at depth with the set kept
 * at sets[set .. set + nset). */
static int open_level(cst_rquery *q, ctx *c, inode *in, size_t depth, size_t set, size_t nset)
{
    mainnode *m = gcas_read(c, in);
    int probe = m->h.kind == K_CNODE;
    for (size_t i = 0; i < nset && probe; i++) {
        uint32_t j = q->sets[set + i];
        probe = j == q->m || q->items[j].kind == RQ_LIT;
    }
    return push(q, (rq_frame){m, 0, (uint8_t)(probe ? F_PROBE : F_LEVEL), 1, depth, set, nset});
}

static inline mainnode *read_plain(void *c, inode *in) { return gcas_read(c, in); }

static size_t topic_bytes(const cst_rquery *q, size_t depth)
{
    size_t b = 0;
    for (size_t i = 0; i < depth; i++)
        b += q->path[i]->wlen + (i ? q->snap->d.sep_len : 0);
    return b;
}

typedef struct rq_out {
    char *text;
    size_t text_cap, text_used;
    int64_t *ends;
    uint64_t *ids;
    size_t cap, k;
    size_t *need;
    int count_only;
    int64_t counted;
} rq_out;

/* Write the topic path[0 .. depth) with id; 1 = written, 0 = no room (the
 * caller stops and comes back to the same word), CST_ETRUNC = the topic
 * alone does not fit. */
static int emit(cst_rquery *q, rq_out *o, size_t depth, uint64_t id)
{
    if (o->count_only) {
        o->counted++;
        return 1;
    }
    size_t b = topic_bytes(q, depth);
    if (o->k == o->cap || b > o->text_cap - o->text_used) {
        if (o->k == 0) {
            *o->need = b;
            return CST_ETRUNC;
        }
        return 0;
    }
    char *p = o->text + o->text_used;
    const cst_dialect *d = &q->snap->d;
    for (size_t i = 0; i < depth; i++) {
        if (i) {
            memcpy(p, d->sep, d->sep_len);
            p += d->sep_len;
        }
        memcpy(p, q->path[i]->word, q->path[i]->wlen);
        p += q->path[i]->wlen;
    }
    o->text_used += b;
    o->ends[o->k] = (int64_t)o->text_used;
    o->ids[o->k] = id;
    o->k++;
    return 1;
}

/* Word sn of the level of frame fi (at its depth): emit its topic if it
 * matches, then walk the level below it.  1 = done with sn (the frame has
 * moved past it), 0 = no room to emit (nothing changed: the same word comes
 * again on the next call), < 0 error. */
static int visit(cst_rquery *q, ctx *c, rq_out *o, size_t fi, snode *sn)
{
    rq_frame fr = q->st[fi];
    const rq_frame *f = &fr;
    q->st[fi].pos++; /* undone if there is no room to emit */
    if (f->depth == 0 && q->dollar && sn->wlen > 0 && sn->word[0] == '$')
        return 1;
    if (grow((void **)&q->tmp, &q->tmpcap, q->m + 1, sizeof *q->tmp) < 0)
        return CST_ENOMEM;
    size_t k = step(q, q->sets + f->set, f->nset, sn);
    if (k == 0)
        return 1;
    size_t depth = f->depth;
    if (grow((void **)&q->path, &q->pathcap, depth + 1, sizeof *q->path) < 0)
        return CST_ENOMEM;
    q->path[depth] = sn;
    if (q->tmp[k - 1] == q->m && sn->nsubs > 0) {
        int r = emit(q, o, depth + 1, q->filters ? 0 : snode_ids(sn)[0]);
        if (r <= 0) {
            q->st[fi].pos--;
            return r;
        }
    }
    if (sn->child == NULL || (k == 1 && q->tmp[0] == q->m && !q->filters))
        return 1; /* nothing below, or nothing alive but the end (a stored
                     many-level wildcard may still match zero words) */
    if (grow((void **)&q->sets, &q->setcap, q->nsets + k, sizeof *q->sets) < 0)
        return CST_ENOMEM;
    size_t set = q->nsets;
    memcpy(q->sets + set, q->tmp, k * sizeof *q->tmp);
    q->nsets += k;
    return open_level(q, c, sn->child, depth + 1, set, k) < 0 ? CST_ENOMEM : 1;
}

/* The zero-word topic (the top level's zero-word slot) and the top level. */
static int start(cst_rquery *q, ctx *c, rq_out *o)
{
    inode *root = root_read(c);
    if (grow((void **)&q->sets, &q->setcap, 2, sizeof *q->sets) < 0)
        return CST_ENOMEM;
    size_t k = 0;
    add_closed(q, q->sets, &k, 0);
    if (q->sets[k - 1] == q->m) {
        mainnode *m = gcas_read(c, root);
        snode *e = m->h.kind == K_CNODE ? (snode *)spec_get((cnode *)m, W_EMPTY_PATTERN - 1)
                                        : NULL;
        if (e != NULL && e->nsubs > 0) {
            int r = emit(q, o, 0, snode_ids(e)[0]);
            if (r <= 0)
                return r;
        }
    }
    q->started = 1;
    if (k == 1 && q->sets[0] == q->m && !q->filters)
        return 1; /* the filter matches the zero-word topic only (a stored
                     many-level wildcard may still match it: filters mode) */
    q->nsets = k;
    return open_level(q, c, root, 0, 0, k) < 0 ? CST_ENOMEM : 1;
}

static int64_t run(cst_rquery *q, rq_out *o)
{
    ctx c;
    if (ctx_enter(&c, q->snap) < 0)
        return CST_ENOMEM;
    int64_t r = 0;
    if (!q->started) {
        r = start(q, &c, o);
        if (r <= 0)
            goto out;
    }
    while (q->sp > 0) {
        rq_frame *f = &q->st[q->sp - 1];
        snode *sn = NULL;
        if (f->kind == F_PROBE) {
            /* the next alive position whose literal was not probed before */
            cnode *cn = (cnode *)f->m;
            const uint32_t *S = q->sets + f->set;
            /* filters mode: then the level's stored wildcards (pos nset and
             * nset + 1) */
            for (; f->pos < f->nset + (q->filters ? 2u : 0u) && sn == NULL;
                 sn == NULL ? f->pos++ : 0) {
                if (f->pos >= f->nset) {
                    sn = (snode *)spec_get(
                        cn, (f->pos == f->nset ? W_SINGLE : W_MULTI) - 1u);
                    continue;
                }
                uint32_t j = S[f->pos];
                if (j == q->m)
                    continue;
                const word *b = &q->items[j].w;
                int dup = 0;
                for (uint32_t i = 0; i < f->pos && !dup; i++) {
                    const word *a = &q->items[S[i]].w;
                    dup = S[i] != q->m && a->len == b->len && a->hash == b->hash &&
                          memcmp(a->p, b->p, a->len) == 0;
                }
                if (!dup)
                    sn = level_find(cn, b, read_plain, &c);
            }
        } else {
            mainnode *m = f->m;
            uint32_t n = m->h.kind == K_CNODE   ? ((cnode *)m)->n
                         : m->h.kind == K_LNODE ? ((lnode *)m)->n
                         : m->h.kind == K_TNODE ? (((tnode *)m)->sn != NULL)
                                                : 0;
            uint32_t first = m->h.kind == K_CNODE ? (uint32_t)popc(m->h.b2) : 0;
            if (!q->filters && f->pos < first)
                f->pos = first; /* spec slots: not topic words */
            while (q->filters && f->pos < first) {
                /* stored wildcards are words; the zero-word pattern (start)
                 * and share groups are not */
                uint8_t kind = ((snode *)((cnode *)m)->array[f->pos])->h.b1;
                if (kind == W_SINGLE || kind == W_MULTI)
                    break;
                f->pos++;
            }
            if (f->pos < n) {
                cst_hdr *b = m->h.kind == K_CNODE   ? ((cnode *)m)->array[f->pos]
                             : m->h.kind == K_LNODE ? &((lnode *)m)->sn[f->pos]->h
                                                    : &((tnode *)m)->sn->h;
                if (b->kind != K_SNODE) {
                    /* a deeper hash level of the same topic level */
                    f->pos++;
                    rq_frame sub = {gcas_read(&c, (inode *)b), 0, F_LEVEL, 0, f->depth, f->set,
                                    f->nset};
                    if (push(q, sub) < 0) {
                        r = CST_ENOMEM;
                        goto out;
                    }
                    continue;
                }
                sn = (snode *)b;
            }
        }
        if (sn == NULL) {
            if (f->owns_set)
                q->nsets = f->set;
            q->sp--;
            continue;
        }
        int v = visit(q, &c, o, q->sp - 1, sn);
        if (v < 0) {
            r = v;
            goto out;
        }
        if (v == 0)
            break; /* no room: the same word again next call */
    }
    r = 0;
out:
    ctx_exit(&c);
    if (r < 0)
        return r;
    return o->count_only ? o->counted : (int64_t)o->k;
}

/* ------------------------------------------------------------------------
 * Reverse queries: the API
 * ---------------------------------------------------------------------- */

cst_rquery *cst_rquery_new(cst_trie *t, const char *filter, size_t len, int *err)
{
    *err = 0;
    cst_rquery *q = calloc(1, sizeof *q);
    if (q == NULL) {
        *err = CST_ENOMEM;
        return NULL;
    }
    int r = normalise(q, t, filter, len);
    if (r == 0 && (q->snap = cst_snapshot(t, 1)) == NULL)
        r = CST_ENOMEM;
    if (r < 0) {
        *err = r;
        cst_rquery_free(q);
        return NULL;
    }
    return q;
}

int64_t cst_rquery_next(cst_rquery *q, char *text, size_t text_cap, int64_t *ends, uint64_t *ids,
                        size_t cap, size_t *need)
{
    *need = 0;
    if (q->started && q->sp == 0)
        return 0;
    rq_out o = {text, text_cap, 0, ends, ids, cap, 0, need, 0, 0};
    return run(q, &o);
}

void cst_rquery_free(cst_rquery *q)
{
    if (q == NULL)
        return;
    if (q->snap != NULL)
        cst_free(q->snap);
    free(q->text);
    free(q->items);
    free(q->st);
    free(q->sets);
    free(q->path);
    free(q->tmp);
    free(q);
}

cst_rquery *cst_rquery_filters(cst_trie *t, const char *filter, size_t len, int *err)
{
    cst_rquery *q = cst_rquery_new(t, filter, len, err);
    if (q != NULL)
        q->filters = 1;
    return q;
}

int64_t cst_rquery_count(cst_trie *t, const char *filter, size_t len)
{
    int err;
    cst_rquery *q = cst_rquery_new(t, filter, len, &err);
    if (q == NULL)
        return err;
    size_t need;
    rq_out o = {NULL, 0, 0, NULL, NULL, 0, 0, &need, 1, 0};
    int64_t r = run(q, &o);
    cst_rquery_free(q);
    return r;
}
