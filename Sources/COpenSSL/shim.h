#ifndef C_OPENSSL_SHIM_H
#define C_OPENSSL_SHIM_H

// Hide everything OpenSSL 3 deprecates (SHA256_Init, EC_KEY_*, ECDSA_do_verify, ...):
// Swift would otherwise import them with only a warning. Must precede the includes.
#define OPENSSL_API_COMPAT 30000
#define OPENSSL_NO_DEPRECATED 1

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/x509_vfy.h>
#include <openssl/sha.h>
#include <openssl/pem.h>
#include <openssl/bio.h>
#include <openssl/rand.h>
#include <openssl/hmac.h>
#include <openssl/pkcs7.h>
#include <openssl/core_names.h>
#include <openssl/param_build.h>
#include <openssl/ssl.h>

// Function-like and compound macros are not imported by Swift and variadic C
// functions cannot be called from it: each one we need gets a `static inline`
// wrapper here, prefixed with the module name.

/// `OPENSSL_free` is a macro over `CRYPTO_free(ptr, __FILE__, __LINE__)`.
static inline void COpenSSL_free(void *ptr) {
    OPENSSL_free(ptr);
}

/// `EVP_EC_gen` is a macro over the variadic `EVP_PKEY_Q_keygen`. (Simulator only.)
static inline EVP_PKEY *COpenSSL_EVP_EC_gen(const char *curve) {
    return EVP_EC_gen(curve);
}

/// Compound macro `(EVP_PKEY_KEY_PARAMETERS | OSSL_KEYMGMT_SELECT_PUBLIC_KEY)`: not imported.
static const int COpenSSL_EVP_PKEY_PUBLIC_KEY = EVP_PKEY_PUBLIC_KEY;

/// Build an EC public key from an X9.62 point. Done in C because OSSL_PARAM keeps the
/// *pointer* to its key name: a Swift String passed as `const char *` dies after the call.
static inline EVP_PKEY *COpenSSL_EC_public_key_from_point(const char *group,
                                                          const unsigned char *point,
                                                          size_t point_len) {
    EVP_PKEY *key = NULL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    if (ctx == NULL) return NULL;
    OSSL_PARAM params[] = {
        OSSL_PARAM_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, (char *)group, 0),
        OSSL_PARAM_octet_string(OSSL_PKEY_PARAM_PUB_KEY, (void *)point, point_len),
        OSSL_PARAM_END,
    };
    if (EVP_PKEY_fromdata_init(ctx) != 1 ||
        EVP_PKEY_fromdata(ctx, &key, EVP_PKEY_PUBLIC_KEY, params) != 1) {
        key = NULL;
    }
    EVP_PKEY_CTX_free(ctx);
    return key;
}

// MARK: - TLS (Gateway/Transport/TLS): the SSL_CTX_* / SSL_* control macros over
// SSL_CTX_ctrl / SSL_ctrl / SSL_CTX_callback_ctrl, and the SSL_OP_* bits (SSL_OP_BIT(n)
// is a function-like macro, so none of them is imported).

static const uint64_t COpenSSL_SSL_OP_IGNORE_UNEXPECTED_EOF = SSL_OP_IGNORE_UNEXPECTED_EOF;
static const uint64_t COpenSSL_SSL_OP_NO_RENEGOTIATION = SSL_OP_NO_RENEGOTIATION;
static const uint64_t COpenSSL_SSL_OP_NO_COMPRESSION = SSL_OP_NO_COMPRESSION;
static const uint64_t COpenSSL_SSL_OP_CIPHER_SERVER_PREFERENCE = SSL_OP_CIPHER_SERVER_PREFERENCE;
static const uint64_t COpenSSL_SSL_OP_PRIORITIZE_CHACHA = SSL_OP_PRIORITIZE_CHACHA;
static const unsigned long COpenSSL_XN_FLAG_RFC2253 = XN_FLAG_RFC2253;

static inline long COpenSSL_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return SSL_CTX_set_min_proto_version(ctx, version);
}

static inline long COpenSSL_SSL_CTX_set_max_proto_version(SSL_CTX *ctx, int version) {
    return SSL_CTX_set_max_proto_version(ctx, version);
}

static inline long COpenSSL_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_mode(ctx, mode);
}

static inline long COpenSSL_SSL_CTX_set_read_ahead(SSL_CTX *ctx, long yes) {
    return SSL_CTX_set_read_ahead(ctx, yes);
}

static inline long COpenSSL_SSL_CTX_set_session_cache_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_session_cache_mode(ctx, mode);
}

static inline long COpenSSL_SSL_CTX_sess_set_cache_size(SSL_CTX *ctx, long size) {
    return SSL_CTX_sess_set_cache_size(ctx, size);
}

static inline long COpenSSL_SSL_CTX_set1_groups_list(SSL_CTX *ctx, const char *list) {
    return SSL_CTX_set1_groups_list(ctx, list);
}

/// Adds `cert` to the chain sent after the leaf (takes its own reference).
static inline long COpenSSL_SSL_CTX_add1_chain_cert(SSL_CTX *ctx, X509 *cert) {
    return SSL_CTX_add1_chain_cert(ctx, cert);
}

/// SNI callback and its argument (two macros over SSL_CTX_callback_ctrl / SSL_CTX_ctrl).
static inline void COpenSSL_SSL_CTX_set_servername_callback(SSL_CTX *ctx, int (*callback)(SSL *, int *, void *),
                                                            void *arg) {
    SSL_CTX_set_tlsext_servername_callback(ctx, callback);
    SSL_CTX_set_tlsext_servername_arg(ctx, arg);
}

/// The SNI a client sends.
static inline long COpenSSL_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return SSL_set_tlsext_host_name(ssl, name);
}

/// `SSL_set_app_data` is a macro over SSL_set_ex_data(ssl, 0, ...).
static inline int COpenSSL_SSL_set_app_data(SSL *ssl, void *data) {
    return SSL_set_app_data(ssl, data);
}

static inline void *COpenSSL_SSL_get_app_data(const SSL *ssl) {
    return SSL_get_app_data(ssl);
}

#endif
