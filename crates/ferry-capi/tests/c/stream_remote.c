/* Streams between processes from C: a peer process connects to a name
 * this one listens on and sends numbers in writes of varying sizes, which
 * arrive in order, whole, then end-of-file; this side answers, and the
 * peer reads the answer to its end-of-file. A second peer is killed
 * (SIGKILL) mid-stream: a read here gets the bytes it sent, then
 * -ECONNRESET, and a write -EPIPE, never a hang. Bad names, a name nobody
 * listens on and NULL pointers are refused. Both peers are forked before
 * this process makes any ferry call; each waits for a byte on a pipe
 * before it connects. alarm() turns a hang into a failure. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <ferry/ferry.h>
#include "check.h"

#define COUNT 50000

static char name_a[64], name_b[64];

/* Waits for the go byte on `fd`. */
static void wait_go(int fd) {
    char c;
    CHECK(read(fd, &c, 1) == 1);
}

static void write_all(struct ferry_stream_writer *w, const void *p, size_t n) {
    const char *b = p;
    while (n > 0) {
        ssize_t k = ferry_stream_write(w, b, n, 0);
        CHECK(k > 0);
        b += k;
        n -= (size_t)k;
    }
}

/* Peer A: COUNT numbers in writes of 1 to 7 numbers, then reads "bye". */
static void peer_a(int go) {
    wait_go(go);
    struct ferry_stream_writer *w;
    struct ferry_stream_reader *r;
    int rc = ferry_stream_connect(name_a, &w, &r);
    if (rc != 0)
        fprintf(stderr, "connect: %s\n", strerror(rc));
    CHECK(rc == 0);
    uint32_t buf[7];
    for (uint32_t i = 0; i < COUNT;) {
        uint32_t k = 1 + i % 7;
        if (k > COUNT - i)
            k = COUNT - i;
        for (uint32_t j = 0; j < k; j++)
            buf[j] = i + j;
        write_all(w, buf, k * sizeof buf[0]);
        i += k;
    }
    ferry_stream_writer_close(w);
    char back[8];
    size_t got = 0;
    for (;;) {
        ssize_t k = ferry_stream_read(r, back + got, sizeof back - got, 0);
        CHECK(k >= 0);
        if (k == 0)
            break;
        got += (size_t)k;
    }
    CHECK(got == 3 && memcmp(back, "bye", 3) == 0);
    ferry_stream_reader_close(r);
    _exit(0);
}

/* Peer B: ten bytes, then waits to be killed. */
static void peer_b(int go) {
    wait_go(go);
    struct ferry_stream_writer *w;
    struct ferry_stream_reader *r;
    CHECK(ferry_stream_connect(name_b, &w, &r) == 0);
    write_all(w, "0123456789", 10);
    for (;;)
        pause();
}

static pid_t fork_peer(void (*peer)(int), int *go) {
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(fds[1]);
        peer(fds[0]);
    }
    close(fds[0]);
    *go = fds[1];
    return pid;
}

int main(void) {
    alarm(60);
    snprintf(name_a, sizeof name_a, "c-stream-a-%d", (int)getpid());
    snprintf(name_b, sizeof name_b, "c-stream-b-%d", (int)getpid());
    int go_a, go_b;
    pid_t a = fork_peer(peer_a, &go_a);
    pid_t b = fork_peer(peer_b, &go_b);

    /* Peer A: numbers in order, whole, then end-of-file; then the answer. */
    struct ferry_stream_listener *l;
    CHECK(ferry_stream_listen(name_a, 1000, &l) == 0);
    struct ferry_stream_listener *again;
    CHECK(ferry_stream_listen(name_a, 0, &again) == EADDRINUSE);
    CHECK(write(go_a, "g", 1) == 1);
    struct ferry_stream_writer *w;
    struct ferry_stream_reader *r;
    CHECK(ferry_stream_accept(l, &w, &r) == 0);
    uint32_t next = 0;
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
        CHECK(v == next);
        next++;
    }
    CHECK(next == COUNT);
    char c;
    CHECK(ferry_stream_read(r, &c, 1, 1) == 0); /* end-of-file stays */
    write_all(w, "bye", 3);
    ferry_stream_writer_close(w);
    int status;
    CHECK(waitpid(a, &status, 0) == a);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ferry_stream_reader_close(r);
    ferry_stream_listener_close(l);

    /* Peer B, killed mid-stream. */
    CHECK(ferry_stream_listen(name_b, 0, &l) == 0);
    CHECK(write(go_b, "g", 1) == 1);
    CHECK(ferry_stream_accept(l, &w, &r) == 0);
    char ten[10];
    size_t got = 0;
    while (got < sizeof ten) {
        ssize_t k = ferry_stream_read(r, ten + got, sizeof ten - got, 0);
        CHECK(k > 0);
        got += (size_t)k;
    }
    CHECK(memcmp(ten, "0123456789", 10) == 0);
    CHECK(kill(b, SIGKILL) == 0);
    CHECK(waitpid(b, &status, 0) == b);
    CHECK(ferry_stream_read(r, &c, 1, 0) == -ECONNRESET);
    CHECK(ferry_stream_read(r, &c, 1, 1) == -ECONNRESET);
    CHECK(ferry_stream_write(w, "x", 1, 0) == -EPIPE);
    ferry_stream_writer_close(w);
    ferry_stream_reader_close(r);
    ferry_stream_listener_close(l);

    /* Nobody listens; bad names; NULL pointers. */
    CHECK(ferry_stream_connect(name_a, &w, &r) == ENOENT);
    CHECK(ferry_stream_connect("no/slash", &w, &r) == EINVAL);
    CHECK(ferry_stream_listen("", 0, &l) == EINVAL);
    CHECK(ferry_stream_listen(name_a, (size_t)1 << 40, &l) == EINVAL);
    CHECK(ferry_stream_listen(NULL, 0, &l) == EFAULT);
    CHECK(ferry_stream_listen(name_a, 0, NULL) == EFAULT);
    CHECK(ferry_stream_connect(name_a, NULL, &r) == EFAULT);
    CHECK(ferry_stream_accept(NULL, &w, &r) == EFAULT);
    ferry_stream_listener_close(NULL);
    puts("ok");
    return 0;
}
