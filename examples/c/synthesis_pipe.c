/* synthesis_pipe: programs 2, 3 and 4 of the Synthesis paper's Appendix A
 * ("R/W pipe 1", "R/W pipe 1024", "R/W pipe 4096") on a ferry stream, and
 * the same loop on a Linux pipe beside it. Each program writes N bytes and
 * reads them back, 10,000 times, in one thread:
 *
 *     pipe(fd);
 *     for (i = 10000; i--; ) {
 *         write(fd[1], x, N);
 *         read(fd[0], x, N);
 *     }
 *
 * The ferry version is the same loop with ferry_stream_pipe,
 * ferry_stream_write and ferry_stream_read. The program times the paper's
 * loop on both, prints the time per write+read pair and their ratio, then
 * runs 1,000 more rounds with a different pattern each and checks every
 * byte read back: it exits nonzero if one was lost, doubled or changed.
 *
 *   cargo build --release -p ferry-capi
 *   export PKG_CONFIG_PATH=$PWD/target/release/pkgconfig
 *   cc -O2 examples/c/synthesis_pipe.c $(pkg-config --cflags --libs ferry) -o synthesis_pipe
 *   ./synthesis_pipe            # programs 2, 3 and 4
 *   ./synthesis_pipe 1024       # program 3 only
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <ferry/ferry.h>

#define LOOPS 10000
#define MAX_N 4096
#define CHECKS 1000

static char x[MAX_N], y[MAX_N];

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* Fills x with the pattern of loop `i`, so a stale or shifted byte shows. */
static void fill(size_t n, int i) {
    for (size_t k = 0; k < n; k++) x[k] = (char)(i + k);
}

/* The program on a ferry stream, timed as the paper's loop; then CHECKS
 * more rounds with a pattern per round, read back and compared. Returns ns
 * per write+read, or -1 if a call failed or a byte came back wrong. */
static double on_stream(size_t n) {
    struct ferry_stream_writer *w;
    struct ferry_stream_reader *r;
    if (ferry_stream_pipe(0, &w, &r) != 0) return -1;
    double t0 = now_ns();
    for (int i = LOOPS; i--;) {
        if (ferry_stream_write(w, x, n, 0) != (ptrdiff_t)n) return -1;
        /* A stream's read, like a pipe's, returns what is there: here all n. */
        if (ferry_stream_read(r, x, n, 0) != (ptrdiff_t)n) return -1;
    }
    double t = (now_ns() - t0) / LOOPS;
    for (int i = CHECKS; i--;) {
        fill(n, i);
        if (ferry_stream_write(w, x, n, 0) != (ptrdiff_t)n) return -1;
        if (ferry_stream_read(r, y, n, 0) != (ptrdiff_t)n) return -1;
        if (memcmp(x, y, n) != 0) return -1;
    }
    ferry_stream_writer_close(w);
    char c;
    if (ferry_stream_read(r, &c, 1, 0) != 0) return -1; /* end-of-file */
    ferry_stream_reader_close(r);
    return t;
}

/* The same program on a Linux pipe. */
static double on_pipe(size_t n) {
    int fd[2];
    if (pipe(fd) != 0) return -1;
    double t0 = now_ns();
    for (int i = LOOPS; i--;) {
        if (write(fd[1], x, n) != (ssize_t)n) return -1;
        if (read(fd[0], x, n) != (ssize_t)n) return -1;
    }
    double t = (now_ns() - t0) / LOOPS;
    for (int i = CHECKS; i--;) {
        fill(n, i);
        if (write(fd[1], x, n) != (ssize_t)n) return -1;
        if (read(fd[0], y, n) != (ssize_t)n) return -1;
        if (memcmp(x, y, n) != 0) return -1;
    }
    close(fd[1]);
    close(fd[0]);
    return t;
}

static int program(int number, size_t n) {
    double s = on_stream(n), p = on_pipe(n);
    char label[32] = "";
    if (number > 0) snprintf(label, sizeof label, "program %d, ", number);
    if (s < 0 || p < 0) {
        printf("%sR/W pipe %zu: FAILED (%s)\n", label, n, s < 0 ? "ferry stream" : "pipe");
        return 1;
    }
    printf("%sR/W pipe %zu: ferry stream %.1f ns, pipe %.1f ns, %.1fx\n", label, n, s, p,
           p / s);
    return 0;
}

int main(int argc, char **argv) {
    static const size_t sizes[] = {1, 1024, 4096};
    int failed = 0;
    if (argc > 1) {
        long n = strtol(argv[1], NULL, 10);
        if (n < 1 || n > MAX_N) {
            fprintf(stderr, "usage: %s [N], N in 1..=%d\n", argv[0], MAX_N);
            return 2;
        }
        return program(0, (size_t)n);
    }
    for (int i = 0; i < 3; i++) failed |= program(i + 2, sizes[i]);
    return failed;
}
