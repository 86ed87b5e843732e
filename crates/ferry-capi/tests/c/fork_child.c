/* fork() from a multithreaded ferry program: the child holds only the
 * calling thread (003 section 6) and keeps using ferry, cthread_fork and
 * streams included (the parent's threads open and close streams while it
 * forks); the parent's threads run on undisturbed. */
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>
#include <ferry/ferry.h>
#include "check.h"

static volatile int stop;

/* Opens a stream, moves one byte through it and closes it. */
static void one_stream(void) {
    struct ferry_stream_writer *w;
    struct ferry_stream_reader *r;
    CHECK(ferry_stream_pipe(0, &w, &r) == 0);
    char c = 'x', back = 0;
    CHECK(ferry_stream_write(w, &c, 1, 0) == 1);
    CHECK(ferry_stream_read(r, &back, 1, 0) == 1 && back == 'x');
    ferry_stream_writer_close(w);
    ferry_stream_reader_close(r);
}

static any_t spinner(any_t arg) {
    while (!stop) {
        one_stream();
        cthread_yield();
    }
    return arg;
}
static any_t twice(any_t arg) { return (any_t)((uintptr_t)arg * 2); }

static any_t forker(any_t arg) {
    (void)arg;
    cthread_t me = cthread_self();
    /* Several forks, each while the spinners are opening and closing
     * streams. */
    for (int k = 0; k < 10; k++) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            /* The child: only this thread; the parent's spinners are gone. */
            unsigned n;
            cthread_t *list;
            CHECK(task_threads(&list, &n) == FERRY_SUCCESS);
            CHECK(n == 1 && list[0] == me);
            task_threads_free(list);
            CHECK(cthread_self() == me);
            for (uintptr_t i = 0; i < 1000; i++) {
                cthread_t t = cthread_fork(twice, (any_t)i);
                CHECK(cthread_join(t) == (any_t)(i * 2));
                one_stream();
            }
            _exit(42);
        }
        int status = 0;
        CHECK(ferry_waitpid(pid, &status, 0) == pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 42) return (any_t)(intptr_t)-1;
    }
    return (any_t)(intptr_t)42;
}

int main(void) {
    cthread_t s[4];
    for (intptr_t i = 0; i < 4; i++) s[i] = cthread_fork(spinner, (any_t)i);
    cthread_t f = cthread_fork(forker, 0);
    CHECK((intptr_t)cthread_join(f) == 42);
    stop = 1;
    for (intptr_t i = 0; i < 4; i++) CHECK(cthread_join(s[i]) == (any_t)i);
    /* And from the first thread itself. */
    pid_t pid = fork();
    if (pid == 0) {
        cthread_t t = cthread_fork(twice, (any_t)21);
        _exit((int)(uintptr_t)cthread_join(t));
    }
    int status = 0;
    CHECK(ferry_waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 42);
    puts("ok");
    return 0;
}
