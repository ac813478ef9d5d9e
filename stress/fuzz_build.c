/*
 * fuzz_build.c - a fuzz target for cst_build (native/build.c) fed crafted
 * offset tables, the buffers every loader hands it from a file.
 *
 * The input makes one call: pattern data, an offset table and subscriber
 * ids, each in a heap block of exactly its size, so that any read past one
 * (or before it) is an ASan report.  The table starts as a cut of the data
 * into patterns and is then damaged as an attacker would: entries set to any
 * int64, to just past the data, to negative values, below their neighbour,
 * up past the data and back down ([0, BIG, d]); ids set to 0 or past max_id;
 * bytes of the data set to anything (invalid UTF-8).
 *
 * Every answer is checked against the contract in native/cstrie.h:
 *  - the first entry that is negative, below the one before it or past
 *    data_len (the rule, computed here) gives NULL, CST_EBOUNDS and that
 *    entry in bad_index, whatever the data holds;
 *  - otherwise NULL with CST_EINVAL, or a validation code, names the first
 *    pair whose pattern is not UTF-8 (strict, computed here), whose id is
 *    outside 1..max_id, or that cst_validate refuses with that code;
 *  - otherwise a trie holding exactly the distinct (pattern, id) pairs, kept[]
 *    marking the first of each.
 * Every input ends with every trie freed; cst_reclaim() must then give the
 * engine's live allocation count back.
 *
 * Input layout (all optional: a short input reads zeros):
 *   byte 0   config: dialect (bits 0-1: amqp, mqtt, nats), kept NULL (0x04)
 *   byte 1   n pairs (mod 48)
 *   byte 2   L, then L data bytes (or, when 0x08 of byte 0 is set, L indexes
 *            into a table of words, so that patterns are mostly valid)
 *   then n steps (bytes): offsets[k] = min(offsets[k-1] + step, data length),
 *            the last one the data's length in the words mode; then damage
 *            ops until the input ends:
 *            op byte (kind in bits 0-3), index byte, and an 8-byte value for
 *            the kinds that take one.
 *
 * FUZZ_TRACE=1 in the environment prints each input's outcome.
 *
 * Builds (stress/Makefile):
 *   make fuzz-build-replay  gcc -fsanitize=address,undefined, replaying
 *                           fuzz_build_corpus/, then FUZZ_BUILD_RANDOM inputs
 *                           made here from seed FUZZ_BUILD_SEED
 *   make fuzz-build         clang libFuzzer over the same entry point
 */
#include <dirent.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cstrie.h"

#define PROGRAM_NAME "fuzz_build"
#include "support.h"

static const char *g_input_name = "(libFuzzer input)";

#define CHECKF(cond, ...)                                                               \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "fuzz_build: %s: check failed at %s:%d: %s\n  ", g_input_name, \
                    __FILE__, __LINE__, #cond);                                         \
            fprintf(stderr, __VA_ARGS__);                                               \
            fputc('\n', stderr);                                                        \
            abort();                                                                    \
        }                                                                               \
    } while (0)

#define WS_BITS ((UINT64_C(1) << ' ') | (UINT64_C(1) << '\t') | (UINT64_C(1) << '\n') | \
                 (UINT64_C(1) << '\r') | (UINT64_C(1) << '\f'))

static const cst_dialect DIALECTS[] = {
    {".", 1, "*", 1, "#", 1, 0, 0, 0, 1, 1, 1, 0, 0, 0, {0, 0}, 256},
    {"/", 1, "+", 1, "#", 1, 0, 1, 1, 0, 0, 1, 1, 1, 65535, {0, 0}, 0},
    {".", 1, "*", 1, ">", 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, {WS_BITS, 0}, 0},
};
#define NDIALECTS (sizeof DIALECTS / sizeof *DIALECTS)

/* pieces of patterns, for inputs that ask for mostly valid data */
static const char *const WORDS[] = {"a", "b", ".", "/", "*", "#", "+", ">", "\xc3\xa9",
                                    "\xe6\x97\xa5", "$x", "", "\xff", "\xed\xa0\x80", " ",
                                    "\xf0\x9f\x98\x80"};
#define NWORDS (sizeof WORDS / sizeof *WORDS)

typedef struct reader {
    const uint8_t *p;
    size_t n, i;
} reader;

static uint8_t rd_u8(reader *r) { return r->i < r->n ? r->p[r->i++] : 0; }

static uint64_t rd_u64(reader *r)
{
    uint64_t v = 0;
    for (int k = 0; k < 8; k++)
        v |= (uint64_t)rd_u8(r) << (8 * k);
    return v;
}

/* Strict UTF-8, written from RFC 3629 (no overlongs, no surrogates). */
static int utf8_ok(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i], need, min, cp;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf)
            need = 1, min = 0x80, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef)
            need = 2, min = 0x800, cp = c & 0x0f;
        else if (c >= 0xf0 && c <= 0xf4)
            need = 3, min = 0x10000, cp = c & 0x07;
        else
            return 0;
        if (n - i <= need)
            return 0;
        for (unsigned k = 1; k <= need; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += need + 1;
    }
    return 1;
}

/* The rule for an offset table: its first entry that is negative (entry 0),
 * below the entry before it, or past len; -1 when there is none. */
static int64_t first_bad_entry(const int64_t *off, int64_t n, size_t len)
{
    int64_t prev = 0;
    for (int64_t k = 0; k <= n; k++) {
        if (off[k] < prev || (off[k] >= 0 && (uint64_t)off[k] > len))
            return k;
        prev = off[k];
    }
    return -1;
}

static void damage(reader *r, int64_t *off, int64_t n, size_t len, uint64_t *ids, char *data)
{
    while (r->i < r->n) {
        uint8_t op = rd_u8(r);
        int64_t k = (int64_t)(rd_u8(r) % (uint64_t)(n + 1));
        switch (op & 0x0f) {
        case 0: off[k] = (int64_t)rd_u64(r); break;
        case 1: off[k] = (int64_t)len + 1 + (rd_u8(r) & 7); break;
        case 2: off[k] = -1 - (int64_t)(rd_u8(r) & 7); break;
        case 3:
            off[k] = k && off[k - 1] > INT64_MIN + 4 ? off[k - 1] - 1 - (rd_u8(r) & 3) : -1;
            break;
        case 4: /* [.., BIG, d]: up past the data and back down */
            if (k < n) {
                off[k] = (int64_t)len + 1 + (int64_t)(rd_u64(r) >> 2);
                off[k + 1] = (int64_t)len;
            }
            break;
        case 5: off[k] = INT64_MAX; break;
        case 6: off[k] = INT64_MIN; break;
        case 7: off[k] = (int64_t)len; break;
        case 8:
            if (n)
                ids[k % n] = rd_u8(r) & 1 ? 0 : UINT64_MAX;
            break;
        case 9: {
            size_t at = rd_u8(r);
            char byte = (char)rd_u8(r);
            if (len)
                data[at % len] = byte;
            break;
        }
        default: break;
        }
    }
}

static int64_t g_live0 = -1;
static long g_stats[4]; /* EBOUNDS, other errors, built, build of n > 0 pairs */

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size)
{
    reader rd = {in, size, 0};
    uint8_t cfg = rd_u8(&rd);
    const cst_dialect *d = &DIALECTS[(cfg & 3) % NDIALECTS];
    if (g_live0 < 0) {
        cst_trie *w = cst_new(d);
        CHECKF(w != NULL, "warm-up");
        cst_free(w);
        cst_reclaim();
        g_live0 = cst_live_allocations();
    }
    int64_t n = rd_u8(&rd) % 48;
    size_t len = rd_u8(&rd);
    /* the data: len raw bytes, or len words from the table */
    char *tmp = xcalloc(len * 4 + 1, 1);
    size_t used = 0;
    for (size_t i = 0; i < len; i++) {
        uint8_t b = rd_u8(&rd);
        if (cfg & 0x08) {
            const char *w = WORDS[b % NWORDS];
            memcpy(tmp + used, w, strlen(w));
            used += strlen(w);
        } else {
            tmp[used++] = (char)b;
        }
    }
    len = used;
    char *data = malloc(len); /* exactly len bytes: ASan sees any read past them */
    CHECKF(data != NULL || len == 0, "out of memory");
    if (len)
        memcpy(data, tmp, len);
    free(tmp);
    /* a monotone cut of the data, then the damage */
    int64_t *off = malloc((size_t)(n + 1) * sizeof *off);
    uint64_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    uint8_t *kept = malloc((size_t)(n ? n : 1));
    CHECKF(off && ids && kept, "out of memory");
    uint64_t max_id = 1 + (cfg >> 4);
    off[0] = 0;
    for (int64_t k = 1; k <= n; k++) {
        int64_t step = rd_u8(&rd);
        off[k] = off[k - 1] + step > (int64_t)len ? (int64_t)len : off[k - 1] + step;
    }
    if (n && (cfg & 0x08))
        off[n] = (int64_t)len;
    for (int64_t i = 0; i < n; i++)
        ids[i] = 1 + (uint64_t)i % max_id;
    damage(&rd, off, n, len, ids, data);

    int status = 12345;
    int64_t bad = -2;
    uint8_t *kp = cfg & 0x04 ? NULL : kept;
    cst_trie *t = cst_build(d, data, len, off, ids, n, max_id, kp, &status, &bad);
    int64_t want = first_bad_entry(off, n, len);
    const char *tr = getenv("FUZZ_TRACE");
    if (tr != NULL && *tr && strcmp(tr, "0") != 0)
        fprintf(stderr, "%s: %" PRId64 " pairs, %zu data bytes: %s, status %d, bad_index %" PRId64
                "\n", g_input_name, n, len, t ? "built" : "NULL", status, bad);
    if (want >= 0) {
        CHECKF(t == NULL && status == CST_EBOUNDS && bad == want,
               "offset entry %" PRId64 " (%" PRId64 ") is bad, data %zu bytes: got %s, status %d, "
               "bad_index %" PRId64,
               want, off[want], len, t ? "a trie" : "NULL", status, bad);
        g_stats[0]++;
    } else {
        /* the first pair the rules refuse, and how */
        int64_t first = -1;
        int code = CST_OK;
        cst_trie *v = cst_new(d);
        CHECKF(v != NULL, "out of memory");
        for (int64_t i = 0; i < n && first < 0; i++) {
            const char *p = data + off[i];
            size_t pl = (size_t)(off[i + 1] - off[i]);
            if (!utf8_ok((const unsigned char *)p, pl) || ids[i] == 0 || ids[i] > max_id) {
                first = i, code = CST_EINVAL;
            } else {
                int64_t c = cst_validate(v, p, pl, 1);
                if (c < 0)
                    first = i, code = (int)c;
            }
        }
        cst_free(v);
        if (first >= 0) {
            CHECKF(t == NULL && status == code && bad == first,
                   "pair %" PRId64 " is invalid (code %d): got %s, status %d, bad_index %" PRId64,
                   first, code, t ? "a trie" : "NULL", status, bad);
            g_stats[1]++;
        } else {
            CHECKF(t != NULL && status == CST_OK, "valid pairs: status %d, bad_index %" PRId64,
                   status, bad);
            int64_t distinct = 0;
            for (int64_t i = 0; i < n; i++) {
                size_t pl = (size_t)(off[i + 1] - off[i]);
                int fresh = 1;
                for (int64_t j = 0; j < i && fresh; j++)
                    fresh = !(ids[j] == ids[i] && (size_t)(off[j + 1] - off[j]) == pl &&
                              memcmp(data + off[j], data + off[i], pl) == 0);
                distinct += fresh;
                if (kp)
                    CHECKF(kept[i] == fresh, "kept[%" PRId64 "] = %u, expected %d", i, kept[i],
                           fresh);
            }
            CHECKF(cst_len(t) == distinct, "the trie holds %" PRId64 " pairs, expected %" PRId64,
                   cst_len(t), distinct);
            char msg[200];
            CHECKF(cst_check(t, 1, msg, sizeof msg) == 0, "invariants: %s", msg);
            g_stats[2]++;
            g_stats[3] += n > 0;
        }
    }
    if (t)
        cst_free(t);
    free(data);
    free(off);
    free(ids);
    free(kept);
    cst_reclaim();
    CHECKF(cst_live_allocations() == g_live0, "leak: %" PRId64 " live allocations, %" PRId64
           " before", cst_live_allocations(), g_live0);
    return 0;
}

#ifdef FUZZ_REPLAY_MAIN
static long g_replayed;

static void run_bytes(const char *name, const uint8_t *p, size_t n)
{
    g_input_name = name;
    LLVMFuzzerTestOneInput(p, n);
    g_replayed++;
}

static void replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        exit(2);
    }
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0, got;
    uint8_t chunk[65536];
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (n + got > cap) {
            cap = (n + got) * 2;
            buf = xrealloc(buf, cap);
        }
        memcpy(buf + n, chunk, got);
        n += got;
    }
    fclose(f);
    run_bytes(path, buf ? buf : (const uint8_t *)"", n);
    free(buf);
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void replay_path(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        exit(2);
    }
    if (!S_ISDIR(st.st_mode)) {
        replay_file(path);
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
        qsort(names, n, sizeof *names, name_cmp);
    for (size_t i = 0; i < n; i++) {
        replay_path(names[i]);
        free(names[i]);
    }
    free(names);
}

/* usage: fuzz_build-replay [--random N SEED] FILE_OR_DIR...
 * --random: also N inputs of random bytes from SEED (splitmix64), each
 * named "random SEED:i" in a failure message. */
int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    double t0 = now_s();
    long random_n = 0;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--random") == 0 && i + 2 < argc) {
            random_n = strtol(argv[i + 1], NULL, 10);
            seed = strtoull(argv[i + 2], NULL, 10);
            i += 2;
            continue;
        }
        replay_path(argv[i]);
    }
    long from_files = g_replayed;
    uint8_t buf[512];
    char name[64];
    for (long i = 0; i < random_n; i++) {
        uint64_t s = seed * UINT64_C(0x9e3779b97f4a7c15) + (uint64_t)i;
        size_t n = (size_t)(rng_next(&s) % sizeof buf);
        for (size_t k = 0; k < n; k++)
            buf[k] = (uint8_t)rng_next(&s);
        snprintf(name, sizeof name, "random %" PRIu64 ":%ld", seed, i);
        run_bytes(name, buf, n);
    }
    printf("fuzz_build: ok: %ld inputs (%ld files, %ld random from seed %" PRIu64
           ") in %.2f s: %ld refused for their offsets (CST_EBOUNDS), %ld for a pair, "
           "%ld built (%ld of one pair or more)\n",
           g_replayed, from_files, random_n, seed, now_s() - t0, g_stats[0], g_stats[1],
           g_stats[2], g_stats[3]);
    return 0;
}
#endif
