/*
 * words.c - splitting topics and patterns into words under a dialect, with
 * the validation rules of DESIGN.md, and the seeded word hash.
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

uint64_t word_hash(const char *p, size_t len)
{
    /* FNV-1a over the bytes, seeded per process, then a 64-bit finalizer so
     * that every 5-bit fragment depends on every byte. */
    uint64_t h = UINT64_C(0xcbf29ce484222325) ^ hash_seed;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)p[i];
        h *= UINT64_C(0x100000001b3);
    }
    h ^= h >> 33;
    h *= UINT64_C(0xff51afd7ed558ccd);
    h ^= h >> 33;
    h *= UINT64_C(0xc4ceb9fe1a85ec53);
    h ^= h >> 33;
    return h & atomic_load_explicit(&hash_mask, memory_order_relaxed);
}

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

int64_t parse_words(const cst_trie *t, const char *s, size_t len, int is_pattern, scratch *sc)
{
    const cst_dialect *d = &t->d;
    if (len == 0) {
        if (!d->empty_topic)
            return CST_EEMPTY;
        if (!is_pattern)
            return 0;
        /* The zero-word pattern lives in its own spec slot of the top C-node. */
        if (scratch_reserve((void **)&sc->w, &sc->wcap, 1, sizeof(word)) < 0)
            return CST_ENOMEM;
        sc->w[0] = (word){.p = s, .len = 0, .kind = W_EMPTY_PATTERN, .hash = 0};
        return 1;
    }
    if (d->max_bytes && len > d->max_bytes)
        return CST_ETOOLONG;
    if (d->forbid_nul && memchr(s, 0, len) != NULL)
        return CST_ENUL;
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
        if (scratch_reserve((void **)&sc->w, &sc->wcap, n + 1, sizeof(word)) < 0)
            return CST_ENOMEM;
        const char *p = s + start;
        size_t wl = end - start;
        if (wl > UINT32_MAX)
            return CST_ETOOLONG;
        if (wl == 0 && !d->empty_words)
            return CST_EEMPTYWORD;
        uint8_t kind = W_LITERAL;
        if (token_eq(p, wl, d->single, d->single_len))
            kind = W_SINGLE;
        else if (token_eq(p, wl, d->multi, d->multi_len))
            kind = W_MULTI;
        int last = end >= len;
        if (is_pattern) {
            if (kind == W_MULTI && d->multi_last_only && !last)
                return CST_EMULTIPOS;
            if (kind == W_LITERAL && d->strict_wildcards &&
                (contains(p, wl, d->single, d->single_len) || contains(p, wl, d->multi, d->multi_len)))
                return CST_EWILDWORD;
        } else {
            if (kind != W_LITERAL) {
                if (!d->topic_wildcards)
                    return CST_EWILDTOPIC;
                kind = W_LITERAL; /* a wildcard token in a topic is a literal word */
            } else if (!d->topic_wildcards && d->strict_wildcards &&
                       (contains(p, wl, d->single, d->single_len) ||
                        contains(p, wl, d->multi, d->multi_len))) {
                return CST_EWILDTOPIC;
            }
        }
        sc->w[n] = (word){.p = p, .len = (uint32_t)wl, .kind = kind,
                          .hash = kind == W_LITERAL ? word_hash(p, wl) : 0};
        n++;
        if (last)
            break;
        start = end + d->sep_len;
    }
    return (int64_t)n;
}
