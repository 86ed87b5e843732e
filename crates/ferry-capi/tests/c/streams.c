/* Streams from C (002 §5 and Appendix A programs 2-4): one thread writes
 * then reads back 1, 1024 and 4096 bytes through a stream, 10,000 times
 * each; a producer cthread and a consumer in order, with end-of-file once
 * the write end is closed; a cloned write end from a second producer;
 * EAGAIN from the non-blocking forms, EPIPE once the readers are gone, and
 * bad arguments refused. alarm() turns a hang into a failure. */
#include <errno.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <ferry/ferry.h>
#include "check.h"

#define COUNT 20000

/* The producers' write ends: [1] the stream's own, [2] its clone, made
 * before either producer starts (an end is cloned while no other thread
 * uses it). */
static struct ferry_stream_writer *ends[3];

/* Writes COUNT numbers of 4 bytes, tagged with `tag` in the top byte. */
static any_t produce(any_t arg) {
    uint32_t tag = (uint32_t)(intptr_t)arg;
    struct ferry_stream_writer *w = ends[tag];
    CHECK(w != NULL);
    for (uint32_t i = 0; i < COUNT; i++) {
        uint32_t v = (tag << 24) | i;
        CHECK(ferry_stream_write(w, &v, sizeof v, 0) == (ssize_t)sizeof v);
    }
    ferry_stream_writer_close(w);
    return (any_t)0;
}

static void read_back(size_t n) {
    static char out[4096], in[4096];
    struct ferry_stream_writer *w;
    struct ferry_stream_reader *r;
    CHECK(ferry_stream_pipe(0, &w, &r) == 0);
    for (int loop = 0; loop < 10000; loop++) {
        memset(out, loop & 0xff, n);
        CHECK(ferry_stream_write(w, out, n, 0) == (ssize_t)n);
        size_t got = 0;
        while (got < n) {
            ssize_t k = ferry_stream_read(r, in + got, n - got, 0);
            CHECK(k > 0);
            got += (size_t)k;
        }
        CHECK(memcmp(in, out, n) == 0);
    }
    ferry_stream_writer_close(w);
    char c;
    CHECK(ferry_stream_read(r, &c, 1, 0) == 0); /* end-of-file */
    ferry_stream_reader_close(r);
}

int main(void) {
    alarm(60);
    read_back(1);
    read_back(1024);
    read_back(4096);

    /* Two producers (one through a cloned end), one consumer: each
     * producer's numbers arrive whole and in order, and end-of-file comes
     * once both ends are closed. */
    struct ferry_stream_reader *r;
    CHECK(ferry_stream_pipe(4096, &ends[1], &r) == 0);
    ends[2] = ferry_stream_writer_clone(ends[1]);
    cthread_t a = cthread_fork(produce, (any_t)(intptr_t)2);
    cthread_t b = cthread_fork(produce, (any_t)(intptr_t)1);
    uint32_t next[3] = {0, 0, 0};
    for (;;) {
        uint32_t v;
        size_t got = 0;
        while (got < sizeof v) {
            ssize_t k = ferry_stream_read(r, (char *)&v + got, sizeof v - got, 0);
            CHECK(k >= 0);
            if (k == 0)
                break;
            got += (size_t)k;
        }
        if (got == 0)
            break;
        CHECK(got == sizeof v);
        uint32_t tag = v >> 24;
        CHECK(tag == 1 || tag == 2);
        CHECK((v & 0xffffff) == next[tag]);
        next[tag]++;
    }
    CHECK(next[1] == COUNT && next[2] == COUNT);
    cthread_join(a);
    cthread_join(b);

    /* Non-blocking forms and a closed read end. */
    struct ferry_stream_writer *w;
    CHECK(ferry_stream_pipe(16, &w, &r) == 0);
    char c = 'x', buf[64];
    CHECK(ferry_stream_read(r, &c, 1, 1) == -EAGAIN);
    CHECK(ferry_stream_write(w, buf, sizeof buf, 1) == 16);
    CHECK(ferry_stream_write(w, &c, 1, 1) == -EAGAIN);
    ferry_stream_reader_close(r);
    CHECK(ferry_stream_write(w, &c, 1, 0) == -EPIPE);
    ferry_stream_writer_close(w);

    /* Bad arguments. */
    CHECK(ferry_stream_pipe(0, NULL, &r) == EFAULT);
    CHECK(ferry_stream_pipe((size_t)1 << 40, &w, &r) == EINVAL);
    CHECK(ferry_stream_write(NULL, &c, 1, 0) == -EFAULT);
    CHECK(ferry_stream_read(NULL, &c, 1, 0) == -EFAULT);
    CHECK(ferry_stream_writer_clone(NULL) == NULL);
    ferry_stream_writer_close(NULL);
    ferry_stream_reader_close(NULL);
    puts("ok");
    return 0;
}
