/*
 * tables.c - byte tables for the exporters.
 *
 * A byte table is a blob and the end offset of each item in it: item i is
 * data[end[i-1] .. end[i]) with end[-1] taken as 0 - the layout of the
 * engine's chunks (cst_chunk) and of an Arrow string column without its
 * leading 0.
 * Line formats (JSON Lines) are an item of one table followed by an item of
 * another, per pair; cst_interleave writes them in one pass instead of making
 * two Python bytes objects per pair and joining them.  A column of strings
 * taken from a table by number (Parquet's subscriber column) is cst_gather.
 *
 * Reading JSON Lines back, cst_jsonl_scan parses lines of exactly the form the
 * exporter writes (anything else is left to the general JSON reader) into the
 * pattern byte table and subscriber numbers that cst_build takes, numbering
 * the distinct subscribers as it goes.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int64_t item_start(const int64_t *end, int64_t i) { return i ? end[i - 1] : 0; }

int64_t cst_interleave(const char *a, const int64_t *a_end, int64_t n, const char *b,
                       const int64_t *b_end, int64_t nb, const uint64_t *refs, char *out)
{
    int64_t size = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t s = item_start(a_end, i);
        if (refs[i] >= (uint64_t)nb || a_end[i] < s)
            return CST_EINVAL;
        int64_t t = item_start(b_end, (int64_t)refs[i]);
        if (b_end[refs[i]] < t)
            return CST_EINVAL;
        size += a_end[i] - s + b_end[refs[i]] - t;
    }
    if (out == NULL)
        return size;
    char *p = out;
    for (int64_t i = 0; i < n; i++) {
        int64_t s = item_start(a_end, i);
        memcpy(p, a + s, (size_t)(a_end[i] - s));
        p += a_end[i] - s;
        s = item_start(b_end, (int64_t)refs[i]);
        memcpy(p, b + s, (size_t)(b_end[refs[i]] - s));
        p += b_end[refs[i]] - s;
    }
    return size;
}

int64_t cst_gather(const char *b, const int64_t *b_end, int64_t nb, const uint64_t *refs,
                   int64_t n, char *out, int64_t *out_end)
{
    int64_t size = 0;
    for (int64_t i = 0; i < n; i++) {
        if (refs[i] >= (uint64_t)nb)
            return CST_EINVAL;
        int64_t t = item_start(b_end, (int64_t)refs[i]);
        if (b_end[refs[i]] < t)
            return CST_EINVAL;
        size += b_end[refs[i]] - t;
        if (out != NULL)
            out_end[i] = size;
    }
    if (out == NULL)
        return size;
    char *p = out;
    for (int64_t i = 0; i < n; i++) {
        int64_t t = item_start(b_end, (int64_t)refs[i]);
        memcpy(p, b + t, (size_t)(b_end[refs[i]] - t));
        p += b_end[refs[i]] - t;
    }
    return size;
}

/* ------------------------------------------------------------------------
 * JSON Lines, the exporter's own form
 * ---------------------------------------------------------------------- */

static const char PAT_OPEN[] = "{\"pattern\":\"";
static const char SUB_OPEN[] = ",\"subscriber\":";

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

static int hex4(const char *p, const char *end, unsigned *out)
{
    if (end - p < 4)
        return -1;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p[i]);
        if (h < 0)
            return -1;
        v = v << 4 | (unsigned)h;
    }
    *out = v;
    return 0;
}

/* The JSON string whose opening quote is at *pp - 1, decoded to UTF-8 at
 * *outp; *pp is left after the closing quote.  -1 if it is not a string this
 * scanner takes (a raw control character, a bad escape, a lone surrogate). */
static int json_string(const char **pp, const char *end, char **outp)
{
    const char *p = *pp;
    char *o = *outp;
    for (;;) {
        const char *run = p;
        while (p < end && *p != '"' && *p != '\\' && (unsigned char)*p >= 0x20)
            p++;
        memcpy(o, run, (size_t)(p - run));
        o += p - run;
        if (p == end || (unsigned char)*p < 0x20)
            return -1;
        if (*p == '"')
            break;
        if (++p == end)
            return -1;
        char e = *p++;
        unsigned cp;
        switch (e) {
        case '"': *o++ = '"'; continue;
        case '\\': *o++ = '\\'; continue;
        case '/': *o++ = '/'; continue;
        case 'b': *o++ = '\b'; continue;
        case 'f': *o++ = '\f'; continue;
        case 'n': *o++ = '\n'; continue;
        case 'r': *o++ = '\r'; continue;
        case 't': *o++ = '\t'; continue;
        case 'u':
            if (hex4(p, end, &cp) < 0)
                return -1;
            p += 4;
            if (cp >= 0xdc00 && cp <= 0xdfff)
                return -1; /* a lone low surrogate */
            if (cp >= 0xd800 && cp <= 0xdbff) {
                unsigned lo;
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, end, &lo) < 0 ||
                    lo < 0xdc00 || lo > 0xdfff)
                    return -1; /* a lone high surrogate */
                p += 6;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
            if (cp < 0x80) {
                *o++ = (char)cp;
            } else if (cp < 0x800) {
                *o++ = (char)(0xc0 | cp >> 6);
                *o++ = (char)(0x80 | (cp & 0x3f));
            } else if (cp < 0x10000) {
                *o++ = (char)(0xe0 | cp >> 12);
                *o++ = (char)(0x80 | (cp >> 6 & 0x3f));
                *o++ = (char)(0x80 | (cp & 0x3f));
            } else {
                *o++ = (char)(0xf0 | cp >> 18);
                *o++ = (char)(0x80 | (cp >> 12 & 0x3f));
                *o++ = (char)(0x80 | (cp >> 6 & 0x3f));
                *o++ = (char)(0x80 | (cp & 0x3f));
            }
            continue;
        default:
            return -1;
        }
    }
    *pp = p + 1;
    *outp = o;
    return 0;
}

static uint64_t bytes_hash(const char *p, size_t n, uint8_t kind)
{
    uint64_t h = UINT64_C(0x9e3779b97f4a7c15) ^ n ^ ((uint64_t)kind << 56);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * UINT64_C(0xff51afd7ed558ccd);
        h ^= h >> 32;
    }
    uint64_t w = 0;
    memcpy(&w, p + i, n - i);
    h = (h ^ w) * UINT64_C(0xc4ceb9fe1a85ec53);
    return h ^ (h >> 29);
}

/* The distinct subscribers of a scan, by (kind, bytes).  A slot holds all a
 * probe compares but the bytes themselves. */
typedef struct slot {
    uint64_t hash;
    int64_t start;     /* of its bytes in the scan's `sub` */
    uint32_t len_kind; /* length << 1 | kind */
    uint32_t number;   /* 1, 2, ...; 0 = empty */
} slot;

typedef struct subscribers {
    slot *table;
    size_t cap;        /* a power of two; kept at most half full */
    int64_t n;
} subscribers;

static slot *slot_of(const subscribers *s, uint64_t h)
{
    return &s->table[(size_t)(h >> 20) & (s->cap - 1)];
}

/* The slot of the subscriber with these bytes (at sub + start), or the empty
 * slot where it belongs. */
static slot *find_subscriber(const subscribers *s, const char *sub, int64_t start,
                             uint32_t len_kind, uint64_t h)
{
    size_t at = (size_t)(slot_of(s, h) - s->table);
    for (;; at = (at + 1) & (s->cap - 1)) {
        slot *e = &s->table[at];
        if (e->number == 0 || (e->hash == h && e->len_kind == len_kind &&
                               memcmp(sub + e->start, sub + start, len_kind >> 1) == 0))
            return e;
    }
}

static int grow_subscribers(subscribers *s)
{
    size_t ncap = s->cap * 2;
    slot *nt = calloc(ncap, sizeof *nt);
    if (nt == NULL)
        return -1;
    for (size_t j = 0; j < s->cap; j++) {
        if (s->table[j].number == 0)
            continue;
        size_t to = (size_t)(s->table[j].hash >> 20) & (ncap - 1);
        while (nt[to].number != 0)
            to = (to + 1) & (ncap - 1);
        nt[to] = s->table[j];
    }
    free(s->table);
    s->table = nt;
    s->cap = ncap;
    return 0;
}

/* A line's subscriber, parsed and hashed, its number not yet known. */
typedef struct pending {
    int64_t line;
    int64_t start;
    uint32_t len_kind;
    uint64_t hash;
} pending;

/* Number pending line q's subscriber.  If it was seen before, its bytes (at
 * q->start) are dropped: the `moved` bytes after them (the next line's,
 * already parsed) move down in their place.  Returns the bytes dropped, or
 * -1 when out of memory. */
static int64_t resolve(subscribers *s, const pending *q, char *sub, int64_t moved,
                       uint64_t *refs, int64_t *sub_end, uint8_t *sub_kind)
{
    slot *e = find_subscriber(s, sub, q->start, q->len_kind, q->hash);
    int64_t len = q->len_kind >> 1;
    if (e->number != 0) {
        refs[q->line] = e->number;
        memmove(sub + q->start, sub + q->start + len, (size_t)moved);
        return len;
    }
    if ((size_t)(s->n + 1) * 2 > s->cap) {
        if (grow_subscribers(s) < 0)
            return -1;
        e = find_subscriber(s, sub, q->start, q->len_kind, q->hash);
    }
    sub_end[s->n] = q->start + len;
    sub_kind[s->n] = (uint8_t)(q->len_kind & 1);
    *e = (slot){q->hash, q->start, q->len_kind, (uint32_t)++s->n};
    refs[q->line] = (uint64_t)s->n;
    return 0;
}

int64_t cst_jsonl_scan(const char *body, int64_t len, int64_t n, char *pat, int64_t *pat_off,
                       uint64_t *refs, char *sub, int64_t *sub_end, uint8_t *sub_kind)
{
    if (n < 0 || n >= (int64_t)UINT32_MAX)
        return -1;
    const char *p = body, *end = body + len;
    char *po = pat, *so = sub;
    subscribers subs = {calloc(1024, sizeof(slot)), 1024, 0};
    if (subs.table == NULL)
        return CST_ENOMEM;
    /* Software pipelining: line i's subscriber is numbered after line i + 1
     * is parsed, so the cache miss on its table slot (prefetched when it was
     * hashed) overlaps that parsing instead of stalling it. */
    pending q = {-1, 0, 0, 0};
    int64_t r = -1;
    pat_off[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        if (end - p < (ptrdiff_t)sizeof PAT_OPEN - 1 || memcmp(p, PAT_OPEN, sizeof PAT_OPEN - 1))
            goto done;
        p += sizeof PAT_OPEN - 1;
        if (json_string(&p, end, &po) < 0)
            goto done;
        pat_off[i + 1] = po - pat;
        if (end - p < (ptrdiff_t)sizeof SUB_OPEN - 1 || memcmp(p, SUB_OPEN, sizeof SUB_OPEN - 1))
            goto done;
        p += sizeof SUB_OPEN - 1;
        char *start = so;
        uint8_t kind;
        if (p < end && *p == '"') {
            p++;
            kind = 0;
            if (json_string(&p, end, &so) < 0)
                goto done;
        } else {
            /* an integer as the exporter writes it: -?(0|[1-9][0-9]*), not -0 */
            kind = 1;
            const char *t = p;
            if (t < end && *t == '-')
                t++;
            const char *digits = t;
            while (t < end && *t >= '0' && *t <= '9')
                t++;
            if (t == digits || (*digits == '0' && (t - digits > 1 || digits != p)))
                goto done;
            memcpy(so, p, (size_t)(t - p));
            so += t - p;
            p = t;
        }
        if (end - p < 2 || p[0] != '}' || p[1] != '\n')
            goto done;
        p += 2;
        size_t slen = (size_t)(so - start);
        if (slen >= (size_t)1 << 31)
            goto done;
        pending cur = {i, start - sub, (uint32_t)slen << 1 | kind, bytes_hash(start, slen, kind)};
        __builtin_prefetch(slot_of(&subs, cur.hash));
        if (q.line >= 0) {
            int64_t dropped = resolve(&subs, &q, sub, (int64_t)slen, refs, sub_end, sub_kind);
            if (dropped < 0) {
                r = CST_ENOMEM;
                goto done;
            }
            cur.start -= dropped;
            so -= dropped;
        }
        q = cur;
    }
    if (p != end)
        goto done;
    if (q.line >= 0 && resolve(&subs, &q, sub, 0, refs, sub_end, sub_kind) < 0) {
        r = CST_ENOMEM;
        goto done;
    }
    r = subs.n;
done:
    free(subs.table);
    return r;
}
