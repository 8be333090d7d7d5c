// Session ticket keys for TLSServerContext (see CGatewayShims.h for why this is C).
#define OPENSSL_API_COMPAT 30000
#define OPENSSL_NO_DEPRECATED 1

#include "CGatewayShims.h"
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    unsigned char name[16];
    unsigned char hmac_key[32];
    unsigned char aes_key[32];
} ticket_key;

_Static_assert(sizeof(ticket_key) == CGatewayShims_TICKET_KEY_BYTES, "nginx's 80-byte key layout");

struct CGatewayShims_ticket_keys {
    pthread_mutex_t lock;
    int count;
    ticket_key keys[CGatewayShims_TICKET_KEY_CAPACITY];
};

static int ex_index = -1;
static pthread_once_t ex_index_once = PTHREAD_ONCE_INIT;

static void make_ex_index(void) {
    ex_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

CGatewayShims_ticket_keys *CGatewayShims_ticket_keys_create(void) {
    CGatewayShims_ticket_keys *keys = calloc(1, sizeof(*keys));
    if (keys == NULL) return NULL;
    if (pthread_mutex_init(&keys->lock, NULL) != 0) {
        free(keys);
        return NULL;
    }
    return keys;
}

void CGatewayShims_ticket_keys_destroy(CGatewayShims_ticket_keys *keys) {
    if (keys == NULL) return;
    pthread_mutex_destroy(&keys->lock);
    OPENSSL_cleanse(keys, sizeof(*keys));
    free(keys);
}

int CGatewayShims_ticket_keys_set(CGatewayShims_ticket_keys *keys, const void *material, int count) {
    if (count < 0 || count > CGatewayShims_TICKET_KEY_CAPACITY) return 0;
    pthread_mutex_lock(&keys->lock);
    OPENSSL_cleanse(keys->keys, sizeof(keys->keys));
    if (count > 0) memcpy(keys->keys, material, (size_t)count * sizeof(ticket_key));
    keys->count = count;
    pthread_mutex_unlock(&keys->lock);
    return 1;
}

// OpenSSL's ticket key callback contract: encrypting (enc = 1) fills key_name and iv and
// initialises both contexts, returns 1 (0: issue no ticket); decrypting looks the key up by
// name, returns 0 (unknown key: full handshake), 1 (use it) or 2 (use it, and issue a new
// ticket under the current key).
//
// 2 is returned for a ticket made with a previous key and for every TLS 1.3 resumption, as
// nginx does: RFC 8446 (section C.4) has clients use a ticket once, and OpenSSL issues a
// TLS 1.3 resumption its one new ticket only when asked to renew. Answering 1 there left a
// client that resumed with nothing to resume next time, so its connections alternated
// between resumed and full handshakes.
static int ticket_key_callback(SSL *ssl, unsigned char key_name[16], unsigned char *iv, EVP_CIPHER_CTX *cipher,
                               EVP_MAC_CTX *mac, int enc) {
    // Every SSL_CTX a connection may switch to by SNI carries the same ring.
    CGatewayShims_ticket_keys *keys = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ex_index);
    if (keys == NULL) return 0;

    ticket_key key;
    int found = -1;
    pthread_mutex_lock(&keys->lock);
    if (enc) {
        if (keys->count > 0) found = 0;
    } else {
        for (int i = 0; i < keys->count; i++) {
            if (CRYPTO_memcmp(keys->keys[i].name, key_name, 16) == 0) {
                found = i;
                break;
            }
        }
    }
    if (found >= 0) key = keys->keys[found];
    pthread_mutex_unlock(&keys->lock);
    if (found < 0) return 0;

    OSSL_PARAM params[] = {
        OSSL_PARAM_octet_string(OSSL_MAC_PARAM_KEY, key.hmac_key, sizeof(key.hmac_key)),
        OSSL_PARAM_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
        OSSL_PARAM_END,
    };
    int result;
    if (enc) {
        memcpy(key_name, key.name, 16);
        if (RAND_bytes(iv, 16) != 1 || EVP_EncryptInit_ex(cipher, EVP_aes_256_cbc(), NULL, key.aes_key, iv) != 1 ||
            EVP_MAC_CTX_set_params(mac, params) != 1) {
            result = -1;
        } else {
            result = 1;
        }
    } else {
        if (EVP_DecryptInit_ex(cipher, EVP_aes_256_cbc(), NULL, key.aes_key, iv) != 1 ||
            EVP_MAC_CTX_set_params(mac, params) != 1) {
            result = -1;
        } else {
            result = (found == 0 && SSL_version(ssl) != TLS1_3_VERSION) ? 1 : 2;
        }
    }
    OPENSSL_cleanse(&key, sizeof(key));
    return result;
}

int CGatewayShims_SSL_CTX_use_ticket_keys(struct ssl_ctx_st *ctx, CGatewayShims_ticket_keys *keys) {
    pthread_once(&ex_index_once, make_ex_index);
    if (ex_index < 0) return 0;
    if (SSL_CTX_set_ex_data(ctx, ex_index, keys) != 1) return 0;
    return SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, ticket_key_callback) == 1;
}
