// A C++ exception thrown out of a cthread's function must not cross into
// ferry's frames undefined: the process aborts with ferry's message.
#include <cstdio>
#include <stdexcept>
#include <ferry/cthreads.h>

static any_t thrower(any_t) { throw std::runtime_error("out of the cthread"); }

int main() {
    cthread_t t = cthread_fork(thrower, nullptr);
    cthread_join(t);
    std::puts("not reached");
    return 0;
}
