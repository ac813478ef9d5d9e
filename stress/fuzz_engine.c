/*
 * fuzz_engine.c - a fuzz target over the public C API of the cstrie engine
 * (native/cstrie.h), checked against a small reference model.
 *
 * The input is a script.  Byte 0 picks the dialect (AMQP, MQTT, NATS and two
 * custom dialects with multi-character separators and tokens: bits 0-2),
 * whether texts may have more than 1,024 levels (0x20), whether word hashes
 * keep only 2 bits (0x40: every level collides, L-nodes) and whether bulk
 * builds carve node blocks (0x80).  The rest is a sequence of operations
 * (subscribe, unsubscribe, subscribe_batch, lookup, has_subscribers, match,
 * subscribers, lookup_batch, validate, snapshot/copy, free, clear,
 * clear_take, clear_if, iterate, build, compact, dump, check, a crowd of
 * hundreds of subscribers on one pattern, and any of those with an
 * allocation budget that makes the engine run out of memory, plus the
 * file-input helpers: the JSON Lines scanner over lines of the exporter's
 * form and raw ones, and the byte-table gather/interleave, count and
 * numbering functions with references out of range)
 * on up to four handles (the trie, its snapshots and copies), with patterns
 * and topics cut from the input: raw bytes, words from a per-dialect table
 * (wildcards, wildcards inside words, "$" words, U+0000, whitespace, invalid
 * UTF-8, pieces of the separator), deep texts of up to 65,535 levels
 * ("/" * 65534, "+/+/.../+", "#.#.#.a"), or texts used before.
 *
 * Every answer is compared with the model: the set of (pattern, id) pairs of
 * each handle, a validator written from the dialect fields (an invalid text
 * must fail with the code of one of the rules it breaks, and change
 * nothing), and a matcher written from the rules (linear for last-only
 * many-level wildcards, a dynamic program otherwise).  After an operation
 * that ran out of memory the handle must hold exactly what it held before.
 * Every input ends by freeing everything; cst_reclaim() must then give the
 * engine's live allocation count back (no leak, even of garbage that a
 * leak checker would see as reachable).  A failed check prints what it saw
 * and aborts, so libFuzzer records the input as a crash.
 *
 * Builds (stress/Makefile):
 *   make fuzz         clang -fsanitize=fuzzer,address,undefined: libFuzzer drives it
 *   make fuzz-replay  gcc (or clang) -fsanitize=address,undefined with
 *                     -DFUZZ_REPLAY_MAIN: a main() that runs the files and
 *                     directories named on the command line (the seed corpus)
 *
 * FUZZ_TRACE=1 in the environment prints every operation and text.
 *
 * Knobs (-D): FUZZ_WORK_LIMIT bounds the reference work per input, so deep
 * texts cannot turn an input into a timeout of the harness itself;
 * FUZZ_BIG_TEXTS the texts of over 1,024 levels per input;
 * FUZZ_LOOKUP_COST_LIMIT skips lookups whose "#"-anywhere walk is too
 * costly under libFuzzer's instrumentation (see too_costly); FUZZ_SKIP_KNOWN=1
 * steers around an engine bug fixed since (see any_tombs).
 */
#include <dirent.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cstrie.h"

#define PROGRAM_NAME "fuzz_engine"
#include "support.h"

/* ------------------------------------------------------------------------
 * Failure reporting
 * ---------------------------------------------------------------------- */

static const char *g_input_name = "(libFuzzer input)";
static int g_trace; /* environment FUZZ_TRACE=1: print every operation */
static long g_op_index;
static const char *g_op_name = "";

#define CHECKF(cond, ...)                                                              \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "fuzz_engine: %s: op #%ld (%s): check failed at %s:%d: %s\n", \
                    g_input_name, g_op_index, g_op_name, __FILE__, __LINE__, #cond);   \
            fprintf(stderr, "  ");                                                     \
            fprintf(stderr, __VA_ARGS__);                                              \
            fputc('\n', stderr);                                                       \
            abort();                                                                   \
        }                                                                              \
    } while (0)

/* Shows a text (possibly 65 KB of it) in a failure message. */
static const char *show(const char *s, size_t n)
{
    static char buf[4][200];
    static int k;
    char *b = buf[k++ & 3];
    size_t o = 0;
    for (size_t i = 0; i < n && o < 150; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\')
            b[o++] = (char)c;
        else
            o += (size_t)snprintf(b + o, sizeof buf[0] - o, "\\x%02x", c);
    }
    if (o >= 150)
        o += (size_t)snprintf(b + o, sizeof buf[0] - o, "...(%zu bytes)", n);
    b[o] = 0;
    return b;
}

/* ------------------------------------------------------------------------
 * Dialects
 * ---------------------------------------------------------------------- */

#define WS_BITS ((UINT64_C(1) << ' ') | (UINT64_C(1) << '\t') | (UINT64_C(1) << '\n') | \
                 (UINT64_C(1) << '\r') | (UINT64_C(1) << '\f'))

/* Field order: sep, sep_len, single, single_len, multi, multi_len, multi_min,
 * multi_last_only, strict_wildcards, topic_wildcards, empty_topic,
 * empty_words, dollar_rule, forbid_nul, max_bytes, forbidden, max_levels. */
static const cst_dialect DIALECTS[] = {
    /* amqp: "#" anywhere, at most 256 words */
    {".", 1, "*", 1, "#", 1, 0, 0, 0, 1, 1, 1, 0, 0, 0, {0, 0}, 256},
    /* mqtt */
    {"/", 1, "+", 1, "#", 1, 0, 1, 1, 0, 0, 1, 1, 1, 65535, {0, 0}, 0},
    /* nats: whitespace forbidden, ">" one or more, last only */
    {".", 1, "*", 1, ">", 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, {WS_BITS, 0}, 0},
    /* "::" separator, "?" and "**" (anywhere), at most 128 words */
    {"::", 2, "?", 1, "**", 2, 0, 0, 0, 1, 1, 1, 0, 0, 0, {0, 0}, 128},
    /* "->" separator, "*" and ">>" (last only, one or more), every rule on */
    {"->", 2, "*", 1, ">>", 2, 1, 1, 1, 0, 0, 0, 1, 1, 8192,
     {(UINT64_C(1) << ' ') | (UINT64_C(1) << '\t'), 0}, 0},
};
static const char *const DIALECT_NAMES[] = {"amqp", "mqtt", "nats", "colons", "arrows"};
#define NDIALECTS (sizeof DIALECTS / sizeof *DIALECTS)

static const cst_dialect *D; /* the dialect of the current input */

/* ------------------------------------------------------------------------
 * Input reader
 * ---------------------------------------------------------------------- */

typedef struct reader {
    const uint8_t *p;
    size_t n, i;
} reader;

static int rd_eof(const reader *r) { return r->i >= r->n; }
static unsigned rd_u8(reader *r) { return r->i < r->n ? r->p[r->i++] : 0; }
static unsigned rd_u16(reader *r)
{
    unsigned a = rd_u8(r);
    return a | rd_u8(r) << 8;
}

/* ------------------------------------------------------------------------
 * Texts: growable byte strings, and a ring of recently used ones
 * ---------------------------------------------------------------------- */

typedef struct text {
    char *s;
    size_t n, cap;
} text;

static void tx_put(text *t, const char *s, size_t n)
{
    if (t->n + n + 1 > t->cap) {
        t->cap = (t->n + n + 1) * 2;
        t->s = xrealloc(t->s, t->cap);
    }
    memcpy(t->s + t->n, s, n);
    t->n += n;
    t->s[t->n] = 0;
}

static void tx_set(text *t, const char *s, size_t n)
{
    t->n = 0;
    tx_put(t, s, n);
}

#define RING 16
static text g_ring[RING];
static unsigned g_ring_n, g_ring_next;

static void ring_add(const char *s, size_t n)
{
    tx_set(&g_ring[g_ring_next], s, n);
    g_ring_next = (g_ring_next + 1) % RING;
    if (g_ring_n < RING)
        g_ring_n++;
}

/* Reference work done for this input, in bytes (see FUZZ_WORK_LIMIT). */
static uint64_t g_work;
#ifndef FUZZ_WORK_LIMIT
#define FUZZ_WORK_LIMIT (UINT64_C(16) << 20)
#endif
#define MAX_TEXT 70000 /* a little over MQTT's 65,535 bytes */
#ifndef FUZZ_BIG_TEXTS
#define FUZZ_BIG_TEXTS 2
#endif
static unsigned g_big_texts;
static int g_big_ok;

/* A word from the dialect's table. */
static void word_token(text *t, unsigned k)
{
    static const char *const lits[] = {"", "a", "b", "ab", "$x", "$", "c", "\xc3\xa9",
                                       "\x00", " ", "\t", "\xff", "\xed\xa0\x80", "aa", "b c",
                                       "\xf0\x9f\x98\x80"};
    static const size_t lit_len[] = {0, 1, 1, 2, 2, 1, 1, 2, 1, 1, 1, 1, 3, 2, 3, 4};
    k %= 24;
    if (k < 16) {
        tx_put(t, lits[k], lit_len[k]);
        return;
    }
    switch (k) {
    case 16:
    case 17: /* the wildcards themselves (twice the weight) */
        tx_put(t, D->single, D->single_len);
        break;
    case 18:
    case 19:
        tx_put(t, D->multi, D->multi_len);
        break;
    case 20: /* a wildcard inside a word */
        tx_put(t, "a", 1);
        tx_put(t, D->single, D->single_len);
        break;
    case 21:
        tx_put(t, D->multi, D->multi_len);
        tx_put(t, "b", 1);
        break;
    case 22: /* the first byte of a multi-byte separator, or the other dots */
        tx_put(t, D->sep_len > 1 ? D->sep : (D->sep[0] == '.' ? "/" : "."), 1);
        break;
    default: /* the last byte of the separator, next to a word */
        tx_put(t, "x", 1);
        tx_put(t, D->sep + D->sep_len - 1, 1);
        break;
    }
}

typedef struct handle handle;
static const char *model_any_pattern(const handle *h, unsigned k, size_t *n);

/* Reads a text spec from the input into t (mode = first byte % 8):
 *   0     raw:   a length byte, then that many bytes
 *   1, 6  words: 1-8 table words joined by the separator
 *   2     deep:  k (16 bits) copies of a table word joined by the separator,
 *                the last one another table word
 *   3     ring:  a text read before (slot k % RING: the k-th text read
 *                in another mode)
 *   4     model: a pattern of the handle's model
 *   5, 7  short deep: the same with k = 1..256 (one byte) */
static void read_text(reader *r, text *t, const handle *h)
{
    t->n = 0;
    tx_put(t, "", 0);
    unsigned mode = rd_u8(r) % 8;
    switch (mode) {
    case 5:
    case 7: { /* up to 256 levels */
        unsigned k = rd_u8(r) + 1;
        unsigned w = rd_u8(r), last = rd_u8(r);
        for (unsigned i = 0; i + 1 < k; i++) {
            word_token(t, w);
            tx_put(t, D->sep, D->sep_len);
        }
        word_token(t, last);
        break;
    }
    case 0: {
        size_t len = rd_u8(r);
        if (len > r->n - (r->i < r->n ? r->i : r->n))
            len = r->n - (r->i < r->n ? r->i : r->n);
        tx_put(t, (const char *)r->p + r->i, len);
        r->i += len;
        break;
    }
    case 1:
    case 6: {
        unsigned words = rd_u8(r) % 8 + 1;
        for (unsigned i = 0; i < words; i++) {
            if (i)
                tx_put(t, D->sep, D->sep_len);
            word_token(t, rd_u8(r));
        }
        break;
    }
    case 2: {
        unsigned k = rd_u16(r);
        unsigned w = rd_u8(r), last = rd_u8(r);
        if (k == 0)
            k = 1;
        /* Texts of over 1,024 levels only in inputs whose config byte asks
         * for them (bit 0x20), at most FUZZ_BIG_TEXTS new ones per input
         * (then reused through the ring and the model): they make every
         * later operation slow, and a few cover the deep paths. */
        if (k > 1024 && (!g_big_ok || ++g_big_texts > FUZZ_BIG_TEXTS))
            k = k % 1024 + 1;
        for (unsigned i = 0; i + 1 < k && t->n < MAX_TEXT; i++) {
            word_token(t, w);
            tx_put(t, D->sep, D->sep_len);
        }
        word_token(t, last);
        break;
    }
    case 3:
        if (g_ring_n) {
            const text *src = &g_ring[rd_u8(r) % g_ring_n];
            tx_set(t, src->s, src->n);
        } else {
            word_token(t, rd_u8(r));
        }
        break;
    default: {
        size_t n;
        const char *p = model_any_pattern(h, rd_u8(r), &n);
        if (p)
            tx_set(t, p, n);
        else
            word_token(t, 1);
        break;
    }
    }
    if (g_trace)
        fprintf(stderr, "    text (mode %u): %s\n", mode, show(t->s, t->n));
    if (mode != 3)
        ring_add(t->s, t->n); /* slot i: the i-th new text of the input (mod RING) */
    g_work += t->n;
}

/* ------------------------------------------------------------------------
 * Reference validator and matcher, from the dialect fields
 * ---------------------------------------------------------------------- */

static int tok_is(const char *p, size_t n, const char *tok, size_t tlen)
{
    return tok != NULL && n == tlen && memcmp(p, tok, n) == 0;
}

static int has_sub(const char *p, size_t n, const char *tok, size_t tlen)
{
    if (tok == NULL || tlen == 0 || tlen > n)
        return 0;
    for (size_t i = 0; i + tlen <= n; i++)
        if (memcmp(p + i, tok, tlen) == 0)
            return 1;
    return 0;
}

/* Words of s (leftmost separator matches); "" is zero words when the dialect
 * allows the empty text.  *out is malloc'ed. */
static size_t words(const char *s, size_t len, sv **out)
{
    return split_words(s, len, D, out, D->empty_topic);
}

#define BIT(code) (UINT32_C(1) << (uint32_t)(-(code)))

/* Every rule s breaks, as a set of CST_E* bits (0: valid). */
static uint32_t ref_errors(const char *s, size_t len, int is_pattern)
{
    uint32_t e = 0;
    if (len == 0)
        return D->empty_topic ? 0 : BIT(CST_EEMPTY);
    if (D->max_bytes && len > D->max_bytes)
        e |= BIT(CST_ETOOLONG);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == 0 && D->forbid_nul)
            e |= BIT(CST_ENUL);
        if (c < 128 && ((D->forbidden[c >> 6] >> (c & 63)) & 1))
            e |= BIT(CST_EFORBIDDEN);
    }
    sv *w;
    size_t n = words(s, len, &w);
    if (D->max_levels && n > D->max_levels)
        e |= BIT(CST_ETOODEEP);
    for (size_t i = 0; i < n; i++) {
        const char *p = w[i].p;
        size_t wl = w[i].n;
        if (wl == 0 && !D->empty_words)
            e |= BIT(CST_EEMPTYWORD);
        int is_single = tok_is(p, wl, D->single, D->single_len);
        int is_multi = tok_is(p, wl, D->multi, D->multi_len);
        int inside = has_sub(p, wl, D->single, D->single_len) ||
                     has_sub(p, wl, D->multi, D->multi_len);
        if (is_pattern) {
            if (is_multi && D->multi_last_only && i + 1 != n)
                e |= BIT(CST_EMULTIPOS);
            if (!is_multi && !is_single && D->strict_wildcards && inside)
                e |= BIT(CST_EWILDWORD);
        } else if (!D->topic_wildcards && (is_single || is_multi || (D->strict_wildcards && inside))) {
            e |= BIT(CST_EWILDTOPIC);
        }
    }
    free(w);
    return e;
}

/* Strict UTF-8: no overlong forms, surrogates or code points past U+10FFFF. */
static int ref_utf8(const char *p, size_t n)
{
    const unsigned char *s = (const unsigned char *)p;
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xc2 && c <= 0xdf) {
            k = 1, cp = c & 0x1f, min = 0x80;
        } else if (c >= 0xe0 && c <= 0xef) {
            k = 2, cp = c & 0x0f, min = 0x800;
        } else if (c >= 0xf0 && c <= 0xf4) {
            k = 3, cp = c & 0x07, min = 0x10000;
        } else {
            return 0;
        }
        if (n - i <= k)
            return 0;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i + j] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += k + 1;
    }
    return 1;
}

static int sv_eq(sv a, sv b) { return a.n == b.n && memcmp(a.p, b.p, a.n) == 0; }

/* Does the (valid) pattern p[0..m) match the (valid) topic t[0..n)? */
static int ref_match_words(const sv *p, size_t m, const sv *t, size_t n)
{
    if (D->dollar_rule && m > 0 && n > 0 && t[0].n > 0 && t[0].p[0] == '$' &&
        (tok_is(p[0].p, p[0].n, D->single, D->single_len) ||
         tok_is(p[0].p, p[0].n, D->multi, D->multi_len)))
        return 0;
    if (D->multi_last_only) {
        /* One walk: a many-level wildcard can only be the last word. */
        size_t fixed = m;
        int tail = m > 0 && tok_is(p[m - 1].p, p[m - 1].n, D->multi, D->multi_len);
        if (tail)
            fixed = m - 1;
        if (tail ? n < fixed + (size_t)D->multi_min : n != fixed)
            return 0;
        for (size_t i = 0; i < fixed; i++)
            if (!tok_is(p[i].p, p[i].n, D->single, D->single_len) && !sv_eq(p[i], t[i]))
                return 0;
        return 1;
    }
    /* ok[j]: p[i..] matches t[j..], one row per pattern word, from the end.
     * The engine's walk over such a pattern costs up to O(k * n^2) for k
     * many-level wildcards (each state of one enumerates the words it may
     * consume): count that too, so that an input of 256-word "#" chains
     * stops after a lookup or two instead of running for minutes. */
    uint64_t multis = 0;
    for (size_t i = 0; i < m; i++)
        multis += tok_is(p[i].p, p[i].n, D->multi, D->multi_len);
    g_work += (uint64_t)(m + 1) * (n + 1) + multis * (n + 1) * (n + 1);
    unsigned char *next = xcalloc(n + 1, 1), *cur = xcalloc(n + 1, 1);
    next[n] = 1;
    for (size_t i = m; i-- > 0;) {
        int is_multi = tok_is(p[i].p, p[i].n, D->multi, D->multi_len);
        int is_single = tok_is(p[i].p, p[i].n, D->single, D->single_len);
        int suf = 0; /* OR of next[j + 1 .. n] as j goes down */
        for (size_t j = n + 1; j-- > 0;) {
            int r;
            if (is_multi) {
                /* consume multi_min or more words: an OR of next[j + multi_min ..] */
                if (D->multi_min == 0) {
                    suf |= next[j];
                    r = suf;
                } else {
                    r = suf;
                    suf |= next[j];
                }
            } else if (is_single) {
                r = j < n && next[j + 1];
            } else {
                r = j < n && sv_eq(p[i], t[j]) && next[j + 1];
            }
            cur[j] = (unsigned char)r;
        }
        unsigned char *tmp = next;
        next = cur;
        cur = tmp;
    }
    int res = next[0];
    free(next);
    free(cur);
    return res;
}

/* ------------------------------------------------------------------------
 * The model: a set of (pattern, id) pairs per handle
 * ---------------------------------------------------------------------- */

typedef struct mpair {
    char *p;
    size_t n;
    uint64_t id;
} mpair;

typedef struct model {
    mpair *v;
    size_t n, cap;
} model;

struct handle {
    cst_trie *t;
    int ro;
    model m;
    unsigned serial;      /* unique per handle of this input */
    unsigned parent;      /* serial of the handle it was taken from (0: none) */
    unsigned long writes; /* write calls made on it (any result) */
    unsigned long parent_writes; /* the parent's `writes` when it was taken */
    int tombs;            /* a cleanup may have run out of memory: check non-strict */
};

#define NHANDLES 4
static handle g_h[NHANDLES];
static unsigned g_serial;

static const uint64_t IDS[] = {1, 2, 3, 4, 5, 6, 7, 8, 0, UINT64_MAX, UINT64_C(1) << 63,
                               UINT64_C(0x100000000), 1000, 9, 10, 11};
static uint64_t read_id(reader *r) { return IDS[rd_u8(r) % (sizeof IDS / sizeof *IDS)]; }

static long model_find(const model *m, const char *p, size_t n, uint64_t id)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->v[i].id == id && m->v[i].n == n && memcmp(m->v[i].p, p, n) == 0)
            return (long)i;
    return -1;
}

static void model_add(model *m, const char *p, size_t n, uint64_t id)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 16;
        m->v = xrealloc(m->v, m->cap * sizeof *m->v);
    }
    char *c = xcalloc(n + 1, 1);
    memcpy(c, p, n);
    m->v[m->n++] = (mpair){c, n, id};
}

static void model_del(model *m, size_t i)
{
    free(m->v[i].p);
    m->v[i] = m->v[--m->n];
}

static void model_clear(model *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->v[i].p);
    m->n = 0;
}

static void model_free(model *m)
{
    model_clear(m);
    free(m->v);
    memset(m, 0, sizeof *m);
}

static void model_copy(model *dst, const model *src)
{
    model_clear(dst);
    for (size_t i = 0; i < src->n; i++)
        model_add(dst, src->v[i].p, src->v[i].n, src->v[i].id);
}

static const char *model_any_pattern(const handle *h, unsigned k, size_t *n)
{
    if (h == NULL || h->m.n == 0)
        return NULL;
    const mpair *mp = &h->m.v[k % h->m.n];
    *n = mp->n;
    return mp->p;
}

static size_t model_patterns(const model *m)
{
    size_t distinct = 0;
    for (size_t i = 0; i < m->n; i++) {
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = m->v[j].n == m->v[i].n && memcmp(m->v[j].p, m->v[i].p, m->v[i].n) == 0;
        distinct += !seen;
    }
    return distinct;
}

/* Pair lists (pattern, id), sorted, for comparisons. */
typedef struct plist {
    mpair *v;
    size_t n, cap;
} plist;

static void pl_add(plist *l, const char *p, size_t n, uint64_t id)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->v = xrealloc(l->v, l->cap * sizeof *l->v);
    }
    char *c = xcalloc(n + 1, 1);
    memcpy(c, p, n);
    l->v[l->n++] = (mpair){c, n, id};
}

static int mp_cmp(const void *a, const void *b)
{
    const mpair *x = a, *y = b;
    size_t k = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->p, y->p, k);
    if (c)
        return c;
    if (x->n != y->n)
        return x->n < y->n ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static void pl_sort(plist *l)
{
    if (l->n)
        qsort(l->v, l->n, sizeof *l->v, mp_cmp);
}

static void pl_free(plist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].p);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int pl_has_dups(const plist *l)
{
    for (size_t i = 1; i < l->n; i++)
        if (mp_cmp(&l->v[i - 1], &l->v[i]) == 0)
            return 1;
    return 0;
}

static int pl_equal(const plist *a, const plist *b)
{
    if (a->n != b->n)
        return 0;
    for (size_t i = 0; i < a->n; i++)
        if (mp_cmp(&a->v[i], &b->v[i]) != 0)
            return 0;
    return 1;
}

static plist model_list(const model *m)
{
    plist l = {0};
    for (size_t i = 0; i < m->n; i++)
        pl_add(&l, m->v[i].p, m->v[i].n, m->v[i].id);
    pl_sort(&l);
    return l;
}

/* The pairs of m whose pattern matches the (valid) topic. */
static plist model_match(const model *m, const char *topic, size_t tlen)
{
    plist l = {0};
    sv *t;
    size_t n = words(topic, tlen, &t);
    for (size_t i = 0; i < m->n; i++) {
        sv *p;
        g_work += m->v[i].n + tlen;
        size_t k = words(m->v[i].p, m->v[i].n, &p);
        if (ref_match_words(p, k, t, n))
            pl_add(&l, m->v[i].p, m->v[i].n, m->v[i].id);
        free(p);
    }
    free(t);
    pl_sort(&l);
    return l;
}

/* The walk over many-level wildcards that may appear anywhere costs the
 * engine up to about k * n^2 steps for a pattern with k of them and a topic
 * of n words (see ref_match_words).  Under libFuzzer's instrumentation one
 * 256-word "#" chain against a 256-word key takes seconds, and the mutator
 * would spend most of its time there; the fuzz build skips lookups that cost
 * more than FUZZ_LOOKUP_COST_LIMIT such steps (the replay build runs all). */
#ifndef FUZZ_LOOKUP_COST_LIMIT
#define FUZZ_LOOKUP_COST_LIMIT UINT64_MAX
#endif

static int too_costly(const model *m, const char *topic, size_t tlen)
{
    if (D->multi_last_only || FUZZ_LOOKUP_COST_LIMIT == UINT64_MAX)
        return 0;
    sv *t;
    size_t n = words(topic, tlen, &t);
    free(t);
    uint64_t cost = 0;
    for (size_t i = 0; i < m->n; i++) {
        sv *p;
        size_t k = words(m->v[i].p, m->v[i].n, &p);
        for (size_t j = 0; j < k; j++)
            cost += tok_is(p[j].p, p[j].n, D->multi, D->multi_len) * (uint64_t)(n + 1) * (n + 1);
        free(p);
    }
    return cost > FUZZ_LOOKUP_COST_LIMIT;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The distinct ids of a pair list, sorted; returns their number. */
static size_t ids_of(const plist *l, uint64_t **out)
{
    uint64_t *v = xcalloc(l->n + 1, sizeof *v);
    for (size_t i = 0; i < l->n; i++)
        v[i] = l->v[i].id;
    if (l->n)
        qsort(v, l->n, sizeof *v, cmp_u64);
    size_t k = 0;
    for (size_t i = 0; i < l->n; i++)
        if (k == 0 || v[k - 1] != v[i])
            v[k++] = v[i];
    *out = v;
    return k;
}

/* ------------------------------------------------------------------------
 * Out-of-memory injection
 * ---------------------------------------------------------------------- */

static int64_t g_oom = -1; /* >= 0: the next engine call may allocate this much */

static void arm(void)
{
    if (g_oom >= 0)
        cst_fail_allocations_after(g_oom);
}
static void disarm(void) { cst_fail_allocations_after(-1); }

/* An error code is acceptable when it is a rule the text breaks, or out of
 * memory during an OOM operation. */
static int code_ok(int64_t r, uint32_t errs)
{
    if (r == CST_ENOMEM)
        return g_oom >= 0;
    return r < 0 && r >= -31 && (errs & BIT(r)) != 0;
}

/* ------------------------------------------------------------------------
 * Reading the engine's contents
 * ---------------------------------------------------------------------- */

typedef struct cbuf {
    cst_chunk g;
} cbuf;

static void cb_init(cbuf *b, size_t pat, size_t ids, size_t entries)
{
    memset(b, 0, sizeof *b);
    b->g.pat = xcalloc(pat, 1);
    b->g.pat_cap = pat;
    b->g.ids = xcalloc(ids, sizeof(uint64_t));
    b->g.ids_cap = ids;
    b->g.pat_end = xcalloc(entries, sizeof(int64_t));
    b->g.ids_end = xcalloc(entries, sizeof(int64_t));
    b->g.entries_cap = entries;
}

/* After CST_ETRUNC: grow to what the engine says it needs; it must need
 * more than it had in at least one buffer, or a retry would loop. */
static void cb_grow(cbuf *b)
{
    cst_chunk *g = &b->g;
    CHECKF(g->need_pat > g->pat_cap || g->need_ids > g->ids_cap ||
               g->need_entries > g->entries_cap,
           "CST_ETRUNC without a larger need: pat %zu/%zu ids %zu/%zu entries %zu/%zu",
           g->need_pat, g->pat_cap, g->need_ids, g->ids_cap, g->need_entries, g->entries_cap);
    if (g->need_pat > g->pat_cap) {
        g->pat = xrealloc(g->pat, g->need_pat);
        g->pat_cap = g->need_pat;
    }
    if (g->need_ids > g->ids_cap) {
        g->ids = xrealloc(g->ids, g->need_ids * sizeof(uint64_t));
        g->ids_cap = g->need_ids;
    }
    if (g->need_entries > g->entries_cap) {
        g->pat_end = xrealloc(g->pat_end, g->need_entries * sizeof(int64_t));
        g->ids_end = xrealloc(g->ids_end, g->need_entries * sizeof(int64_t));
        g->entries_cap = g->need_entries;
    }
}

static void cb_free(cbuf *b)
{
    free(b->g.pat);
    free(b->g.ids);
    free(b->g.pat_end);
    free(b->g.ids_end);
}

/* Appends the entries of g (n of them) to l, checking their bounds. */
static void cb_collect(const cst_chunk *g, int n, plist *l, int one_id_each)
{
    CHECKF((size_t)n <= g->entries_cap, "%d entries, room for %zu", n, g->entries_cap);
    int64_t p0 = 0, i0 = 0;
    for (int k = 0; k < n; k++) {
        int64_t p1 = g->pat_end[k], i1 = g->ids_end[k];
        CHECKF(p1 >= p0 && (size_t)p1 <= g->pat_cap && i1 >= i0 && (size_t)i1 <= g->ids_cap,
               "entry %d: pat %" PRId64 "..%" PRId64 " ids %" PRId64 "..%" PRId64, k, p0, p1, i0,
               i1);
        if (one_id_each)
            CHECKF(i1 - i0 == 1, "pair iteration: entry %d has %" PRId64 " ids", k, i1 - i0);
        for (int64_t i = i0; i < i1; i++)
            pl_add(l, g->pat + p0, (size_t)(p1 - p0), g->ids[i]);
        p0 = p1;
        i0 = i1;
    }
}

/* Every pair of t through the iterator, with the given starting buffer
 * sizes.  Returns 0, or the engine's error (only CST_ENOMEM under OOM). */
static int contents(cst_trie *t, int pairs, size_t pat, size_t ids, size_t entries, plist *out)
{
    memset(out, 0, sizeof *out);
    arm();
    cst_iter *it = pairs ? cst_iter_new_pairs(t) : cst_iter_new(t);
    disarm();
    if (it == NULL) {
        CHECKF(g_oom >= 0, "cst_iter_new returned NULL without an OOM budget");
        return CST_ENOMEM;
    }
    cbuf b;
    cb_init(&b, pat, ids, entries);
    int rc = 0;
    for (long calls = 0;; calls++) {
        CHECKF(calls < 10000000, "iteration does not end");
        arm();
        int r = cst_iter_next(it, &b.g);
        disarm();
        if (r == CST_ETRUNC) {
            cb_grow(&b);
            continue;
        }
        if (r < 0) {
            CHECKF(r == CST_ENOMEM && g_oom >= 0, "cst_iter_next = %d", r);
            rc = r;
            break;
        }
        if (r == 0)
            break;
        CHECKF((size_t)r == b.g.nentries, "cst_iter_next = %d but nentries = %zu", r, b.g.nentries);
        cb_collect(&b.g, r, out, pairs);
    }
    cb_free(&b);
    cst_iter_free(it);
    pl_sort(out);
    return rc;
}

/* The engine's contents of h equal its model (strict iteration sizes). */
static void check_contents(handle *h, const char *why)
{
    int64_t saved = g_oom;
    g_oom = -1;
    plist got;
    contents(h->t, 0, 64, 4, 2, &got);
    plist want = model_list(&h->m);
    for (size_t i = 0; i < h->m.n; i++)
        g_work += h->m.v[i].n;
    if (!pl_equal(&got, &want)) {
        fprintf(stderr, "contents (%s): engine %zu pairs, model %zu pairs\n", why, got.n, want.n);
        for (size_t i = 0; i < got.n && i < 20; i++)
            fprintf(stderr, "  engine %s -> %" PRIu64 "\n", show(got.v[i].p, got.v[i].n),
                    got.v[i].id);
        for (size_t i = 0; i < want.n && i < 20; i++)
            fprintf(stderr, "  model  %s -> %" PRIu64 "\n", show(want.v[i].p, want.v[i].n),
                    want.v[i].id);
    }
    CHECKF(pl_equal(&got, &want), "the handle's pairs differ from the model (%s)", why);
    CHECKF(cst_len(h->t) == (int64_t)h->m.n, "cst_len = %" PRId64 ", model %zu", cst_len(h->t),
           h->m.n);
    pl_free(&got);
    pl_free(&want);
    g_oom = saved;
}

static void check_structure(handle *h)
{
    char msg[256];
    int r = cst_check(h->t, !h->tombs, msg, sizeof msg);
    CHECKF(r == 0, "cst_check(strict=%d) = %d: %s", !h->tombs, r, msg);
}

/* ------------------------------------------------------------------------
 * Operations
 * ---------------------------------------------------------------------- */

static text g_a;

static handle *pick(reader *r)
{
    unsigned k = rd_u8(r) % NHANDLES;
    for (unsigned i = 0; i < NHANDLES; i++) {
        handle *h = &g_h[(k + i) % NHANDLES];
        if (h->t)
            return h;
    }
    return &g_h[0];
}

static void after_write(handle *h, int64_t r)
{
    h->writes++;
    /* Under an allocation budget a cleanup may stop half-way, even in an
     * update that succeeded: the structure is sound but may keep a tomb
     * until cst_compact (cstrie.h), so only the non-strict check applies. */
    if (g_oom >= 0)
        h->tombs = 1;
    if (r == CST_ENOMEM) {
        check_contents(h, "after out of memory");
        check_structure(h);
    }
}

static void op_subscribe(reader *r, handle *h, int insert)
{
    g_op_name = insert ? "subscribe" : "unsubscribe";
    read_text(r, &g_a, h);
    uint64_t id = read_id(r);
    unsigned sel = insert ? 0 : rd_u8(r), which = insert ? 0 : rd_u8(r);
    if (h->m.n && (sel & 1)) { /* unsubscribe an existing pair */
        const mpair *mp = &h->m.v[which % h->m.n];
        tx_set(&g_a, mp->p, mp->n);
        id = mp->id;
    }
    uint32_t errs = ref_errors(g_a.s, g_a.n, 1);
    long at = model_find(&h->m, g_a.s, g_a.n, id);
    arm();
    int rc = insert ? cst_subscribe(h->t, g_a.s, g_a.n, id) : cst_unsubscribe(h->t, g_a.s, g_a.n, id);
    disarm();
    if (h->ro) {
        CHECKF(rc == CST_EREADONLY || code_ok(rc, errs), "%s on a read-only handle = %d",
               g_op_name, rc);
        return;
    }
    if (errs || rc < 0) {
        CHECKF(code_ok(rc, errs), "%s(%s, %" PRIu64 ") = %d, rules broken 0x%x", g_op_name,
               show(g_a.s, g_a.n), id, rc, errs);
        after_write(h, rc);
        return;
    }
    int want = insert ? at < 0 : at >= 0;
    CHECKF(rc == want, "%s(%s, %" PRIu64 ") = %d, model says %d", g_op_name, show(g_a.s, g_a.n),
           id, rc, want);
    if (insert && rc)
        model_add(&h->m, g_a.s, g_a.n, id);
    if (!insert && rc)
        model_del(&h->m, (size_t)at);
    after_write(h, rc);
}

static void op_subscribe_batch(reader *r, handle *h)
{
    g_op_name = "subscribe_batch";
    unsigned n = rd_u8(r) % 6 + 1;
    text data = {0};
    tx_put(&data, "", 0);
    int64_t off[8];
    uint64_t ids[8];
    uint32_t errs[8];
    off[0] = 0;
    for (unsigned i = 0; i < n; i++) {
        read_text(r, &g_a, h);
        tx_put(&data, g_a.s, g_a.n);
        off[i + 1] = (int64_t)data.n;
        ids[i] = read_id(r);
        errs[i] = ref_errors(g_a.s, g_a.n, 1);
    }
    uint8_t results[8];
    memset(results, 0xee, sizeof results);
    int64_t added = -1;
    int status = 12345;
    arm();
    int64_t done = cst_subscribe_batch(h->t, data.s, off, ids, n, results, &added, &status);
    disarm();
    if (h->ro) {
        CHECKF(done == 0 && (status == CST_EREADONLY || code_ok(status, errs[0])),
               "subscribe_batch on a read-only handle: done %" PRId64 " status %d", done, status);
        free(data.s);
        return;
    }
    unsigned first_bad = n;
    for (unsigned i = 0; i < n && first_bad == n; i++)
        if (errs[i])
            first_bad = i;
    CHECKF(done >= 0 && done <= first_bad, "subscribe_batch: done %" PRId64 ", first invalid %u",
           done, first_bad);
    if (status == CST_ENOMEM) {
        CHECKF(g_oom >= 0, "subscribe_batch: ENOMEM without a budget");
    } else if (first_bad < n) {
        CHECKF(done == first_bad && code_ok(status, errs[first_bad]),
               "subscribe_batch: done %" PRId64 " status %d; pattern %u breaks 0x%x", done, status,
               first_bad, errs[first_bad]);
    } else {
        CHECKF(done == n && status == CST_OK, "subscribe_batch: done %" PRId64 " of %u, status %d",
               done, n, status);
    }
    int64_t new_pairs = 0;
    for (int64_t i = 0; i < done; i++) {
        const char *p = data.s + off[i];
        size_t len = (size_t)(off[i + 1] - off[i]);
        int fresh = model_find(&h->m, p, len, ids[i]) < 0;
        CHECKF(results[i] == fresh, "subscribe_batch: results[%" PRId64 "] = %u, model says %d",
               i, results[i], fresh);
        if (fresh)
            model_add(&h->m, p, len, ids[i]);
        new_pairs += fresh;
    }
    CHECKF(added == new_pairs, "subscribe_batch: added %" PRId64 ", model says %" PRId64, added,
           new_pairs);
    free(data.s);
    after_write(h, status);
}

static void op_lookup(reader *r, handle *h)
{
    g_op_name = "lookup";
    read_text(r, &g_a, h);
    unsigned how = rd_u8(r);
    if (too_costly(&h->m, g_a.s, g_a.n))
        return;
    uint32_t errs = ref_errors(g_a.s, g_a.n, 0);
    size_t cap = how & 1 ? how % 3 : 64;
    uint64_t out[64];
    arm();
    int64_t n = cst_lookup(h->t, g_a.s, g_a.n, how & 2 ? NULL : out, how & 2 ? 0 : cap);
    disarm();
    if (errs || n < 0) {
        CHECKF(code_ok(n, errs), "lookup(%s) = %" PRId64 ", rules broken 0x%x",
               show(g_a.s, g_a.n), n, errs);
        return;
    }
    plist want = model_match(&h->m, g_a.s, g_a.n);
    uint64_t *wids;
    size_t k = ids_of(&want, &wids);
    CHECKF(n == (int64_t)k, "lookup(%s) = %" PRId64 " ids, model says %zu", show(g_a.s, g_a.n), n,
           k);
    if (!(how & 2)) {
        size_t got = (size_t)n < cap ? (size_t)n : cap;
        qsort(out, got, sizeof *out, cmp_u64);
        for (size_t i = 0; i < got; i++) {
            CHECKF(i == 0 || out[i] != out[i - 1], "lookup: id %" PRIu64 " twice", out[i]);
            CHECKF(bsearch(&out[i], wids, k, sizeof *wids, cmp_u64) != NULL,
                   "lookup(%s): id %" PRIu64 " should not match", show(g_a.s, g_a.n), out[i]);
        }
    }
    free(wids);
    pl_free(&want);
}

static void op_has(reader *r, handle *h)
{
    g_op_name = "has_subscribers";
    read_text(r, &g_a, h);
    if (too_costly(&h->m, g_a.s, g_a.n))
        return;
    uint32_t errs = ref_errors(g_a.s, g_a.n, 0);
    arm();
    int rc = cst_has_subscribers(h->t, g_a.s, g_a.n);
    disarm();
    if (errs || rc < 0) {
        CHECKF(code_ok(rc, errs), "has_subscribers(%s) = %d, rules broken 0x%x",
               show(g_a.s, g_a.n), rc, errs);
        return;
    }
    plist want = model_match(&h->m, g_a.s, g_a.n);
    CHECKF(rc == (want.n > 0), "has_subscribers(%s) = %d, model has %zu matches",
           show(g_a.s, g_a.n), rc, want.n);
    pl_free(&want);
}

static void op_match(reader *r, handle *h)
{
    g_op_name = "match";
    read_text(r, &g_a, h);
    unsigned how = rd_u8(r);
    if (too_costly(&h->m, g_a.s, g_a.n))
        return;
    uint32_t errs = ref_errors(g_a.s, g_a.n, 0);
    cbuf b;
    cb_init(&b, how & 1 ? 1 : 256, how & 2 ? 1 : 64, how & 4 ? 1 : 16);
    int rc;
    for (int tries = 0;; tries++) {
        CHECKF(tries < 100, "match keeps asking for larger buffers");
        arm();
        rc = cst_match(h->t, g_a.s, g_a.n, &b.g);
        disarm();
        if (rc != CST_ETRUNC || errs)
            break;
        cb_grow(&b);
    }
    if (errs || rc < 0) {
        CHECKF(code_ok(rc, errs), "match(%s) = %d, rules broken 0x%x", show(g_a.s, g_a.n), rc,
               errs);
        cb_free(&b);
        return;
    }
    plist got = {0};
    CHECKF((size_t)rc == b.g.nentries, "match = %d but nentries = %zu", rc, b.g.nentries);
    cb_collect(&b.g, rc, &got, 0);
    pl_sort(&got);
    plist want = model_match(&h->m, g_a.s, g_a.n);
    CHECKF(!pl_has_dups(&got), "match(%s): a pair twice", show(g_a.s, g_a.n));
    CHECKF(pl_equal(&got, &want), "match(%s): %zu pairs, model says %zu", show(g_a.s, g_a.n),
           got.n, want.n);
    pl_free(&got);
    pl_free(&want);
    cb_free(&b);
}

static void op_subscribers(reader *r, handle *h)
{
    g_op_name = "subscribers";
    read_text(r, &g_a, h);
    uint32_t errs = ref_errors(g_a.s, g_a.n, 1);
    uint64_t out[64];
    unsigned how = rd_u8(r);
    size_t cap = how & 1 ? 1 : 64;
    arm();
    int64_t n = cst_subscribers(h->t, g_a.s, g_a.n, out, cap);
    disarm();
    if (errs || n < 0) {
        CHECKF(code_ok(n, errs), "subscribers(%s) = %" PRId64 ", rules broken 0x%x",
               show(g_a.s, g_a.n), n, errs);
        return;
    }
    size_t want = 0;
    for (size_t i = 0; i < h->m.n; i++)
        want += h->m.v[i].n == g_a.n && memcmp(h->m.v[i].p, g_a.s, g_a.n) == 0;
    CHECKF(n == (int64_t)want, "subscribers(%s) = %" PRId64 ", model says %zu",
           show(g_a.s, g_a.n), n, want);
    size_t got = (size_t)n < cap ? (size_t)n : cap;
    for (size_t i = 0; i < got; i++)
        CHECKF(model_find(&h->m, g_a.s, g_a.n, out[i]) >= 0,
               "subscribers(%s): id %" PRIu64 " is not subscribed", show(g_a.s, g_a.n), out[i]);
}

static void op_validate(reader *r, handle *h)
{
    g_op_name = "validate";
    read_text(r, &g_a, h);
    int is_pattern = (int)(rd_u8(r) & 1);
    uint32_t errs = ref_errors(g_a.s, g_a.n, is_pattern);
    arm();
    int64_t n = cst_validate(h->t, g_a.s, g_a.n, is_pattern);
    disarm();
    if (errs || n < 0) {
        CHECKF(code_ok(n, errs), "validate(%s, %d) = %" PRId64 ", rules broken 0x%x",
               show(g_a.s, g_a.n), is_pattern, n, errs);
        return;
    }
    sv *w;
    size_t k = words(g_a.s, g_a.n, &w);
    free(w);
    /* The empty pattern is zero words; the engine may count its one slot. */
    CHECKF(n == (int64_t)k || (g_a.n == 0 && n <= 1), "validate(%s, %d) = %" PRId64 ", %zu words",
           show(g_a.s, g_a.n), is_pattern, n, k);
}

static void op_lookup_batch(reader *r, handle *h)
{
    g_op_name = "lookup_batch";
    unsigned rows = rd_u8(r) % 6 + 1;
    unsigned how = rd_u8(r);
    text data = {0};
    tx_put(&data, "", 0);
    int64_t off64[8];
    int32_t off32[8];
    uint8_t validity[2] = {(uint8_t)(rd_u8(r) | 0x55), 0xff};
    int64_t voff = how & 8 ? 1 : 0;
    off64[0] = off32[0] = 0;
    int costly = 0;
    for (unsigned i = 0; i < rows; i++) {
        read_text(r, &g_a, h);
        tx_put(&data, g_a.s, g_a.n);
        off64[i + 1] = (int64_t)data.n;
        off32[i + 1] = (int32_t)data.n;
        costly |= too_costly(&h->m, g_a.s, g_a.n);
    }
    if (costly) {
        free(data.s);
        return;
    }
    int use64 = (how & 1) || data.n > INT32_MAX;
    const uint8_t *vb = how & 2 ? validity : NULL;
    size_t cap = how & 4 ? (how >> 4) % 3 + 1 : 512;
    int64_t *out_rows = xcalloc(cap, sizeof *out_rows);
    uint64_t *out_ids = xcalloc(cap, sizeof *out_ids);
    int8_t status[8];
    memset(status, 99, sizeof status);
    plist got = {0}; /* (row as a 1-byte pattern, id) */
    int64_t start = 0;
    uint64_t skip = 0;
    for (long calls = 0; start < (int64_t)rows; calls++) {
        CHECKF(calls < 100000, "lookup_batch does not finish");
        int64_t next_row = -1;
        uint64_t next_skip = 0;
        size_t need = 0;
        arm();
        int64_t k = cst_lookup_batch(h->t, data.s, use64 ? (const void *)off64 : (const void *)off32,
                                     use64, vb, voff, rows, start, skip, out_rows, out_ids, cap,
                                     &next_row, &next_skip, &need, status);
        disarm();
        if (k == CST_ETRUNC) {
            CHECKF(!h->ro && need > cap && next_row >= start && next_row < (int64_t)rows,
                   "lookup_batch ETRUNC: ro %d need %zu cap %zu next_row %" PRId64, h->ro, need,
                   cap, next_row);
            cap = need;
            out_rows = xrealloc(out_rows, cap * sizeof *out_rows);
            out_ids = xrealloc(out_ids, cap * sizeof *out_ids);
            start = next_row;
            skip = 0;
            continue;
        }
        if (k < 0) {
            CHECKF(k == CST_ENOMEM && g_oom >= 0, "lookup_batch = %" PRId64, k);
            goto out;
        }
        CHECKF((size_t)k <= cap, "lookup_batch wrote %" PRId64 " pairs, cap %zu", k, cap);
        CHECKF(next_row > start || (next_row == start && (next_skip > skip || k > 0)),
               "lookup_batch made no progress: start %" PRId64 " next %" PRId64, start, next_row);
        for (int64_t i = 0; i < k; i++) {
            CHECKF(out_rows[i] >= start && out_rows[i] < (int64_t)rows &&
                       (out_rows[i] < next_row || (out_rows[i] == next_row && next_skip > 0)),
                   "lookup_batch: row %" PRId64 " outside %" PRId64 "..%" PRId64, out_rows[i],
                   start, next_row);
            char row = (char)out_rows[i];
            pl_add(&got, &row, 1, out_ids[i]);
        }
        start = next_row;
        skip = next_skip;
    }
    pl_sort(&got);
    CHECKF(!pl_has_dups(&got), "lookup_batch: an id twice in a row");
    for (unsigned i = 0; i < rows; i++) {
        const char *topic = data.s + off64[i];
        size_t len = (size_t)(off64[i + 1] - off64[i]);
        int64_t b = voff + (int64_t)i;
        int valid_row = vb == NULL || ((vb[b >> 3] >> (b & 7)) & 1);
        size_t have = 0;
        for (size_t j = 0; j < got.n; j++)
            have += (unsigned char)got.v[j].p[0] == i;
        if (!valid_row) {
            CHECKF(status[i] == 1 && have == 0, "lookup_batch: null row %u status %d", i,
                   status[i]);
            continue;
        }
        uint32_t errs = ref_errors(topic, len, 0);
        if (errs) {
            CHECKF(code_ok(status[i], errs) && status[i] != CST_ENOMEM && have == 0,
                   "lookup_batch: row %u (%s) status %d, rules broken 0x%x", i, show(topic, len),
                   status[i], errs);
            continue;
        }
        CHECKF(status[i] == 0, "lookup_batch: row %u (%s) status %d", i, show(topic, len),
               status[i]);
        plist want = model_match(&h->m, topic, len);
        uint64_t *wids;
        size_t nw = ids_of(&want, &wids);
        CHECKF(have == nw, "lookup_batch: row %u (%s) has %zu ids, model says %zu", i,
               show(topic, len), have, nw);
        for (size_t j = 0; j < got.n; j++)
            if ((unsigned char)got.v[j].p[0] == i)
                CHECKF(bsearch(&got.v[j].id, wids, nw, sizeof *wids, cmp_u64) != NULL,
                       "lookup_batch: row %u: id %" PRIu64 " should not match", i, got.v[j].id);
        free(wids);
        pl_free(&want);
    }
out:
    pl_free(&got);
    free(out_rows);
    free(out_ids);
    free(data.s);
}

static handle *free_slot(void)
{
    for (unsigned i = 1; i < NHANDLES; i++)
        if (g_h[i].t == NULL)
            return &g_h[i];
    return NULL;
}

static void handle_init(handle *s, cst_trie *t, int ro, const handle *from)
{
    s->t = t;
    s->ro = ro;
    s->serial = ++g_serial;
    s->parent = from ? from->serial : 0;
    s->parent_writes = from ? from->writes : 0;
    s->writes = 0;
    s->tombs = from ? from->tombs : 0;
    model_clear(&s->m);
    if (from)
        model_copy(&s->m, &from->m);
}

static void op_snapshot(reader *r, handle *h)
{
    int ro = (int)(rd_u8(r) & 1);
    g_op_name = ro ? "snapshot" : "copy";
    handle *s = free_slot();
    if (s == NULL)
        return;
    arm();
    cst_trie *t = cst_snapshot(h->t, ro);
    disarm();
    if (t == NULL) {
        CHECKF(g_oom >= 0, "cst_snapshot returned NULL without an OOM budget");
        check_contents(h, "after a failed snapshot");
        return;
    }
    CHECKF(cst_is_readonly(t) == ro, "snapshot(readonly=%d) of ro=%d gave ro=%d", ro, h->ro,
           cst_is_readonly(t));
    h->writes++; /* a snapshot renews the root: count it as a touch */
    handle_init(s, t, cst_is_readonly(t), h);
    check_contents(s, "new snapshot");
}

static void op_free(reader *r)
{
    g_op_name = "free";
    handle *h = &g_h[1 + rd_u8(r) % (NHANDLES - 1)];
    if (h->t == NULL)
        return;
    cst_free(h->t);
    h->t = NULL;
    model_clear(&h->m);
}

static void op_clear(reader *r, handle *h)
{
    unsigned how = rd_u8(r) % 3;
    if (how == 0) {
        g_op_name = "clear";
        arm();
        int rc = cst_clear(h->t);
        disarm();
        if (h->ro) {
            CHECKF(rc == CST_EREADONLY, "clear on read-only = %d", rc);
            return;
        }
        CHECKF(rc == 0 || (rc == CST_ENOMEM && g_oom >= 0), "clear = %d", rc);
        if (rc == 0)
            model_clear(&h->m);
        after_write(h, rc);
        check_contents(h, "after clear");
    } else if (how == 1) {
        g_op_name = "clear_take";
        arm();
        cst_trie *taken = cst_clear_take(h->t);
        disarm();
        if (h->ro) {
            CHECKF(taken == NULL, "clear_take on read-only gave a handle");
            return;
        }
        if (taken == NULL) {
            CHECKF(g_oom >= 0, "clear_take returned NULL without an OOM budget");
            after_write(h, CST_ENOMEM);
            return;
        }
        CHECKF(cst_is_readonly(taken), "clear_take gave a writable handle");
        handle tmp = {0};
        handle_init(&tmp, taken, 1, h);
        check_contents(&tmp, "what clear_take removed");
        check_structure(&tmp);
        model_clear(&h->m);
        after_write(h, 0);
        check_contents(h, "after clear_take");
        handle *s = free_slot();
        if (s) {
            model_free(&s->m);
            *s = tmp;
        } else {
            cst_free(taken);
            model_free(&tmp.m);
        }
    } else {
        g_op_name = "clear_if";
        handle *e = NULL;
        /* `expected` is a read-only snapshot taken from h (cstrie.h) */
        for (unsigned i = 0; i < NHANDLES; i++)
            if (g_h[i].t && g_h[i].ro && g_h[i].parent == h->serial)
                e = &g_h[i];
        if (e == NULL)
            return;
        plist before = model_list(&h->m), then = model_list(&e->m);
        int same_pairs = pl_equal(&before, &then);
        pl_free(&before);
        pl_free(&then);
        arm();
        int rc = cst_clear_if(h->t, e->t);
        disarm();
        if (h->ro) {
            CHECKF(rc == CST_EREADONLY, "clear_if on read-only = %d", rc);
            return;
        }
        if (rc == CST_ENOMEM) {
            CHECKF(g_oom >= 0, "clear_if: ENOMEM without a budget");
        } else if (h->writes == e->parent_writes) {
            CHECKF(rc == 1, "clear_if on an untouched trie = %d", rc);
        } else if (!same_pairs) {
            CHECKF(rc == 0, "clear_if emptied a trie that changed since (= %d)", rc);
        } else {
            CHECKF(rc == 0 || rc == 1, "clear_if = %d", rc);
        }
        if (rc == 1)
            model_clear(&h->m);
        after_write(h, rc);
        check_contents(h, "after clear_if");
    }
}

static void op_iterate(reader *r, handle *h)
{
    unsigned how = rd_u8(r);
    int pairs = (int)(how & 1);
    g_op_name = pairs ? "iterate pairs" : "iterate";
    plist got;
    int rc = contents(h->t, pairs, how & 2 ? 1 : 128, how & 4 ? 1 : 16, how & 8 ? 1 : 8, &got);
    if (rc == 0) {
        plist want = model_list(&h->m);
        CHECKF(pl_equal(&got, &want), "iteration: %zu pairs, model says %zu", got.n, want.n);
        pl_free(&want);
    }
    pl_free(&got);
}

static void op_check(handle *h)
{
    g_op_name = "check";
    check_contents(h, "check");
    check_structure(h);
    cst_stats st;
    CHECKF(cst_stats_get(h->t, &st) == 0, "cst_stats_get failed");
    CHECKF(st.pairs == (int64_t)h->m.n, "stats.pairs %" PRId64 ", model %zu", st.pairs, h->m.n);
    CHECKF(st.patterns == (int64_t)model_patterns(&h->m), "stats.patterns %" PRId64 ", model %zu",
           st.patterns, model_patterns(&h->m));
    CHECKF(st.max_depth >= 0 && st.inodes >= 1, "stats: max_depth %" PRId64 " inodes %" PRId64,
           st.max_depth, st.inodes);
}

static void op_compact(handle *h)
{
    g_op_name = "compact";
    arm();
    int rc = cst_compact(h->t);
    disarm();
    if (h->ro) {
        CHECKF(rc == CST_EREADONLY || rc == 0, "compact on read-only = %d", rc);
        return;
    }
    CHECKF(rc == 0 || (rc == CST_ENOMEM && g_oom >= 0), "compact = %d", rc);
    after_write(h, rc);
    if (rc == 0)
        h->tombs = 0;
    check_contents(h, "after compact");
    check_structure(h);
}

static void op_dump(reader *r, handle *h)
{
    g_op_name = "dump";
    char buf[64];
    size_t cap = rd_u8(r) % sizeof buf;
    memset(buf, 'Z', sizeof buf);
    arm();
    size_t full = cst_dump(h->t, cap ? buf : NULL, cap);
    disarm();
    CHECKF(full > 0, "dump is empty");
    for (size_t i = cap; i < sizeof buf; i++)
        CHECKF(buf[i] == 'Z', "dump wrote past its buffer (cap %zu, byte %zu)", cap, i);
}

/* A bulk build of the handle's pairs (ids renumbered 1..k) plus one more. */
static void op_build(reader *r, handle *h)
{
    g_op_name = "build";
    read_text(r, &g_a, h);
    uint64_t extra_id = read_id(r);
    size_t n = h->m.n + 1;
    text data = {0};
    tx_put(&data, "", 0);
    int64_t *off = xcalloc(n + 1, sizeof *off);
    uint64_t *ids = xcalloc(n, sizeof *ids);
    uint64_t *orig = xcalloc(n, sizeof *orig); /* dense number -> id */
    size_t norig = 0;
    int64_t first_bad = -1;
    uint32_t bad_errs = 0;
    int bad_utf8 = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p = i < h->m.n ? h->m.v[i].p : g_a.s;
        size_t len = i < h->m.n ? h->m.v[i].n : g_a.n;
        uint64_t id = i < h->m.n ? h->m.v[i].id : extra_id;
        tx_put(&data, p, len);
        off[i + 1] = (int64_t)data.n;
        size_t k = 0;
        while (k < norig && orig[k] != id)
            k++;
        if (k == norig)
            orig[norig++] = id;
        ids[i] = k + 1;
        uint32_t e = ref_errors(p, len, 1);
        int u = ref_utf8(p, len);
        if (first_bad < 0 && (e || !u)) {
            first_bad = (int64_t)i;
            bad_errs = e;
            bad_utf8 = !u;
        }
    }
    uint8_t *kept = xcalloc(n, 1);
    int status = 12345;
    int64_t bad = -2;
    arm();
    cst_trie *t =
        cst_build(D, data.s, data.n, off, ids, (int64_t)n, norig, kept, &status, &bad);
    disarm();
    if (t == NULL && status == CST_ENOMEM) {
        CHECKF(g_oom >= 0, "build: ENOMEM without a budget");
    } else if (first_bad >= 0) {
        int status_ok = (bad_utf8 && status == CST_EINVAL) ||
                        (bad_errs && status != CST_ENOMEM && code_ok(status, bad_errs));
        CHECKF(t == NULL && bad == first_bad && status_ok,
               "build: pair %" PRId64 " (%s) is invalid (utf8 %d, rules 0x%x); got %s, status "
               "%d, bad_index %" PRId64,
               first_bad, show(data.s + off[first_bad], (size_t)(off[first_bad + 1] - off[first_bad])),
               !bad_utf8, bad_errs, t ? "a trie" : "NULL", status, bad);
    } else {
        CHECKF(t != NULL && status == CST_OK, "build of valid pairs: status %d", status);
        handle tmp = {0};
        handle_init(&tmp, t, 0, NULL);
        for (size_t i = 0; i < n; i++) {
            const char *p = data.s + off[i];
            size_t len = (size_t)(off[i + 1] - off[i]);
            int fresh = model_find(&tmp.m, p, len, ids[i]) < 0;
            CHECKF(kept[i] == fresh, "build: kept[%zu] = %u, model says %d", i, kept[i], fresh);
            if (fresh)
                model_add(&tmp.m, p, len, ids[i]); /* the built trie holds the dense ids */
        }
        check_contents(&tmp, "built trie");
        check_structure(&tmp);
        handle *s = free_slot();
        if (s) {
            model_free(&s->m);
            *s = tmp;
        } else {
            cst_free(t);
            model_free(&tmp.m);
        }
    }
    free(kept);
    free(orig);
    free(ids);
    free(off);
    free(data.s);
}

/* Many subscribers on one pattern (hundreds of ids: the persistent set's
 * deeper nodes), then every k-th of them removed again. */
static void op_crowd(reader *r, handle *h)
{
    g_op_name = "crowd";
    read_text(r, &g_a, h);
    unsigned n = rd_u8(r) * 4u + 1, stride = rd_u8(r) % 7 + 1;
    uint64_t seed = rd_u8(r);
    uint32_t errs = ref_errors(g_a.s, g_a.n, 1);
    g_work += (uint64_t)n * (h->m.n + n) / 4;
    for (unsigned i = 0; i < n; i++) {
        uint64_t id = seed & 1 ? rng_next(&seed) : seed * 1000 + i; /* spread or dense ids */
        long at = model_find(&h->m, g_a.s, g_a.n, id);
        int rc = cst_subscribe(h->t, g_a.s, g_a.n, id);
        if (h->ro || errs) {
            CHECKF((h->ro && rc == CST_EREADONLY) || code_ok(rc, errs),
                   "crowd subscribe = %d (ro %d, rules broken 0x%x)", rc, h->ro, errs);
            return;
        }
        CHECKF(rc == (at < 0), "crowd subscribe(%s, %" PRIu64 ") = %d, model says %d",
               show(g_a.s, g_a.n), id, rc, at < 0);
        if (rc)
            model_add(&h->m, g_a.s, g_a.n, id);
        h->writes++;
    }
    for (size_t i = 0; i < h->m.n; i += stride) {
        const mpair *mp = &h->m.v[i];
        if (mp->n != g_a.n || memcmp(mp->p, g_a.s, g_a.n) != 0)
            continue;
        int rc = cst_unsubscribe(h->t, mp->p, mp->n, mp->id);
        CHECKF(rc == 1, "crowd unsubscribe(%s, %" PRIu64 ") = %d", show(mp->p, mp->n), mp->id, rc);
        model_del(&h->m, i);
        h->writes++;
    }
    uint64_t *out = xcalloc(h->m.n + 1, sizeof *out);
    int64_t k = cst_subscribers(h->t, g_a.s, g_a.n, out, h->m.n + 1);
    size_t want = 0;
    for (size_t i = 0; i < h->m.n; i++)
        want += h->m.v[i].n == g_a.n && memcmp(h->m.v[i].p, g_a.s, g_a.n) == 0;
    CHECKF(k == (int64_t)want, "crowd: subscribers = %" PRId64 ", model %zu", k, want);
    qsort(out, (size_t)k, sizeof *out, cmp_u64);
    for (int64_t i = 1; i < k; i++)
        CHECKF(out[i] != out[i - 1], "crowd: id %" PRIu64 " twice", out[i]);
    free(out);
}

/* ------------------------------------------------------------------------
 * File input: the JSON Lines scanner and the byte-table helpers
 * ---------------------------------------------------------------------- */

/* s as the body of a JSON string the way an exporter may write it: '"', '\\'
 * and control bytes escaped (short forms or \u00XX), some other ASCII bytes
 * as \u00XX (style bits), everything else as it is. */
static void json_escape(text *out, const char *s, size_t n, unsigned style)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char buf[8];
        if (c == '"' || c == '\\') {
            buf[0] = '\\';
            buf[1] = (char)c;
            tx_put(out, buf, 2);
        } else if (c < 0x20 || (c < 0x80 && ((style >> (i % 8)) & 1) && (style & 0x100))) {
            const char *shortf = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r"
                               : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
            if (shortf && (style & 0x200))
                tx_put(out, shortf, 2);
            else {
                snprintf(buf, sizeof buf, "\\u%04X", c);
                tx_put(out, buf, 6);
            }
        } else {
            tx_put(out, (const char *)&c, 1);
        }
    }
}

static void op_jsonl(reader *r, handle *h)
{
    g_op_name = "jsonl_scan";
    unsigned n = rd_u8(r) % 6 + 1;
    unsigned how = rd_u8(r);
    text body = {0};
    tx_put(&body, "", 0);
    plist want = {0};       /* (pattern, line) for template lines */
    char subs[8][64];       /* each template line's subscriber: kind byte + bytes */
    size_t sublen[8];
    int all_template = 1;
    for (unsigned i = 0; i < n; i++) {
        unsigned kind = rd_u8(r);
        read_text(r, &g_a, h);
        if (kind % 4 == 3) { /* a raw line */
            all_template = 0;
            for (size_t j = 0; j < g_a.n; j++)
                if (g_a.s[j] == '\n')
                    g_a.s[j] = ' ';
            tx_put(&body, g_a.s, g_a.n);
            tx_put(&body, "\n", 1);
            sublen[i] = 0;
            continue;
        }
        size_t plen = g_a.n < 200 ? g_a.n : 200;
        tx_put(&body, "{\"pattern\":\"", 12);
        json_escape(&body, g_a.s, plen, how << 1 | kind);
        pl_add(&want, g_a.s, plen, i);
        tx_put(&body, "\",\"subscriber\":", 15);
        char sb[64];
        size_t sl = 0;
        if (kind & 1) { /* an integer: -?(0|[1-9][0-9]*), not -0 */
            unsigned digits = rd_u8(r) % 30 + 1, first = rd_u8(r);
            int neg = (first & 0x80) && !(digits == 1 && first % 10 == 0);
            if (neg)
                sb[sl++] = '-';
            sb[sl++] = (char)('0' + (digits == 1 ? first % 10 : first % 9 + 1));
            for (unsigned d = 1; d < digits; d++)
                sb[sl++] = (char)('0' + rd_u8(r) % 10);
            tx_put(&body, sb, sl);
        } else { /* a string: the first bytes of another text */
            unsigned take = rd_u8(r) % 20;
            sl = take < g_a.n ? take : g_a.n;
            memcpy(sb, g_a.s + (g_a.n - sl), sl);
            tx_put(&body, "\"", 1);
            json_escape(&body, sb, sl, how >> 3 | 0x100);
            tx_put(&body, "\"", 1);
        }
        subs[i][0] = (char)(kind & 1);
        memcpy(subs[i] + 1, sb, sl);
        sublen[i] = sl + 1;
        tx_put(&body, "}\n", 2);
    }
    if (how & 0x80 && body.n) { /* no newline after the last line */
        body.n--;
        all_template = 0;
    }
    size_t len = body.n;
    char *pat = xcalloc(len + 1, 1), *sub = xcalloc(len + 1, 1);
    int64_t *pat_off = xcalloc(n + 1, sizeof *pat_off), *sub_end = xcalloc(n, sizeof *sub_end);
    uint64_t *refs = xcalloc(n, sizeof *refs);
    uint8_t *kinds = xcalloc(n, 1);
    int64_t got = cst_jsonl_scan(body.s, (int64_t)len, n, pat, pat_off, refs, sub, sub_end, kinds);
    if (all_template) {
        CHECKF(got >= 0, "jsonl_scan refused %u lines of the exporter's form: %s", n,
               show(body.s, body.n));
    }
    if (got >= 0) {
        CHECKF(got <= (int64_t)n, "jsonl_scan: %" PRId64 " subscribers from %u lines", got, n);
        for (unsigned i = 0; i < n; i++) {
            CHECKF(pat_off[i] <= pat_off[i + 1] && pat_off[i + 1] <= (int64_t)len,
                   "jsonl_scan: pattern %u at %" PRId64 "..%" PRId64 " of %zu", i, pat_off[i],
                   pat_off[i + 1], len);
            CHECKF(refs[i] >= 1 && refs[i] <= (uint64_t)got, "jsonl_scan: refs[%u] = %" PRIu64, i,
                   refs[i]);
        }
        for (int64_t k = 0; k < got; k++)
            CHECKF((k == 0 || sub_end[k - 1] <= sub_end[k]) && sub_end[k] <= (int64_t)len &&
                       kinds[k] <= 1,
                   "jsonl_scan: subscriber %" PRId64 " ends at %" PRId64 ", kind %u", k,
                   sub_end[k], kinds[k]);
    }
    if (all_template && got >= 0) {
        /* every line as written: patterns, subscribers numbered by first appearance */
        for (unsigned i = 0; i < n; i++) {
            const mpair *w = &want.v[i];
            size_t pl = (size_t)(pat_off[i + 1] - pat_off[i]);
            CHECKF(pl == w->n && memcmp(pat + pat_off[i], w->p, pl) == 0,
                   "jsonl_scan: line %u pattern %s, written %s", i, show(pat + pat_off[i], pl),
                   show(w->p, w->n));
            uint64_t k = refs[i] - 1;
            int64_t a = k ? sub_end[k - 1] : 0;
            CHECKF(kinds[k] == (uint8_t)subs[i][0] && (size_t)(sub_end[k] - a) == sublen[i] - 1 &&
                       memcmp(sub + a, subs[i] + 1, sublen[i] - 1) == 0,
                   "jsonl_scan: line %u subscriber %s, written %s", i,
                   show(sub + a, (size_t)(sub_end[k] - a)), show(subs[i] + 1, sublen[i] - 1));
            uint64_t first = 0; /* the number its first appearance got */
            for (unsigned j = 0; j <= i && !first; j++)
                if (sublen[j] == sublen[i] && memcmp(subs[j], subs[i], sublen[i]) == 0)
                    first = refs[j];
            CHECKF(first == refs[i], "jsonl_scan: line %u numbered %" PRIu64 ", first seen as %" PRIu64,
                   i, refs[i], first);
        }
    }
    pl_free(&want);
    free(pat);
    free(sub);
    free(pat_off);
    free(sub_end);
    free(refs);
    free(kinds);
    free(body.s);
}

/* cst_gather / cst_interleave / cst_count_ids / cst_numbering over tables
 * and references cut from the input (some out of range). */
static void op_tables(reader *r, handle *h)
{
    g_op_name = "tables";
    int64_t nb = rd_u8(r) % 5, n = rd_u8(r) % 6;
    text b = {0}, a = {0};
    tx_put(&b, "", 0);
    tx_put(&a, "", 0);
    int64_t b_end[5], a_end[6];
    for (int64_t i = 0; i < nb; i++) {
        read_text(r, &g_a, h);
        tx_put(&b, g_a.s, g_a.n < 40 ? g_a.n : 40);
        b_end[i] = (int64_t)b.n;
    }
    for (int64_t i = 0; i < n; i++) {
        unsigned k = rd_u8(r) % 4;
        tx_put(&a, "xyz", k);
        a_end[i] = (int64_t)a.n;
    }
    uint64_t refs[6];
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        unsigned v = rd_u8(r);
        refs[i] = v >= 0xf8 ? UINT64_MAX - (0xff - v) : v % 6;
        bad |= refs[i] >= (uint64_t)nb;
    }
    /* the expected gather */
    text want = {0};
    tx_put(&want, "", 0);
    int64_t want_end[6];
    for (int64_t i = 0; i < n && !bad; i++) {
        int64_t s0 = refs[i] ? b_end[refs[i] - 1] : 0;
        tx_put(&want, b.s + s0, (size_t)(b_end[refs[i]] - s0));
        want_end[i] = (int64_t)want.n;
    }
    int64_t size = cst_gather(b.s, b_end, nb, refs, n, NULL, NULL);
    CHECKF(bad ? size == CST_EINVAL : size == (int64_t)want.n, "gather size %" PRId64
           " (bad refs %d, want %zu)", size, bad, want.n);
    if (!bad) {
        char *out = xcalloc((size_t)size + 1, 1);
        int64_t out_end[6];
        CHECKF(cst_gather(b.s, b_end, nb, refs, n, out, out_end) == size, "gather");
        CHECKF(memcmp(out, want.s, (size_t)size) == 0, "gather bytes");
        for (int64_t i = 0; i < n; i++)
            CHECKF(out_end[i] == want_end[i], "gather end %" PRId64, i);
        free(out);
        /* interleave: a's item i, then b's item refs[i] */
        text iw = {0};
        tx_put(&iw, "", 0);
        for (int64_t i = 0; i < n; i++) {
            int64_t s0 = i ? a_end[i - 1] : 0, t0 = refs[i] ? b_end[refs[i] - 1] : 0;
            tx_put(&iw, a.s + s0, (size_t)(a_end[i] - s0));
            tx_put(&iw, b.s + t0, (size_t)(b_end[refs[i]] - t0));
        }
        int64_t isz = cst_interleave(a.s, a_end, n, b.s, b_end, nb, refs, NULL);
        CHECKF(isz == (int64_t)iw.n, "interleave size %" PRId64 ", want %zu", isz, iw.n);
        char *io = xcalloc(iw.n + 1, 1);
        CHECKF(cst_interleave(a.s, a_end, n, b.s, b_end, nb, refs, io) == isz &&
                   memcmp(io, iw.s, iw.n) == 0,
               "interleave bytes");
        free(io);
        free(iw.s);
    } else {
        CHECKF(cst_interleave(a.s, a_end, n, b.s, b_end, nb, refs, NULL) == CST_EINVAL,
               "interleave of bad refs");
    }
    /* counts per id, ids up to max_id */
    uint64_t max_id = nb;
    uint32_t counts[8] = {0}, want_counts[8] = {0}, want_kept[8] = {0};
    uint8_t kept[6];
    int over = 0;
    for (int64_t i = 0; i < n; i++) {
        kept[i] = (uint8_t)(i & 1);
        if (refs[i] > max_id) {
            over = 1;
        } else {
            want_counts[refs[i]]++;
            want_kept[refs[i]] += kept[i];
        }
    }
    int rc = cst_count_ids(refs, NULL, (size_t)n, counts, max_id);
    CHECKF(over ? rc == CST_EINVAL : rc == 0, "count_ids = %d (ids over max %d)", rc, over);
    if (over) {
        static const uint32_t zero[8];
        CHECKF(memcmp(counts, zero, sizeof counts) == 0, "count_ids counted before EINVAL");
    } else {
        CHECKF(memcmp(counts, want_counts, sizeof counts) == 0, "count_ids counts");
        memset(counts, 0, sizeof counts);
        CHECKF(cst_count_ids(refs, kept, (size_t)n, counts, max_id) == 0 &&
                   memcmp(counts, want_kept, sizeof counts) == 0,
               "count_ids of the kept ids");
    }
    /* numbering: dense numbers by first appearance */
    cst_numbering *nm = cst_numbering_new();
    CHECKF(nm != NULL, "numbering_new");
    uint64_t nrefs[6], fresh[6];
    int64_t nf = cst_numbering_apply(nm, refs, (size_t)n, nrefs, fresh);
    int64_t want_nf = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t j = 0;
        while (j < i && refs[j] != refs[i])
            j++;
        if (j == i) {
            CHECKF(nf > want_nf && fresh[want_nf] == refs[i], "numbering: fresh[%" PRId64 "]",
                   want_nf);
            want_nf++;
            CHECKF(nrefs[i] == (uint64_t)want_nf, "numbering: new id %" PRId64 " got %" PRIu64, i,
                   nrefs[i]);
        } else {
            CHECKF(nrefs[i] == nrefs[j], "numbering: repeated id %" PRId64, i);
        }
    }
    CHECKF(nf == want_nf, "numbering: %" PRId64 " fresh, want %" PRId64, nf, want_nf);
    nf = cst_numbering_apply(nm, refs, (size_t)n, nrefs, fresh);
    CHECKF(nf == 0, "numbering twice: %" PRId64 " fresh", nf);
    /* and a long list with repeats (the numbering's table grows) */
    size_t nb2 = rd_u8(r) * 16u;
    uint64_t seed = rd_u8(r), *many = xcalloc(nb2 + 1, sizeof *many);
    uint64_t *mrefs = xcalloc(nb2 + 1, sizeof *mrefs), *mfresh = xcalloc(nb2 + 1, sizeof *mfresh);
    for (size_t i = 0; i < nb2; i++)
        many[i] = rng_next(&seed) % (nb2 / 2 + 1) + (seed & 1 ? 0 : UINT64_C(1) << 40);
    int64_t before = want_nf;
    nf = cst_numbering_apply(nm, many, nb2, mrefs, mfresh);
    CHECKF(nf >= 0, "numbering of %zu ids = %" PRId64, nb2, nf);
    uint64_t *seen = xcalloc(nb2 + 1 + (size_t)before, sizeof *seen);
    size_t nseen = 0;
    for (int64_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < nseen && seen[j] != refs[i])
            j++;
        if (j == nseen)
            seen[nseen++] = refs[i];
    }
    int64_t fresh_count = 0;
    for (size_t i = 0; i < nb2; i++) {
        size_t j = 0;
        while (j < nseen && seen[j] != many[i])
            j++;
        if (j == nseen) {
            seen[nseen++] = many[i];
            CHECKF(fresh_count < nf && mfresh[fresh_count] == many[i], "numbering: fresh %" PRId64,
                   fresh_count);
            fresh_count++;
        }
        CHECKF(mrefs[i] == j + 1, "numbering: id %zu numbered %" PRIu64 ", want %zu", i, mrefs[i],
               j + 1);
    }
    CHECKF(fresh_count == nf, "numbering: %" PRId64 " fresh, want %" PRId64, nf, fresh_count);
    free(seen);
    free(many);
    free(mrefs);
    free(mfresh);
    cst_numbering_free(nm);
    free(want.s);
    free(a.s);
    free(b.s);
}

/* ------------------------------------------------------------------------
 * The entry point
 * ---------------------------------------------------------------------- */

static int64_t g_live0 = -1;

/* A bug found by this target, fixed (tests/hostile/test_hostile_input.py::
 * test_update_over_a_tomb_out_of_memory, stress/fuzz_known/): an update that
 * met a tomb left by a cleanup that ran out of memory helped clean it, and
 * when that cleanup could not allocate either it restarted forever instead of
 * failing with CST_ENOMEM.  -DFUZZ_SKIP_KNOWN=1 brings back the workaround the
 * fuzzer used meanwhile (no allocation budget while a handle may hold such a
 * tomb), for bisecting older engines. */
#ifndef FUZZ_SKIP_KNOWN
#define FUZZ_SKIP_KNOWN 0
#endif

static int any_tombs(void)
{
    for (unsigned i = 0; i < NHANDLES; i++)
        if (g_h[i].t && g_h[i].tombs)
            return 1;
    return 0;
}

static void run_op(reader *r, unsigned op)
{
    handle *h = pick(r);
    if (g_trace)
        fprintf(stderr, "op #%ld: code %u on handle %u (%s, %zu pairs)%s\n", g_op_index, op,
                (unsigned)(h - g_h), h->ro ? "read-only" : "writable", h->m.n,
                g_oom >= 0 ? " with an allocation budget" : "");
    switch (op) {
    case 0:
    case 1:
    case 2:
        op_subscribe(r, h, 1);
        break;
    case 3:
    case 4:
        op_subscribe(r, h, 0);
        break;
    case 5:
        op_subscribe_batch(r, h);
        break;
    case 6:
    case 7:
        op_lookup(r, h);
        break;
    case 8:
        op_has(r, h);
        break;
    case 9:
        op_match(r, h);
        break;
    case 10:
        op_subscribers(r, h);
        break;
    case 11:
        op_lookup_batch(r, h);
        break;
    case 12:
        op_validate(r, h);
        break;
    case 13:
        op_snapshot(r, h);
        break;
    case 14:
        op_free(r);
        break;
    case 15:
        op_clear(r, h);
        break;
    case 16:
        op_iterate(r, h);
        break;
    case 17:
        op_check(h);
        break;
    case 18:
        op_compact(h);
        break;
    case 19:
        op_dump(r, h);
        break;
    case 20:
        op_build(r, h);
        break;
    case 21:
        op_jsonl(r, h);
        break;
    case 22:
        op_tables(r, h);
        break;
    default:
        op_crowd(r, h);
        break;
    }
}

#define NOPS 24

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    reader rd = {data, size, 0};
    unsigned cfg = rd_u8(&rd);
    D = &DIALECTS[(cfg & 0x1f) % NDIALECTS];
    const char *tr = getenv("FUZZ_TRACE");
    g_trace = tr != NULL && *tr && strcmp(tr, "0") != 0;
    if (g_trace)
        fprintf(stderr, "input %s: %zu bytes, dialect %s%s%s%s\n", g_input_name, size,
                DIALECT_NAMES[(cfg & 0x1f) % NDIALECTS], cfg & 0x20 ? ", deep texts" : "",
                cfg & 0x40 ? ", colliding hashes" : "", cfg & 0x80 ? ", block builds" : "");
    /* Word hashes are recomputed on every call, so a mask set while no trie
     * exists holds for this whole input. */
    cst_debug_set_hash_mask(cfg & 0x40 ? UINT64_C(3) : ~UINT64_C(0));
    cst_debug_set_block_threshold(cfg & 0x80 ? 0 : 16384);
    if (g_live0 < 0) {
        /* The engine's and this thread's one-time records exist from now on. */
        cst_trie *w = cst_new(D);
        uint64_t id;
        CHECKF(w && cst_subscribe(w, "a", 1, 1) == 1 && cst_lookup(w, "a", 1, &id, 1) == 1,
               "warm-up failed");
        cst_trie *s = cst_snapshot(w, 1);
        cst_free(s);
        cst_free(w);
        cst_reclaim();
        g_live0 = cst_live_allocations();
    }
    g_work = 0;
    g_big_texts = 0;
    g_big_ok = (cfg & 0x20) != 0;
    g_ring_n = g_ring_next = 0;
    g_serial = 0;
    g_oom = -1;
    g_op_index = 0;
    memset(g_h, 0, sizeof g_h);
    cst_trie *t = cst_new(D);
    CHECKF(t != NULL, "cst_new(%s) failed", DIALECT_NAMES[(cfg & 0x1f) % NDIALECTS]);
    handle_init(&g_h[0], t, 0, NULL);
    while (!rd_eof(&rd) && g_work < FUZZ_WORK_LIMIT) {
        unsigned op = rd_u8(&rd);
        g_op_index++;
        if (op >= 0xf0) {
            /* The next operation runs with an allocation budget. */
            g_oom = (int64_t)rd_u8(&rd) % 48;
            op = rd_u8(&rd);
            if (FUZZ_SKIP_KNOWN && any_tombs())
                g_oom = -1;
        }
        run_op(&rd, op % NOPS);
        if (g_trace)
            fprintf(stderr, "    %s: ok\n", g_op_name);
        g_oom = -1;
    }
    g_op_name = "end";
    for (unsigned i = 0; i < NHANDLES; i++) {
        if (g_h[i].t) {
            check_contents(&g_h[i], "end of input");
            check_structure(&g_h[i]);
            cst_free(g_h[i].t);
        }
        model_free(&g_h[i].m);
    }
    memset(g_h, 0, sizeof g_h);
    int64_t pending = cst_reclaim();
    CHECKF(pending == 0, "cst_reclaim: %" PRId64 " objects still pending", pending);
    int64_t live = cst_live_allocations();
    CHECKF(live == g_live0, "engine leak: %" PRId64 " live allocations, %" PRId64 " at start",
           live, g_live0);
    cst_debug_set_hash_mask(~UINT64_C(0));
    cst_debug_set_block_threshold(16384);
    return 0;
}

/* ------------------------------------------------------------------------
 * Replay driver (gcc, or any build without libFuzzer)
 * ---------------------------------------------------------------------- */

#ifdef FUZZ_REPLAY_MAIN
static long g_replayed;

static void replay_file(const char *path, int in_dir)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        if (in_dir)
            return; /* gone since the listing (a running fuzzer reduces its corpus) */
        perror(path);
        exit(2);
    }
    text buf = {0};
    char chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
        tx_put(&buf, chunk, got);
    fclose(f);
    g_input_name = path;
    LLVMFuzzerTestOneInput((const uint8_t *)buf.s, buf.n);
    free(buf.s);
    g_replayed++;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void replay_path(const char *path, int in_dir)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        if (in_dir)
            return;
        perror(path);
        exit(2);
    }
    if (!S_ISDIR(st.st_mode)) {
        replay_file(path, in_dir);
        return;
    }
    DIR *dir = opendir(path);
    if (dir == NULL) {
        perror(path);
        exit(2);
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            names = xrealloc(names, cap * sizeof *names);
        }
        size_t len = strlen(path) + strlen(e->d_name) + 2;
        names[n] = xcalloc(len, 1);
        snprintf(names[n], len, "%s/%s", path, e->d_name);
        n++;
    }
    closedir(dir);
    if (n)
        qsort(names, n, sizeof *names, name_cmp); /* the same order on every run */
    for (size_t i = 0; i < n; i++) {
        replay_path(names[i], 1);
        free(names[i]);
    }
    free(names);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
        return 2;
    }
    double t0 = now_s();
    for (int i = 1; i < argc; i++)
        replay_path(argv[i], 0);
    for (unsigned i = 0; i < RING; i++)
        free(g_ring[i].s);
    free(g_a.s);
    printf("fuzz_engine: ok: %ld inputs replayed in %.2f s\n", g_replayed, now_s() - t0);
    return 0;
}
#endif
