/*
 * build.c - bulk construction of a trie from (pattern, id) pairs.
 *
 * Loading a million pairs through subscribe() copies a path per pair.  A
 * private trie that nobody else can see yet needs none of that: the pairs are
 * parsed, sorted by their word sequence, and every node is built once,
 * bottom-up, in its final shape (C-nodes with their final bitmaps, subscriber
 * sets built by bucketing).  The result is an ordinary writable handle.
 */
#include <stdlib.h>

#include "internal.h"

typedef struct bpair {
    size_t w0;       /* first word in the flat word array */
    uint32_t nw;
    uint64_t id;
    int64_t index;   /* position in the caller's arrays */
} bpair;

typedef struct builder {
    word *w;         /* every pair's words, flat */
    uint32_t *uid;   /* interned id of each word */
    bpair *p;
    uint64_t gen;
    uint64_t *ids;   /* scratch for one pattern's ids */
    uint8_t *kept;   /* caller's: 1 for each pair that was not a duplicate */
} builder;

static _Thread_local const uint32_t *sort_uid;

/* Patterns compare word by word on interned word ids (any total order that
 * groups equal words works), a prefix before its extensions, then by id. */
static int pair_cmp(const void *x, const void *y)
{
    const bpair *a = x, *b = y;
    uint32_t m = a->nw < b->nw ? a->nw : b->nw;
    const uint32_t *ua = sort_uid + a->w0, *ub = sort_uid + b->w0;
    for (uint32_t i = 0; i < m; i++)
        if (ua[i] != ub[i])
            return ua[i] < ub[i] ? -1 : 1;
    if (a->nw != b->nw)
        return a->nw < b->nw ? -1 : 1;
    return a->id == b->id ? 0 : (a->id < b->id ? -1 : 1);
}

static int same_word(const word *a, const word *b)
{
    return a->kind == b->kind && a->hash == b->hash && a->len == b->len &&
           memcmp(a->p, b->p, a->len) == 0;
}

/* Give every distinct word (kind + bytes) a small id: uid[i] for word i. */
static int intern_words(const word *w, size_t nw, uint32_t *uid)
{
    size_t cap = 16;
    while (cap < nw * 2)
        cap *= 2;
    int64_t *table = malloc(cap * sizeof *table); /* index of a word, -1 empty */
    if (table == NULL)
        return -1;
    for (size_t i = 0; i < cap; i++)
        table[i] = -1;
    uint32_t next = 0;
    for (size_t i = 0; i < nw; i++) {
        uint64_t h = w[i].hash ^ ((uint64_t)w[i].kind * UINT64_C(0x9e3779b97f4a7c15)) ^
                     w[i].len;
        size_t slot = (size_t)(h * UINT64_C(0xff51afd7ed558ccd) >> 7) & (cap - 1);
        for (;;) {
            int64_t e = table[slot];
            if (e < 0) {
                table[slot] = (int64_t)i;
                uid[i] = next++;
                break;
            }
            if (same_word(&w[e], &w[i])) {
                uid[i] = uid[e];
                break;
            }
            slot = (slot + 1) & (cap - 1);
        }
    }
    free(table);
    return 0;
}

/* Strict UTF-8 (no overlongs, no surrogates, at most U+10FFFF). */
static int utf8_valid(const char *p, size_t n)
{
    const unsigned char *s = (const unsigned char *)p;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;
        unsigned min;
        if ((c & 0xe0) == 0xc0) {
            k = 1, min = 0x80, c &= 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            k = 2, min = 0x800, c &= 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            k = 3, min = 0x10000, c &= 0x07;
        } else {
            return 0;
        }
        if (i + k >= n)
            return 0; /* truncated sequence */
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80)
                return 0;
            c = (c << 6) | (s[i + j] & 0x3f);
        }
        if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
            return 0;
        i += k + 1;
    }
    return 1;
}

static mainnode *build_level(builder *b, size_t lo, size_t hi, uint32_t k);

/* A C-node at hash level lev over literal S-nodes sn[0..m) (references taken
 * over), plus the spec S-nodes at level 0.  On failure everything is released. */
static cnode *build_hash(builder *b, snode **sn, size_t m, unsigned lev, snode **spec)
{
    size_t count[32] = {0};
    for (size_t i = 0; i < m; i++)
        count[frag(sn[i]->hash, lev)]++;
    uint32_t bitmap = 0;
    for (unsigned f = 0; f < 32; f++)
        if (count[f])
            bitmap |= 1u << f;
    unsigned specmask = 0;
    for (unsigned s = 0; spec && s < SPEC_SLOTS; s++)
        if (spec[s])
            specmask |= 1u << s;
    snode **sorted = malloc((m ? m : 1) * sizeof *sorted);
    cnode *cn = cnode_alloc((uint32_t)(popc(bitmap) + popc(specmask)), lev, b->gen);
    if (sorted == NULL || cn == NULL) {
        free(sorted);
        if (cn)
            cst_dealloc(cn, sizeof(cnode) + cn->n * sizeof(cst_hdr *));
        goto fail;
    }
    size_t start[32], pos = 0;
    for (unsigned f = 0; f < 32; f++) {
        start[f] = pos;
        pos += count[f];
    }
    size_t fill[32];
    memcpy(fill, start, sizeof fill);
    for (size_t i = 0; i < m; i++)
        sorted[fill[frag(sn[i]->hash, lev)]++] = sn[i];
    cn->bitmap = bitmap;
    cn->m.h.b2 = (uint8_t)specmask;
    uint32_t w = 0;
    int failed = 0;
    for (unsigned f = 0; f < 32; f++) {
        if (!count[f])
            continue;
        snode **grp = sorted + start[f];
        if (count[f] == 1) {
            cn->array[w++] = &grp[0]->h;
            continue;
        }
        mainnode *sub = NULL;
        int consumed = 0; /* a failed build_hash released grp itself */
        if (!failed) {
            if (lev + 5 > MAX_HASH_LEVEL) {
                lnode *ln = lnode_alloc((uint32_t)count[f]);
                if (ln) {
                    memcpy(ln->sn, grp, count[f] * sizeof(snode *));
                    sub = &ln->m;
                }
            } else {
                cnode *c = build_hash(b, grp, count[f], lev + 5, NULL);
                sub = c ? &c->m : NULL;
                consumed = c == NULL;
            }
        }
        inode *in = sub ? inode_new(b->gen, sub) : NULL;
        if (in == NULL) {
            if (sub)
                node_release(&sub->h);
            else if (!consumed)
                for (size_t i = 0; i < count[f]; i++)
                    node_release(&grp[i]->h);
            failed = 1;
            cn->array[w++] = NULL;
            continue;
        }
        cn->array[w++] = &in->h;
    }
    for (unsigned s = 0; spec && s < SPEC_SLOTS; s++)
        if (spec[s])
            cn->array[w++] = &spec[s]->h;
    free(sorted);
    if (failed) {
        /* drop the NULL holes, then the node with what it holds */
        uint32_t j = 0;
        for (uint32_t i = 0; i < cn->n; i++)
            if (cn->array[i])
                cn->array[j++] = cn->array[i];
        uint32_t full = cn->n;
        cn->n = j;
        for (uint32_t i = 0; i < j; i++)
            node_release(cn->array[i]);
        cst_dealloc(cn, sizeof(cnode) + full * sizeof(cst_hdr *));
        return NULL;
    }
    return cn;
fail:
    for (size_t i = 0; i < m; i++)
        node_release(&sn[i]->h);
    for (unsigned s = 0; spec && s < SPEC_SLOTS; s++)
        if (spec[s])
            node_release(&spec[s]->h);
    return NULL;
}

/* The S-node for the group p[lo..hi) sharing words 0..k (all have > k words). */
static snode *build_word(builder *b, size_t lo, size_t hi, uint32_t k)
{
    const word *wk = &b->w[b->p[lo].w0 + k];
    size_t t = lo;
    size_t nids = 0;
    while (t < hi && b->p[t].nw == k + 1) {
        if (nids == 0 || b->ids[nids - 1] != b->p[t].id) {
            b->ids[nids++] = b->p[t].id;
            if (b->kept)
                b->kept[b->p[t].index] = 1;
        }
        t++;
    }
    /* The set first: the recursion below reuses b->ids. */
    setnode *set = NULL;
    uint64_t one = nids == 1 ? b->ids[0] : 0;
    if (nids >= 2 && (set = set_build(b->ids, nids)) == NULL)
        return NULL;
    inode *child = NULL;
    if (t < hi) {
        mainnode *m = build_level(b, t, hi, k + 1);
        if (m == NULL)
            goto fail;
        child = inode_new(b->gen, m);
        if (child == NULL) {
            node_release(&m->h);
            goto fail;
        }
    }
    snode *sn = snode_make(wk->p, wk->len, wk->kind, wk->kind == W_LITERAL ? wk->hash : 0,
                           (uint32_t)nids, one, set, child);
    if (sn == NULL) {
        if (child)
            node_release(&child->h);
        goto fail;
    }
    return sn;
fail:
    if (set)
        set_release(set);
    return NULL;
}

/* The hash-level-0 C-node of topic level k for pairs p[lo..hi). */
static mainnode *build_level(builder *b, size_t lo, size_t hi, uint32_t k)
{
    size_t cap = 16, m = 0;
    snode **lit = malloc(cap * sizeof *lit);
    snode *spec[SPEC_SLOTS] = {NULL, NULL, NULL};
    if (lit == NULL)
        return NULL;
    size_t i = lo;
    while (i < hi) {
        const word *wi = &b->w[b->p[i].w0 + k];
        size_t j = i + 1;
        uint32_t ui = b->uid[b->p[i].w0 + k];
        while (j < hi && b->uid[b->p[j].w0 + k] == ui)
            j++;
        snode *sn = build_word(b, i, j, k);
        if (sn == NULL)
            goto fail;
        if (wi->kind == W_LITERAL) {
            if (m == cap) {
                snode **n2 = realloc(lit, 2 * cap * sizeof *lit);
                if (n2 == NULL) {
                    node_release(&sn->h);
                    goto fail;
                }
                lit = n2;
                cap *= 2;
            }
            lit[m++] = sn;
        } else {
            spec[wi->kind - 1] = sn;
        }
        i = j;
    }
    cnode *cn = build_hash(b, lit, m, 0, spec);
    free(lit);
    return cn ? &cn->m : NULL;
fail:
    for (size_t x = 0; x < m; x++)
        node_release(&lit[x]->h);
    for (unsigned s = 0; s < SPEC_SLOTS; s++)
        if (spec[s])
            node_release(&spec[s]->h);
    free(lit);
    return NULL;
}

cst_trie *cst_build(const cst_dialect *d, const char *data, const int64_t *offsets,
                    const uint64_t *ids, int64_t n, uint64_t max_id, uint8_t *kept,
                    int *status, int64_t *bad_index)
{
    *status = CST_OK;
    *bad_index = -1;
    cst_trie *t = cst_new(d);
    if (t == NULL) {
        *status = CST_ENOMEM;
        return NULL;
    }
    if (n == 0)
        return t;
    builder b = {0};
    b.kept = kept;
    if (kept)
        memset(kept, 0, (size_t)n);
    size_t wcap = 1024, nw = 0;
    scratch *sc = scratch_get();
    b.w = malloc(wcap * sizeof *b.w);
    b.p = malloc((size_t)n * sizeof *b.p);
    b.ids = malloc((size_t)n * sizeof *b.ids);
    if (sc == NULL || b.w == NULL || b.p == NULL || b.ids == NULL) {
        *status = CST_ENOMEM;
        goto out;
    }
    for (int64_t i = 0; i < n; i++) {
        if (offsets[i + 1] < offsets[i] ||
            !utf8_valid(data + offsets[i], (size_t)(offsets[i + 1] - offsets[i]))) {
            *status = CST_EINVAL;
            *bad_index = i;
            goto out;
        }
        if (max_id && (ids[i] == 0 || ids[i] > max_id)) {
            *status = CST_EINVAL;
            *bad_index = i;
            goto out;
        }
        int64_t k = parse_words(t, data + offsets[i], (size_t)(offsets[i + 1] - offsets[i]), 1, sc);
        if (k < 0) {
            *status = (int)k;
            *bad_index = i;
            goto out;
        }
        if (nw + (size_t)k > wcap) {
            while (nw + (size_t)k > wcap)
                wcap *= 2;
            word *w2 = realloc(b.w, wcap * sizeof *b.w);
            if (w2 == NULL) {
                *status = CST_ENOMEM;
                goto out;
            }
            b.w = w2;
        }
        memcpy(b.w + nw, sc->w, (size_t)k * sizeof(word));
        b.p[i] = (bpair){nw, (uint32_t)k, ids[i], i};
        nw += (size_t)k;
    }
    b.uid = malloc((nw ? nw : 1) * sizeof *b.uid);
    if (b.uid == NULL || intern_words(b.w, nw, b.uid) < 0) {
        *status = CST_ENOMEM;
        goto out;
    }
    sort_uid = b.uid;
    qsort(b.p, (size_t)n, sizeof *b.p, pair_cmp);
    ctx c;
    if (ctx_enter(&c, t) < 0) {
        *status = CST_ENOMEM;
        goto out;
    }
    inode *root = root_read(&c);
    b.gen = root->gen;
    mainnode *m = build_level(&b, 0, (size_t)n, 0);
    if (m == NULL) {
        ctx_exit(&c);
        *status = CST_ENOMEM;
        goto out;
    }
    /* The handle is private: swap its empty top C-node for the built one. */
    mainnode *old = atomic_load_explicit(&root->main, memory_order_relaxed);
    /* release: the built nodes are initialised before the handle is shared. */
    atomic_store_explicit(&root->main, m, memory_order_release);
    retire(&c, &old->h);
    ctx_exit(&c);
out:
    free(b.w);
    free(b.uid);
    free(b.p);
    free(b.ids);
    if (*status != CST_OK) {
        cst_free(t);
        return NULL;
    }
    return t;
}
