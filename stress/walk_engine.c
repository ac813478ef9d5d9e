/*
 * walk_engine.c - the cost of one lookup's walk, through the engine's public
 * C API only (cstrie.h): a C loop with no Python around it, for before/after
 * pairs of engine changes.
 *
 *   walk_engine FILTERS TOPICS [--dialect mqtt|amqp] [--passes N]
 *               [--mode plain|warm|batch]
 *
 * FILTERS and TOPICS are text files, one pattern or topic a line
 * (stress/lab/walk_files.py writes the benchmark suite's workloads).  Pattern
 * j is subscribed with subscriber j + 1 into one trie, in file order; then
 * every topic is looked up, --passes times (default 10), and the best pass is
 * printed in ns per lookup with the ids per lookup.  Modes:
 *
 *   plain   cst_lookup;
 *   warm    cst_lookup_warm (what Trie.lookup calls: on a trie of over 50,000
 *           pairs the walk runs in rounds that overlap its misses);
 *   batch   cst_lookup_many over 16 topics at a time (what Trie.lookup_many
 *           does per group of 16: their walks in the same rounds).
 *
 * Run it under `valgrind --tool=callgrind` or cachegrind for instruction and
 * miss counts per lookup (the difference of a 3-pass and a 1-pass run, halved,
 * over the topics): unlike times on a shared machine they repeat to a percent
 * or two.  docs/benchmarks.md, "The walk as one loop", has the method.
 *
 * Build: make -C stress walk   (-O2 -mpopcnt like the Python build)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cstrie.h"
#include "support.h" /* xcalloc, xrealloc, now_s (tests/native/) */

#define BATCH 16
#define OUT_CAP 65536

static void die(const char *what)
{
    fprintf(stderr, "walk_engine: %s\n", what);
    exit(2);
}

/* The lines of file fn (without their newlines), and their lengths. */
static char **read_lines(const char *fn, size_t *n, size_t **lens)
{
    FILE *f = fopen(fn, "r");
    if (f == NULL)
        die("cannot open an input file");
    size_t cap = 1024;
    char **v = xcalloc(cap, sizeof *v);
    size_t *l = xcalloc(cap, sizeof *l);
    char *line = NULL;
    size_t lcap = 0;
    ssize_t got;
    *n = 0;
    while ((got = getline(&line, &lcap, f)) >= 0) {
        if (got > 0 && line[got - 1] == '\n')
            line[--got] = '\0';
        if (*n == cap) {
            cap *= 2;
            v = xrealloc(v, cap * sizeof *v);
            l = xrealloc(l, cap * sizeof *l);
        }
        v[*n] = xcalloc((size_t)got + 1, 1);
        memcpy(v[*n], line, (size_t)got + 1);
        l[(*n)++] = (size_t)got;
    }
    free(line);
    fclose(f);
    *lens = l;
    return v;
}

static cst_dialect dialect_of(const char *name)
{
    cst_dialect d = {0};
    if (strcmp(name, "mqtt") == 0) {
        d.sep = "/", d.single = "+", d.multi = "#";
        d.multi_last_only = 1, d.strict_wildcards = 1, d.empty_words = 1;
        d.dollar_rule = 1, d.max_bytes = 65535, d.forbid_nul = 1;
    } else if (strcmp(name, "amqp") == 0) {
        d.sep = ".", d.single = "*", d.multi = "#";
        d.empty_topic = 1, d.empty_words = 1, d.topic_wildcards = 1, d.max_levels = 256;
    } else {
        die("--dialect is mqtt or amqp");
    }
    d.sep_len = d.single_len = d.multi_len = 1;
    return d;
}

int main(int argc, char **argv)
{
    const char *dname = "mqtt", *mode = "warm";
    int passes = 10;
    if (argc < 3)
        die("usage: walk_engine FILTERS TOPICS [--dialect mqtt|amqp] [--passes N] "
            "[--mode plain|warm|batch]");
    for (int a = 3; a + 1 < argc; a += 2) {
        if (strcmp(argv[a], "--dialect") == 0)
            dname = argv[a + 1];
        else if (strcmp(argv[a], "--passes") == 0)
            passes = atoi(argv[a + 1]);
        else if (strcmp(argv[a], "--mode") == 0)
            mode = argv[a + 1];
        else
            die("unknown option");
    }
    int m = strcmp(mode, "plain") == 0 ? 0 : strcmp(mode, "warm") == 0 ? 1
          : strcmp(mode, "batch") == 0 ? 2 : -1;
    if (m < 0 || passes < 1)
        die("--mode is plain, warm or batch; --passes at least 1");
    cst_dialect d = dialect_of(dname);
    size_t nf, nt, *flen, *tlen;
    char **fs = read_lines(argv[1], &nf, &flen), **ts = read_lines(argv[2], &nt, &tlen);
    cst_trie *t = cst_new(&d);
    if (t == NULL)
        die("cst_new failed");
    for (size_t i = 0; i < nf; i++)
        if (cst_subscribe(t, fs[i], flen[i], (uint64_t)i + 1) < 0)
            die("a pattern of FILTERS is invalid in the dialect");
    uint64_t *out = xcalloc(OUT_CAP, sizeof *out);
    double best = 1e30;
    int64_t ids = 0;
    for (int p = 0; p < passes; p++) {
        int64_t got = 0;
        double t0 = now_s();
        for (size_t i = 0; i < nt; i++) {
            int64_t r;
            if (m == 2) {
                size_t k = nt - i < BATCH ? nt - i : BATCH, ends[BATCH];
                r = cst_lookup_many(t, (const char *const *)ts + i, tlen + i, k, out, OUT_CAP,
                                    ends);
                if (r > OUT_CAP)
                    die("a batch's answers outgrew the buffer");
                i += k - 1;
            } else {
                r = m == 1 ? cst_lookup_warm(t, ts[i], tlen[i], out, OUT_CAP)
                           : cst_lookup(t, ts[i], tlen[i], out, OUT_CAP);
            }
            if (r < 0)
                die("a topic of TOPICS is invalid in the dialect");
            got += r;
        }
        double dt = now_s() - t0;
        if (dt < best)
            best = dt;
        ids = got;
    }
    printf("%s %s: %zu filters, %zu topics, %.2f ids per lookup, best of %d passes: %.1f ns per "
           "lookup\n",
           mode, dname, nf, nt, nt ? (double)ids / (double)nt : 0.0, passes,
           nt ? best / (double)nt * 1e9 : 0.0);
    cst_free(t);
    free(out);
    for (size_t i = 0; i < nf; i++)
        free(fs[i]);
    for (size_t i = 0; i < nt; i++)
        free(ts[i]);
    free(fs), free(ts), free(flen), free(tlen);
    return 0;
}
