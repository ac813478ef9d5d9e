/*
 * words.c - splitting topics and patterns into words under a dialect, with
 * the dialect's validation rules (cst_dialect in cstrie.h; docs/api.md,
 * "Dialects"), and the seeded word hash.
 */
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>

#include "internal.h"

static uint64_t hash_seed;
static _Atomic uint64_t hash_mask = ~UINT64_C(0);

void words_seed_init(void)
{
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed)
        seed = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)&seed;
    hash_seed = seed | 1;
}

void cst_debug_set_hash_mask(uint64_t mask)
{
    atomic_store_explicit(&hash_mask, mask, memory_order_relaxed);
}

static inline uint64_t load32(const char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint64_t load64(const char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint64_t mix(uint64_t h, uint64_t v)
{
    h = (h ^ v) * UINT64_C(0x9fb21c651e98df25);
    return h ^ (h >> 29);
}

/* The hash, inlined where the splitter puts each word (the call was a tenth
 * of a short topic's lookup); word_hash below is the same for other callers. */
static inline __attribute__((always_inline)) uint64_t hash_bytes(const char *p, size_t len)
{
    /* Eight bytes per step (topic words are short, so this is a handful of
     * multiplies instead of one per byte), seeded per process and mixed with
     * the length; the tail is read as two overlapping 4-byte loads, or for
     * 1-3 bytes as the first, middle and last byte, which together with the
     * length determine the tail exactly.  A 64-bit finalizer then makes every
     * 5-bit fragment depend on every byte. */
    uint64_t h = hash_seed ^ ((uint64_t)len * UINT64_C(0x9e3779b97f4a7c15));
    while (len > 8) {
        h = mix(h, load64(p));
        p += 8;
        len -= 8;
    }
    uint64_t v;
    if (len >= 4)
        v = load32(p) | (load32(p + len - 4) << 32);
    else if (len > 0)
        v = (uint64_t)(unsigned char)p[0] | (uint64_t)(unsigned char)p[len >> 1] << 8 |
            (uint64_t)(unsigned char)p[len - 1] << 16;
    else
        v = 0;
    h = mix(h, v);
    h ^= h >> 33;
    h *= UINT64_C(0xff51afd7ed558ccd);
    h ^= h >> 33;
    h *= UINT64_C(0xc4ceb9fe1a85ec53);
    h ^= h >> 33;
    return h & atomic_load_explicit(&hash_mask, memory_order_relaxed);
}

uint64_t word_hash(const char *p, size_t len) { return hash_bytes(p, len); }

static int contains(const char *hay, size_t hlen, const char *needle, size_t nlen)
{
    if (needle == NULL || nlen == 0 || nlen > hlen)
        return 0;
    if (nlen == 1)
        return memchr(hay, needle[0], hlen) != NULL;
    for (size_t i = 0; i + nlen <= hlen; i++)
        if (memcmp(hay + i, needle, nlen) == 0)
            return 1;
    return 0;
}

static int token_eq(const char *p, size_t len, const char *tok, size_t tlen)
{
    return tok != NULL && len == tlen && memcmp(p, tok, len) == 0;
}

/* The kind of word p[0..wl) and the dialect's rules on wildcard tokens;
 * returns 0 or a CST_E* code. */
static int classify(const cst_dialect *d, const char *p, size_t wl, int last, int is_pattern,
                    uint8_t *kindp)
{
    uint8_t kind = W_LITERAL;
    if (token_eq(p, wl, d->single, d->single_len))
        kind = W_SINGLE;
    else if (token_eq(p, wl, d->multi, d->multi_len))
        kind = W_MULTI;
    if (is_pattern) {
        if (kind == W_MULTI && d->multi_last_only && !last)
            return CST_EMULTIPOS;
        if (kind == W_LITERAL && d->strict_wildcards &&
            (contains(p, wl, d->single, d->single_len) || contains(p, wl, d->multi, d->multi_len)))
            return CST_EWILDWORD;
    } else if (kind != W_LITERAL) {
        if (!d->topic_wildcards)
            return CST_EWILDTOPIC;
        kind = W_LITERAL; /* a wildcard token in a topic is a literal word */
    } else if (!d->topic_wildcards && d->strict_wildcards &&
               (contains(p, wl, d->single, d->single_len) ||
                contains(p, wl, d->multi, d->multi_len))) {
        return CST_EWILDTOPIC;
    }
    *kindp = kind;
    return 0;
}

/* The offset of the first byte of s[0..len) in the dialect's forbidden set
 * (ASCII only), or -1.  The set is a bitmap, so this is one table test per
 * byte; dialects without one (AMQP, MQTT) skip the scan. */
static int64_t first_forbidden(const cst_dialect *d, const char *s, size_t len)
{
    const uint64_t lo = d->forbidden[0], hi = d->forbidden[1];
    if ((lo | hi) == 0)
        return -1;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < len; i++) {
        unsigned c = u[i];
        uint64_t bits = c < 64 ? lo : c < 128 ? hi : 0;
        if ((bits >> (c & 63)) & 1)
            return (int64_t)i;
    }
    return -1;
}

/* Note where a parse failed (scratch's fault_at, fault_word: cst_validate_at)
 * and return its code. */
static inline int64_t fault(scratch *sc, int64_t at, int64_t index, int64_t code)
{
    sc->fault_at = at;
    sc->fault_word = index;
    return code;
}

void words_classes_init(cst_trie *t)
{
    const cst_dialect *d = &t->d;
    memset(t->bytecls, 0, sizeof t->bytecls);
    if (d->sep_len == 1)
        t->bytecls[(unsigned char)d->sep[0]] |= BC_SEP;
    if (d->single != NULL && d->single_len > 0)
        t->bytecls[(unsigned char)d->single[0]] |= BC_WILD;
    if (d->multi != NULL && d->multi_len > 0)
        t->bytecls[(unsigned char)d->multi[0]] |= BC_WILD;
    if (d->forbid_nul)
        t->bytecls[0] |= BC_NUL;
    for (unsigned c = 0; c < 128; c++)
        if ((d->forbidden[c >> 6] >> (c & 63)) & 1)
            t->bytecls[c] |= BC_FORBIDDEN;
}

/* The general splitter: any separator (memmem), several scans. */
static int64_t parse_general(const cst_trie *t, const char *s, size_t len, int is_pattern,
                             scratch *sc)
{
    const cst_dialect *d = &t->d;
    const char *nul = d->forbid_nul ? memchr(s, 0, len) : NULL;
    int64_t bad = first_forbidden(d, s, len);
    if (nul != NULL || bad >= 0) {
        /* the first bad byte; a NUL where both are at once */
        int is_nul = nul != NULL && (bad < 0 || nul - s <= bad);
        return fault(sc, is_nul ? nul - s : bad, -1, is_nul ? CST_ENUL : CST_EFORBIDDEN);
    }
    /* A word can only be, or contain, a wildcard token if the token's first
     * byte occurs in the text: one scan of the whole text spares the per-word
     * token checks in the common case of a topic without wildcard bytes. */
    int may_wild = (d->single != NULL && d->single_len > 0 && memchr(s, d->single[0], len)) ||
                   (d->multi != NULL && d->multi_len > 0 && memchr(s, d->multi[0], len));
    size_t n = 0;
    size_t start = 0;
    for (;;) {
        size_t end;
        if (d->sep_len == 1) {
            const char *q = memchr(s + start, d->sep[0], len - start);
            end = q ? (size_t)(q - s) : len;
        } else {
            const char *q = memmem(s + start, len - start, d->sep, d->sep_len);
            end = q ? (size_t)(q - s) : len;
        }
        /* Counted while splitting: a text over the limit fails at its first
         * word too many, before the rest is split or hashed. */
        if (d->max_levels && n >= d->max_levels)
            return fault(sc, (int64_t)start, (int64_t)n, CST_ETOODEEP);
        if (n >= sc->wcap && scratch_reserve((void **)&sc->w, &sc->wcap, n + 1, sizeof(word)) < 0)
            return CST_ENOMEM;
        const char *p = s + start;
        size_t wl = end - start;
        if (wl > UINT32_MAX)
            return fault(sc, (int64_t)start, (int64_t)n, CST_ETOOLONG);
        if (wl == 0 && !d->empty_words)
            return fault(sc, (int64_t)start, (int64_t)n, CST_EEMPTYWORD);
        uint8_t kind = W_LITERAL;
        int last = end >= len;
        if (may_wild) {
            int r = classify(d, p, wl, last, is_pattern, &kind);
            if (r < 0)
                return fault(sc, (int64_t)start, (int64_t)n, r);
        }
        sc->w[n] = (word){.p = p, .len = (uint32_t)wl, .kind = kind,
                          .hash = kind == W_LITERAL ? hash_bytes(p, wl) : 0};
        n++;
        if (last)
            break;
        start = end + d->sep_len;
    }
    return (int64_t)n;
}

/* One word [p, p + wl) found by the splitter: checked, classified, hashed. */
static inline __attribute__((always_inline)) int64_t
put_word(const cst_dialect *d, scratch *sc, size_t n, const char *p, size_t wl, int last, int wild,
         int is_pattern)
{
    /* Counted while splitting: a text over the limit fails at its first word
     * too many, before the rest is split or hashed. */
    if (d->max_levels && n >= d->max_levels)
        return CST_ETOODEEP;
    if (n >= sc->wcap && scratch_reserve((void **)&sc->w, &sc->wcap, n + 1, sizeof(word)) < 0)
        return CST_ENOMEM;
    if (wl > UINT32_MAX)
        return CST_ETOOLONG;
    if (wl == 0 && !d->empty_words)
        return CST_EEMPTYWORD;
    uint8_t kind = W_LITERAL;
    if (wild) {
        int r = classify(d, p, wl, last, is_pattern, &kind);
        if (r < 0)
            return r;
    }
    sc->w[n] = (word){.p = p, .len = (uint32_t)wl, .kind = kind,
                      .hash = kind == W_LITERAL ? hash_bytes(p, wl) : 0};
    return 0;
}

int64_t parse_words(const cst_trie *t, const char *s, size_t len, int is_pattern, scratch *sc)
{
    const cst_dialect *d = &t->d;
    if (len == 0) {
        if (!d->empty_topic)
            return fault(sc, 0, 0, CST_EEMPTY);
        if (!is_pattern)
            return 0;
        /* The zero-word pattern lives in its own spec slot of the top C-node. */
        if (scratch_reserve((void **)&sc->w, &sc->wcap, 1, sizeof(word)) < 0)
            return CST_ENOMEM;
        sc->w[0] = (word){.p = s, .len = 0, .kind = W_EMPTY_PATTERN, .hash = 0};
        return 1;
    }
    if (d->max_bytes && len > d->max_bytes)
        return fault(sc, (int64_t)len, -1, CST_ETOOLONG);
    if (d->sep_len != 1)
        return parse_general(t, s, len, is_pattern, sc);
    /* One pass over the bytes: the dialect's byte classes say which bytes
     * end a word, which are invalid, and which may start a wildcard token (a
     * word without such a byte is a plain literal: no token checks). */
    const uint8_t *cls = t->bytecls;
    const unsigned char *u = (const unsigned char *)s;
    size_t n = 0, start = 0;
    int wild = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned c = cls[u[i]];
        if (c == 0)
            continue;
        if (c & BC_NUL)
            return fault(sc, (int64_t)i, (int64_t)n, CST_ENUL);
        if (c & BC_FORBIDDEN)
            return fault(sc, (int64_t)i, (int64_t)n, CST_EFORBIDDEN);
        if (c & BC_WILD) {
            wild = 1;
            continue;
        }
        int64_t r = put_word(d, sc, n, s + start, i - start, 0, wild, is_pattern);
        if (r < 0)
            return fault(sc, (int64_t)start, (int64_t)n, r);
        n++;
        start = i + 1;
        wild = 0;
    }
    int64_t r = put_word(d, sc, n, s + start, len - start, 1, wild, is_pattern);
    return r < 0 ? fault(sc, (int64_t)start, (int64_t)n, r) : (int64_t)(n + 1);
}
