// LD_PRELOAD shim for running `serve` under valgrind 3.19 (scripts/cpu-per-request.sh):
// dispatchMain() parks the main thread in sigsuspend() with a mask that lives in libdispatch's
// read-only data, and valgrind's sigsuspend wrapper edits the mask in place (SIGSEGV inside
// valgrind). The shim passes a writable copy. Not part of the gateway.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>

int sigsuspend(const sigset_t *mask) {
    static int (*real)(const sigset_t *);
    if (!real) real = (int (*)(const sigset_t *))dlsym(RTLD_NEXT, "sigsuspend");
    sigset_t copy = *mask;
    return real(&copy);
}
