// The stream BIO for TLSTransport over a byte stream that is not a socket (see CGatewayShims.h).
// Reads and writes go to the owner's callbacks; their results map onto the BIO's retry and EOF
// flags as the socket BIO's read(2) and write(2) results do (crypto/bio/bss_sock.c).
#define OPENSSL_API_COMPAT 30000
#define OPENSSL_NO_DEPRECATED 1

#include "CGatewayShims.h"
#include <openssl/bio.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdlib.h>

typedef struct {
    void *context;
    CGatewayShims_stream_read read;
    CGatewayShims_stream_write write;
} stream_state;

static BIO_METHOD *stream_method = NULL;
static pthread_once_t stream_method_once = PTHREAD_ONCE_INIT;

static int stream_read(BIO *bio, char *out, int length) {
    stream_state *state = BIO_get_data(bio);
    BIO_clear_retry_flags(bio);
    if (out == NULL || length <= 0 || state == NULL || state->read == NULL) return 0;
    long n = state->read(state->context, out, length);
    if (n > 0) return (int)n;
    if (n == 0) {
        // The peer's end of stream: SSL_read reports it (close_notify missing, SSL_OP_IGNORE_UNEXPECTED_EOF).
        BIO_set_flags(bio, BIO_FLAGS_IN_EOF);
        return 0;
    }
    if (n == CGatewayShims_STREAM_WOULD_BLOCK) BIO_set_retry_read(bio);
    return -1;
}

static int stream_write(BIO *bio, const char *in, int length) {
    stream_state *state = BIO_get_data(bio);
    BIO_clear_retry_flags(bio);
    if (in == NULL || length <= 0 || state == NULL || state->write == NULL) return 0;
    long n = state->write(state->context, in, length);
    if (n > 0) return (int)n;
    if (n == CGatewayShims_STREAM_WOULD_BLOCK) BIO_set_retry_write(bio);
    return -1;
}

static long stream_ctrl(BIO *bio, int command, long number, void *pointer) {
    (void)number;
    (void)pointer;
    switch (command) {
    case BIO_CTRL_EOF:
        return BIO_test_flags(bio, BIO_FLAGS_IN_EOF) != 0;
    case BIO_CTRL_DUP:
    case BIO_CTRL_FLUSH:
        return 1;
    default:
        return 0;
    }
}

static int stream_create(BIO *bio) {
    stream_state *state = calloc(1, sizeof(*state));
    if (state == NULL) return 0;
    BIO_set_data(bio, state);
    BIO_set_init(bio, 1);
    return 1;
}

static int stream_destroy(BIO *bio) {
    free(BIO_get_data(bio));
    BIO_set_data(bio, NULL);
    BIO_set_init(bio, 0);
    return 1;
}

static void make_stream_method(void) {
    int index = BIO_get_new_index();
    if (index == -1) return;
    BIO_METHOD *method = BIO_meth_new(index | BIO_TYPE_SOURCE_SINK, "attest-gateway stream");
    if (method == NULL) return;
    if (BIO_meth_set_read(method, stream_read) != 1 || BIO_meth_set_write(method, stream_write) != 1
        || BIO_meth_set_ctrl(method, stream_ctrl) != 1 || BIO_meth_set_create(method, stream_create) != 1
        || BIO_meth_set_destroy(method, stream_destroy) != 1) {
        BIO_meth_free(method);
        return;
    }
    stream_method = method;
}

int CGatewayShims_SSL_set_stream(struct ssl_st *ssl, void *context, CGatewayShims_stream_read read,
                                 CGatewayShims_stream_write write) {
    pthread_once(&stream_method_once, make_stream_method);
    if (stream_method == NULL) return 0;
    BIO *bio = BIO_new(stream_method);
    if (bio == NULL) return 0;
    stream_state *state = BIO_get_data(bio);
    state->context = context;
    state->read = read;
    state->write = write;
    SSL_set_bio(ssl, bio, bio);  // one BIO both ways: SSL_set_bio takes one reference for each
    return 1;
}
