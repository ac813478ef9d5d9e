/*
 * lines.h - what the C-loop benchmarks of stress/ share: a file of lines
 * read into memory, and the MQTT and AMQP dialects as cstrie/dialect.py
 * defines them.
 * `die` prints the program's name (PROG, defined before this is included).
 */
#ifndef STRESS_LINES_H
#define STRESS_LINES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cstrie.h"
#include "support.h" /* xcalloc, xrealloc (tests/native/) */

static void die(const char *what)
{
    fprintf(stderr, PROG ": %s\n", what);
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

#endif
