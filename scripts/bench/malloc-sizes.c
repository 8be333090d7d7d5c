/* Live heap blocks by size, for measuring what a connection holds (BENCHMARKS.md "HTTP/2",
   scripts/bench/h2-idle-heap.sh): an LD_PRELOAD that counts every live malloc'd block by its
   usable size and, on SIGUSR2, writes "usable-size live-blocks" lines to $MALLOC_SIZES_OUT.N
   (N = 0, 1, ... per signal). Two dumps around opening N idle connections, diffed and divided
   by N, give the blocks each connection holds and their sizes, which name their owners
   (libnghttp2's 2,928-byte session, OpenSSL's objects, Swift objects by instance size).
   For measuring only (valgrind's massif and DHAT crashed on the release binary, 29 Nov).
   gcc -O2 -shared -fPIC -o /tmp/malloc-sizes.so scripts/bench/malloc-sizes.c */
#define _GNU_SOURCE
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

#define BUCKETS 65536 /* usable sizes / 8 below 512 KiB; the last bucket holds the rest */
static long live[BUCKETS];
static int dumps;

static inline size_t bucket(void *p) {
    size_t n = malloc_usable_size(p) / 8;
    return n < BUCKETS ? n : BUCKETS - 1;
}
static inline void *noted(void *p) {
    if (p) __atomic_add_fetch(&live[bucket(p)], 1, __ATOMIC_RELAXED);
    return p;
}
static inline void unnoted(void *p) {
    if (p) __atomic_sub_fetch(&live[bucket(p)], 1, __ATOMIC_RELAXED);
}

void *malloc(size_t n) { return noted(__libc_malloc(n)); }
void *calloc(size_t k, size_t n) { return noted(__libc_calloc(k, n)); }
void free(void *p) { unnoted(p); __libc_free(p); }
void *realloc(void *p, size_t n) {
    unnoted(p);
    void *q = __libc_realloc(p, n);
    if (!q && n) { noted(p); return q; }
    return noted(q);
}
void *memalign(size_t a, size_t n) { return noted(__libc_memalign(a, n)); }
void *aligned_alloc(size_t a, size_t n) { return noted(__libc_memalign(a, n)); }
int posix_memalign(void **out, size_t a, size_t n) {
    void *p = __libc_memalign(a, n);
    if (!p) return 12;
    *out = noted(p);
    return 0;
}

static void dump(int sig) {
    (void)sig;
    const char *base = getenv("MALLOC_SIZES_OUT");
    if (!base) return;
    char path[512], line[64];
    snprintf(path, sizeof path, "%s.%d", base, dumps++);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return;
    for (int i = 0; i < BUCKETS; i++) {
        long n = __atomic_load_n(&live[i], __ATOMIC_RELAXED);
        if (n == 0) continue;
        int len = snprintf(line, sizeof line, "%d %ld\n", i * 8, n);
        if (write(fd, line, len) != len) break;
    }
    close(fd);
}

__attribute__((constructor)) static void install(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = dump;
    action.sa_flags = SA_RESTART;
    sigaction(SIGUSR2, &action, NULL);
}
