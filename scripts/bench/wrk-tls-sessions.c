// LD_PRELOAD for wrk in make bench's TLS handshake rows: counts how many of wrk's TLS connections
// resumed a session and, with WRK_TLS_SESSIONS=drop, makes every connection a full handshake.
//
// wrk closes a connection with SSL_shutdown + SSL_clear and reconnects with the same SSL object.
// SSL_clear keeps a cleanly shut down session, so wrk offers the session (or the last ticket the
// server sent) on the next connect: against a server that issues tickets, a `Connection: close`
// run measures resumed handshakes, not full ones. Dropping the session right after SSL_shutdown
// leaves SSL_clear nothing to keep, so the next connect offers nothing.
//
// At exit it writes "wrk-tls-sessions: N connections shut down, M resumed" to
// WRK_TLS_SESSIONS_REPORT (a file, appended) or stderr, so the bench can check what it measured.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <openssl/ssl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_long shut_down;
static atomic_long resumed;
static int drop_sessions;

// The mode is read once, not on every connection wrk closes.
__attribute__((constructor)) static void read_mode(void) {
    const char *mode = getenv("WRK_TLS_SESSIONS");
    drop_sessions = mode != NULL && strcmp(mode, "drop") == 0;
}

int SSL_shutdown(SSL *ssl) {
    static int (*real_shutdown)(SSL *);
    if (real_shutdown == NULL) {
        real_shutdown = (int (*)(SSL *))dlsym(RTLD_NEXT, "SSL_shutdown");
        if (real_shutdown == NULL) abort();
    }
    int result = real_shutdown(ssl);
    if (ssl != NULL) {
        atomic_fetch_add(&shut_down, 1);
        if (SSL_session_reused(ssl)) atomic_fetch_add(&resumed, 1);
        if (drop_sessions) SSL_set_session(ssl, NULL);
    }
    return result;
}

__attribute__((destructor)) static void report(void) {
    const char *path = getenv("WRK_TLS_SESSIONS_REPORT");
    FILE *out = path != NULL ? fopen(path, "a") : stderr;
    if (out == NULL) return;
    fprintf(out, "wrk-tls-sessions: %ld connections shut down, %ld resumed\n", atomic_load(&shut_down),
            atomic_load(&resumed));
    if (out != stderr) fclose(out);
}
