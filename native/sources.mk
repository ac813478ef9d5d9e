# The engine's source files, relative to native/: the one list every build
# reads.  native/Makefile and stress/Makefile include this file, and
# cstrie/_build.py reads it for the cffi module (ENGINE_SOURCES) and setup.py
# for the CPython fast path (HOTPATH_SOURCES), through _build.py's
# native_sources().  One name a line, each line but the last of a list ending
# in a backslash.
ENGINE_SOURCES := \
    alloc.c \
    scratch.c \
    ebr.c \
    idset.c \
    words.c \
    trie.c \
    match.c \
    cache.c \
    topic_index.c \
    walk.c \
    build.c \
    numbering.c \
    tables.c \
    hotpath_api.c

HOTPATH_SOURCES := \
    hotpath/module.c \
    hotpath/registry.c \
    hotpath/reader.c \
    hotpath/groups.c \
    hotpath/content.c
