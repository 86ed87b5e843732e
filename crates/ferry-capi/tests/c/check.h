/* A tiny assertion for ferry's C tests: prints where and exits 1. */
#ifndef FERRY_TEST_CHECK_H
#define FERRY_TEST_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            exit(1);                                                             \
        }                                                                        \
    } while (0)
#endif
