// The watched read BIO for TLSTransport (see CGatewayShims.h). It does what OpenSSL 3's
// socket BIO does for a read (crypto/bio/bss_sock.c, sock_read and sock_ctrl), without kTLS,
// and records whether the read drained the socket.
#define OPENSSL_API_COMPAT 30000
#define OPENSSL_NO_DEPRECATED 1

#include "CGatewayShims.h"
#include <errno.h>
#include <openssl/bio.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct {
    int fd;
    int drained;
} reader_state;

static BIO_METHOD *reader_method = NULL;
static int reader_type = 0;
static pthread_once_t reader_method_once = PTHREAD_ONCE_INIT;

static int reader_read(BIO *bio, char *out, int length) {
    reader_state *state = BIO_get_data(bio);
    BIO_clear_retry_flags(bio);
    if (out == NULL || length <= 0 || state == NULL) return 0;
    ssize_t n;
    do {
        errno = 0;
        n = read(state->fd, out, (size_t)length);
    } while (n < 0 && errno == EINTR);
    if (n > 0) {
        state->drained = n < length;
        return (int)n;
    }
    if (n == 0) {
        // The peer's FIN: SSL_read reports it (close_notify missing, SSL_OP_IGNORE_UNEXPECTED_EOF).
        state->drained = 1;
        BIO_set_flags(bio, BIO_FLAGS_IN_EOF);
        return 0;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
        state->drained = 1;
        BIO_set_retry_read(bio);
    } else {
        state->drained = 0;  // a failed read proves nothing; errno is kept for the caller
    }
    return -1;
}

static int reader_write(BIO *bio, const char *in, int length) {
    (void)bio; (void)in; (void)length;
    return -1;  // the read side only: SSL writes through the socket BIO
}

static long reader_ctrl(BIO *bio, int command, long number, void *pointer) {
    (void)number;
    reader_state *state = BIO_get_data(bio);
    switch (command) {
    case BIO_CTRL_EOF:
        return BIO_test_flags(bio, BIO_FLAGS_IN_EOF) != 0;
    case BIO_C_GET_FD:
        if (state == NULL) return -1;
        if (pointer != NULL) *(int *)pointer = state->fd;
        return state->fd;
    case BIO_CTRL_DUP:
    case BIO_CTRL_FLUSH:
        return 1;
    default:
        return 0;
    }
}

static int reader_create(BIO *bio) {
    reader_state *state = calloc(1, sizeof(*state));
    if (state == NULL) return 0;
    state->fd = -1;
    BIO_set_data(bio, state);
    BIO_set_init(bio, 1);
    return 1;
}

static int reader_destroy(BIO *bio) {
    free(BIO_get_data(bio));
    BIO_set_data(bio, NULL);
    BIO_set_init(bio, 0);
    return 1;
}

static void make_reader_method(void) {
    int index = BIO_get_new_index();
    if (index == -1) return;
    int type = index | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR;
    BIO_METHOD *method = BIO_meth_new(type, "attest-gateway socket reader");
    if (method == NULL) return;
    if (BIO_meth_set_read(method, reader_read) != 1 || BIO_meth_set_write(method, reader_write) != 1
        || BIO_meth_set_ctrl(method, reader_ctrl) != 1 || BIO_meth_set_create(method, reader_create) != 1
        || BIO_meth_set_destroy(method, reader_destroy) != 1) {
        BIO_meth_free(method);
        return;
    }
    reader_type = type;
    reader_method = method;
}

int CGatewayShims_SSL_set_watched_fd(SSL *ssl, int fd) {
    pthread_once(&reader_method_once, make_reader_method);
    if (reader_method == NULL) return 0;
    BIO *reader = BIO_new(reader_method);
    if (reader == NULL) return 0;
    ((reader_state *)BIO_get_data(reader))->fd = fd;
    SSL_set0_rbio(ssl, reader);  // takes the reference
    return SSL_set_wfd(ssl, fd);  // OpenSSL's socket BIO, BIO_NOCLOSE
}

int CGatewayShims_SSL_read_drained(const SSL *ssl) {
    BIO *reader = SSL_get_rbio(ssl);
    if (reader == NULL || reader_method == NULL || BIO_method_type(reader) != reader_type) {
        return 0;
    }
    const reader_state *state = BIO_get_data(reader);
    return state != NULL && state->drained && !SSL_has_pending(ssl);
}
