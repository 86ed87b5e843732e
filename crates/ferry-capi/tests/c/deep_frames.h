/* What the stack-guard tests share: a recursion without bound whose every
 * frame holds a 5,000-byte local array touched at both ends (without
 * stack-clash probes each frame skips more than a page at once; with them
 * it touches every page on its way down). It must never return: the
 * harness checks stderr for "deep: recursing" and no "recursion
 * returned". */
#ifndef FERRY_TEST_DEEP_FRAMES_H
#define FERRY_TEST_DEEP_FRAMES_H
#include <stdio.h>

static unsigned long recurse(unsigned long depth) {
    volatile unsigned char frame[5000];
    frame[0] = (unsigned char)depth;
    frame[4999] = (unsigned char)(depth >> 8);
    if (depth == (unsigned long)-1) return 0;
    return recurse(depth + 1) + frame[0] + frame[4999];
}

/* Says it starts, recurses, and says so if the recursion ever returns. */
static void recurse_without_bound(void) {
    fprintf(stderr, "deep: recursing\n");
    unsigned long r = recurse(0);
    fprintf(stderr, "recursion returned %lu\n", r);
}
#endif
