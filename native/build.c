/*
 * build.c - bulk construction of a trie from (pattern, id) pairs.
 *
 * Loading a million pairs through subscribe() copies a path per pair.  A
 * private trie that nobody else can see yet needs none of that.  The build
 * runs in three linear passes, with no comparison sort over the pairs:
 *
 *  1. parse every pattern and intern its prefixes: one hash table maps
 *     (parent prefix, word) to a prefix number, so every distinct prefix of
 *     every pattern - every S-node to be - gets a number, and a prefix's
 *     number is always greater than its parent's;
 *  2. bucket the pairs by the prefix they end at and the prefixes by their
 *     parent (counting sorts: compressed rows, input order kept inside each);
 *  3. make the nodes from the highest prefix number down, so each S-node's
 *     children exist before it: its subscriber set (its pairs' ids, sorted and
 *     deduplicated), the C-node of its children in its final shape, the I-node
 *     over it.  The children of prefix 0 (the empty prefix) form the top level.
 *
 * The inputs come from files and other processes, so nothing in them is
 * trusted: before any pattern is read the whole offset table is checked
 * against the data's length (bad_offset), and pass 1 checks every pattern's
 * UTF-8 and id before it parses it.
 *
 * The result is an ordinary writable handle.
 */
#include <stdlib.h>

#include "internal.h"

typedef struct builder {
    word *w;         /* every pair's words, flat */
    uint64_t gen;
    uint8_t *kept;   /* caller's: 1 for each pair that was not a duplicate */
} builder;

static int same_word(const word *a, const word *b)
{
    return a->kind == b->kind && a->hash == b->hash && a->len == b->len &&
           memcmp(a->p, b->p, a->len) == 0;
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

/* A C-node at hash level lev over literal S-nodes sn[0..m) (references taken
 * over), plus the spec S-nodes at level 0.  On failure everything is released. */
static cnode *build_hash(builder *b, snode **sn, size_t m, unsigned lev, snode **spec,
                         int padded)
{
    /* Loops over fragments visit only the set bits of the bitmap: most
     * levels have a few children, and 64-step loops would be most of the
     * build. */
    size_t count[1u << CN_BITS];
    cnmap bitmap = 0;
    for (size_t i = 0; i < m; i++) {
        uint32_t f = frag(sn[i]->hash, lev);
        if (!(bitmap & CN_BIT(f)))
            count[f] = 0;
        bitmap |= CN_BIT(f);
        count[f]++;
    }
    unsigned specmask = 0;
    for (unsigned s = 0; spec && s < SPEC_SLOTS; s++)
        if (spec[s])
            specmask |= 1u << s;
    /* Most levels are narrow: their sort buffer lives on the stack. */
    snode *local[64];
    snode **sorted = m <= 64 ? local : malloc(m * sizeof *sorted);
    cnode *cn = cnode_alloc((uint32_t)(popc_map(bitmap) + popc(specmask)), lev, b->gen);
    if (sorted == NULL || cn == NULL) {
        if (sorted != local)
            free(sorted);
        if (cn)
            node_free(&cn->m.h, cnode_size(cn->n));
        goto fail;
    }
    size_t start[1u << CN_BITS], fill[1u << CN_BITS], pos = 0;
    for (cnmap bm = bitmap; bm; bm &= bm - 1) {
        unsigned f = (unsigned)__builtin_ctzll(bm);
        start[f] = fill[f] = pos;
        pos += count[f];
    }
    for (size_t i = 0; i < m; i++)
        sorted[fill[frag(sn[i]->hash, lev)]++] = sn[i];
    cn->bitmap = bitmap;
    cn->m.h.b2 = (uint8_t)specmask;
    uint32_t w = 0;
    int failed = 0;
    for (unsigned s = 0; spec && s < SPEC_SLOTS; s++) /* spec slots first (nodes.h) */
        if (spec[s])
            cn->array[w++] = &spec[s]->h;
    for (cnmap bm = bitmap; bm; bm &= bm - 1) {
        unsigned f = (unsigned)__builtin_ctzll(bm);
        snode **grp = sorted + start[f];
        if (count[f] == 1) {
            cn->array[w++] = &grp[0]->h;
            continue;
        }
        mainnode *sub = NULL;
        int consumed = 0; /* a failed build_hash released grp itself */
        if (!failed) {
            if (lev + CN_BITS > MAX_HASH_LEVEL) {
                lnode *ln = lnode_alloc((uint32_t)count[f]);
                if (ln) {
                    memcpy(ln->sn, grp, count[f] * sizeof(snode *));
                    sub = &ln->m;
                }
            } else {
                cnode *c = build_hash(b, grp, count[f], lev + CN_BITS, NULL, padded);
                sub = c ? &c->m : NULL;
                consumed = c == NULL;
            }
        }
        inode *in = sub ? inode_new(b->gen, sub, padded) : NULL;
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
    if (sorted != local)
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
        node_free(&cn->m.h, cnode_size(full));
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

/* ------------------------------------------------------------------------
 * Pass 1: prefixes
 * ---------------------------------------------------------------------- */

/* Every distinct prefix of the patterns; prefix 0 is the empty one. */
typedef struct prefixes {
    size_t *word;        /* word[v]: index in b->w of prefix v's last word */
    uint32_t *parent;    /* parent[v]: the prefix one word shorter */
    size_t n;            /* prefixes so far, counting prefix 0 */
    uint32_t *table;     /* open addressing over (parent, word); 0 = empty */
    size_t cap;          /* table slots, a power of two */
} prefixes;

static size_t prefix_slot(const prefixes *px, uint32_t parent, const word *w)
{
    uint64_t h = (w->hash ^ ((uint64_t)w->kind << 56) ^ w->len) +
                 (uint64_t)parent * UINT64_C(0x9e3779b97f4a7c15);
    return (size_t)((h * UINT64_C(0xff51afd7ed558ccd)) >> 17) & (px->cap - 1);
}

/* The number of prefix (parent, b->w[wi]), made if new. */
static uint32_t prefix_of(prefixes *px, const word *all, uint32_t parent, size_t wi)
{
    const word *w = &all[wi];
    size_t slot = prefix_slot(px, parent, w);
    for (;;) {
        uint32_t e = px->table[slot];
        if (e == 0) {
            uint32_t v = (uint32_t)px->n++;
            px->table[slot] = v;
            px->word[v] = wi;
            px->parent[v] = parent;
            return v;
        }
        if (px->parent[e] == parent && same_word(&all[px->word[e]], w))
            return e;
        slot = (slot + 1) & (px->cap - 1);
    }
}

/* The number of words of prefix v (so its children are at that topic level),
 * counted up to CST_PAD_LEVELS: all pad_level needs to know. */
static size_t words_of(const prefixes *px, uint32_t v)
{
    const size_t cap = CST_PAD_LEVELS; /* a variable: 0 draws no -Wtype-limits */
    size_t n = 0;
    for (; v != 0 && n < cap; v = px->parent[v])
        n++;
    return n;
}

/* ------------------------------------------------------------------------
 * Pass 2: compressed rows (a counting sort that keeps input order)
 * ---------------------------------------------------------------------- */

/* start[k] .. start[k+1] index the members of bucket k in item[]; member i
 * of the input, named first + i in item[], belongs to bucket key[i]. */
static int rows_make(const uint32_t *key, size_t n, size_t nkeys, uint32_t first,
                     size_t **startp, uint32_t **itemp)
{
    size_t *start = cst_big_alloc((nkeys + 1) * sizeof *start);
    uint32_t *item = cst_big_alloc((n ? n : 1) * sizeof *item);
    if (start == NULL || item == NULL) {
        cst_big_free(start);
        cst_big_free(item);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        start[key[i] + 1]++;
    for (size_t k = 0; k < nkeys; k++)
        start[k + 1] += start[k];
    for (size_t i = 0; i < n; i++)
        item[start[key[i]]++] = first + (uint32_t)i;
    for (size_t k = nkeys; k > 0; k--)
        start[k] = start[k - 1];
    start[0] = 0;
    *startp = start;
    *itemp = item;
    return 0;
}

/* ------------------------------------------------------------------------
 * Pass 3: nodes, from the longest prefixes up
 * ---------------------------------------------------------------------- */

typedef struct idpos {
    uint64_t id;
    uint32_t pos;        /* the pair's index in the input */
} idpos;

static int idpos_cmp(const void *x, const void *y)
{
    const idpos *a = x, *b = y;
    if (a->id != b->id)
        return a->id < b->id ? -1 : 1;
    return a->pos < b->pos ? -1 : (a->pos > b->pos);
}

/* The subscriber ids of the pairs pair[0..np) (input positions): sorted,
 * each once, into ids; the first pair of each id in input order is kept. */
static size_t distinct_ids(builder *b, const uint64_t *in_ids, const uint32_t *pair, size_t np,
                           idpos *tmp, uint64_t *ids)
{
    if (np == 1) {
        if (b->kept)
            b->kept[pair[0]] = 1;
        ids[0] = in_ids[pair[0]];
        return 1;
    }
    for (size_t i = 0; i < np; i++)
        tmp[i] = (idpos){in_ids[pair[i]], pair[i]};
    qsort(tmp, np, sizeof *tmp, idpos_cmp);
    size_t n = 0;
    for (size_t i = 0; i < np; i++) {
        if (n > 0 && ids[n - 1] == tmp[i].id)
            continue;
        ids[n++] = tmp[i].id;
        if (b->kept)
            b->kept[tmp[i].pos] = 1;
    }
    return n;
}

/* The hash-level-0 C-node over the S-nodes of prefixes kid[0..nk) (their
 * references move into it: sn[kid] is cleared); lit is scratch of nk slots.
 * Its I-nodes are padded if `padded` (nodes.h). */
static cnode *level_of(builder *b, snode **sn, const uint32_t *kid, size_t nk, snode **lit,
                       int padded)
{
    snode *spec[SPEC_SLOTS] = {NULL, NULL, NULL};
    size_t m = 0;
    for (size_t i = 0; i < nk; i++) {
        snode *c = sn[kid[i]];
        sn[kid[i]] = NULL;
        if (c->h.b1 == W_LITERAL)
            lit[m++] = c;
        else
            spec[c->h.b1 - 1] = c;
    }
    return build_hash(b, lit, m, 0, spec, padded);
}

/* Builds of at least this many pairs carve their nodes from node blocks
 * (alloc.h): smaller ones would leave most of a 2 MiB block unused. */
static int64_t block_threshold = 16384;

void cst_debug_set_block_threshold(int64_t n) { block_threshold = n; }

/* The first entry k of offsets[0..n] that is negative (k = 0), below the
 * entry before it, or past data_len; -1 when the table is good.  One pass,
 * before anything reads the data: a table that rises past the data and comes
 * back down is refused at its rise, not after a read of the pattern between. */
static int64_t bad_offset(const int64_t *offsets, int64_t n, size_t data_len)
{
    int64_t limit = data_len > (size_t)INT64_MAX ? INT64_MAX : (int64_t)data_len;
    int64_t prev = 0;
    for (int64_t k = 0; k <= n; k++) {
        int64_t o = offsets[k];
        if (o < prev || o > limit)
            return k;
        prev = o;
    }
    return -1;
}

cst_trie *cst_build(const cst_dialect *d, const char *data, size_t data_len,
                    const int64_t *offsets, const uint64_t *ids, int64_t n, uint64_t max_id,
                    uint8_t *kept, int *status, int64_t *bad_index)
{
    *status = CST_OK;
    *bad_index = -1;
    if (n < 0 || n > (int64_t)UINT32_MAX - 1) {
        *status = CST_EINVAL;
        return NULL;
    }
    int64_t bad = bad_offset(offsets, n, data_len);
    if (bad >= 0) {
        *status = CST_EBOUNDS;
        *bad_index = bad;
        return NULL;
    }
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
    prefixes px = {0};
    uint32_t *end = NULL;                 /* end[i]: the prefix pair i ends at */
    size_t *pstart = NULL, *kstart = NULL;
    uint32_t *pitem = NULL, *kitem = NULL;
    snode **sn = NULL;                    /* sn[v]: prefix v's S-node, until taken */
    idpos *tmp = NULL;
    uint64_t *gids = NULL;
    snode **lit = NULL;
    int carving = 0;                      /* pass 3 carves nodes from node blocks */
    /* room for 4 words a pattern (pages are touched only as used); doubled if short */
    size_t wcap = (size_t)n * 4 > 1024 ? (size_t)n * 4 : 1024, nw = 0;
    scratch *sc = scratch_get();
    b.w = cst_big_alloc(wcap * sizeof *b.w);
    end = cst_big_alloc((size_t)n * sizeof *end);
    if (sc == NULL || b.w == NULL || end == NULL)
        goto oom;

    /* Pass 1: parse, then number the prefixes.  Each offset is read once
     * here and checked again against the one before it, so the pattern read
     * is inside the data even if the caller's table changed since the check
     * above (a table in memory that another thread writes to). */
    int64_t from = offsets[0];
    if (from < 0 || (uint64_t)from > data_len) {
        *status = CST_EBOUNDS;
        *bad_index = 0;
        goto out;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t to = offsets[i + 1];
        if (to < from || (uint64_t)to > data_len) {
            *status = CST_EBOUNDS;
            *bad_index = i + 1;
            goto out;
        }
        const char *pat = data + from;
        size_t len = (size_t)(to - from);
        from = to;
        if (!utf8_valid(pat, len) || ids[i] == 0 || ids[i] > max_id) {
            *status = CST_EINVAL;
            *bad_index = i;
            goto out;
        }
        int64_t k = parse_words(t, pat, len, 1, sc);
        if (k < 0) {
            *status = (int)k;
            *bad_index = i;
            goto out;
        }
        if (nw + (size_t)k > wcap) {
            while (nw + (size_t)k > wcap)
                wcap *= 2;
            word *w2 = cst_big_realloc(b.w, nw * sizeof *b.w, wcap * sizeof *b.w);
            if (w2 == NULL)
                goto oom;
            b.w = w2;
        }
        memcpy(b.w + nw, sc->w, (size_t)k * sizeof(word));
        nw += (size_t)k;
        end[i] = (uint32_t)k; /* its word count, until pass 1 numbers it */
    }
    if (nw >= UINT32_MAX)
        goto oom;
    px.cap = 16;
    while (px.cap < (nw + 1) * 2)
        px.cap *= 2;
    px.table = cst_big_alloc(px.cap * sizeof *px.table);
    px.word = cst_big_alloc((nw + 1) * sizeof *px.word);
    px.parent = cst_big_alloc((nw + 1) * sizeof *px.parent);
    if (px.table == NULL || px.word == NULL || px.parent == NULL)
        goto oom;
    px.n = 1; /* prefix 0: the empty prefix */
    px.parent[0] = 0;
    px.word[0] = 0;
    size_t wi = 0;
    for (int64_t i = 0; i < n; i++) {
        /* parse_words gives every pattern one word at least (the zero-word
         * pattern is one W_EMPTY_PATTERN word), so v ends above 0. */
        uint32_t v = 0;
        for (size_t stop = wi + end[i]; wi < stop; wi++)
            v = prefix_of(&px, b.w, v, wi);
        end[i] = v;
    }
    cst_big_free(px.table);
    px.table = NULL;

    /* Pass 2: pairs by the prefix they end at; prefixes by their parent. */
    if (rows_make(end, (size_t)n, px.n, 0, &pstart, &pitem) < 0 ||
        rows_make(px.parent + 1, px.n - 1, px.n, 1, &kstart, &kitem) < 0)
        goto oom;
    size_t maxp = 1, maxk = 1;
    for (size_t v = 0; v < px.n; v++) {
        if (pstart[v + 1] - pstart[v] > maxp)
            maxp = pstart[v + 1] - pstart[v];
        if (kstart[v + 1] - kstart[v] > maxk)
            maxk = kstart[v + 1] - kstart[v];
    }
    sn = cst_big_alloc(px.n * sizeof *sn);
    tmp = malloc(maxp * sizeof *tmp);
    gids = malloc(maxp * sizeof *gids);
    lit = malloc(maxk * sizeof *lit);
    if (sn == NULL || tmp == NULL || gids == NULL || lit == NULL)
        goto oom;

    /* Pass 3: S-nodes from the longest prefixes up. */
    carving = n >= block_threshold;
    cst_block_carve(carving);
    ctx c;
    if (ctx_enter(&c, t) < 0)
        goto oom;
    inode *root = root_read(&c);
    b.gen = root->gen;
    for (size_t v = px.n - 1; v > 0; v--) {
        size_t np = pstart[v + 1] - pstart[v];
        size_t nids = np ? distinct_ids(&b, ids, pitem + pstart[v], np, tmp, gids) : 0;
        setnode *set = NULL;
        if (nids > SUBS_INLINE && (set = set_build(gids, nids)) == NULL)
            goto oom_in;
        inode *child = NULL;
        size_t nk = kstart[v + 1] - kstart[v];
        if (nk > 0) {
            int padded = pad_level(words_of(&px, (uint32_t)v));
            cnode *cn = level_of(&b, sn, kitem + kstart[v], nk, lit, padded);
            child = cn ? inode_new(b.gen, &cn->m, padded) : NULL;
            if (child == NULL) {
                if (cn)
                    node_release(&cn->m.h);
                if (set)
                    set_release(set);
                goto oom_in;
            }
        }
        const word *w = &b.w[px.word[v]];
        sn[v] = snode_make(w->p, w->len, w->kind, w->kind == W_LITERAL ? w->hash : 0,
                           (uint32_t)nids, gids, set, child);
        if (sn[v] == NULL) {
            if (child)
                node_release(&child->h);
            if (set)
                set_release(set);
            goto oom_in;
        }
    }
    cnode *top = level_of(&b, sn, kitem + kstart[0], kstart[1] - kstart[0], lit, 1);
    if (top == NULL)
        goto oom_in;
    /* The handle is private: swap its empty top C-node for the built one. */
    mainnode *old = atomic_load_explicit(&root->main, memory_order_relaxed);
    /* release: the built nodes are initialised before the handle is shared. */
    atomic_store_explicit(&root->main, &top->m, memory_order_release);
    retire(&c, &old->h);
    ctx_exit(&c);
    goto out;
oom_in:
    ctx_exit(&c);
oom:
    *status = CST_ENOMEM;
out:
    if (carving)
        cst_block_carve(0);
    if (sn != NULL)
        for (size_t v = 1; v < px.n; v++)
            if (sn[v] != NULL)
                node_release(&sn[v]->h);
    cst_big_free(b.w);
    cst_big_free(end);
    cst_big_free(px.table);
    cst_big_free(px.word);
    cst_big_free(px.parent);
    cst_big_free(pstart);
    cst_big_free(pitem);
    cst_big_free(kstart);
    cst_big_free(kitem);
    cst_big_free(sn);
    free(tmp);
    free(gids);
    free(lit);
    if (*status != CST_OK) {
        cst_free(t);
        return NULL;
    }
    int64_t pairs = 0;
    for (int64_t i = 0; i < n; i++)
        pairs += kept == NULL || kept[i];
    pairs_reset(t, pairs);
    return t;
}
