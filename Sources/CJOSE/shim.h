#ifndef C_JOSE_SHIM_H
#define C_JOSE_SHIM_H

// cjose (Debian libcjose-dev, 0.6.2): JWE A256KW + A256GCM for Play Integrity classic tokens
// (`Verification/PlayIntegrity`), and encryption for the simulator. Only these two shims are
// called from Swift, so no cjose or jansson type reaches a Swift signature, and every buffer
// cjose allocates is freed by `CJOSE_free` with cjose's own deallocator.
//
// cjose includes OpenSSL headers: hide what OpenSSL 3 deprecates exactly as COpenSSL does, so
// that both modules see the same declarations.
#define OPENSSL_API_COMPAT 30000
#define OPENSSL_NO_DEPRECATED 1

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cjose/cjose.h>

/// Frees a buffer a CJOSE_ shim returned (cjose's allocator, not necessarily malloc).
static inline void CJOSE_free(void *pointer) {
    if (pointer != NULL) {
        cjose_get_dealloc()(pointer);
    }
}

/// Decrypts a compact JWE with a 32-byte AES key as an `oct` JWK (the caller has already checked
/// the header: alg A256KW, enc A256GCM, no zip, and the part lengths). Returns the plaintext
/// (free with CJOSE_free) and its length, or NULL with `*error_code` set to cjose's
/// `cjose_errcode` (0 when cjose gave none).
static inline uint8_t *CJOSE_decrypt_compact(
    const char *compact, size_t compact_length, const uint8_t *key, size_t key_length,
    size_t *plaintext_length, int *error_code) {
    cjose_err err;
    memset(&err, 0, sizeof(err));
    *plaintext_length = 0;
    *error_code = 0;
    cjose_jwk_t *jwk = cjose_jwk_create_oct_spec(key, key_length, &err);
    if (jwk == NULL) {
        *error_code = (int)err.code;
        return NULL;
    }
    cjose_jwe_t *jwe = cjose_jwe_import(compact, compact_length, &err);
    if (jwe == NULL) {
        *error_code = (int)err.code;
        cjose_jwk_release(jwk);
        return NULL;
    }
    uint8_t *plaintext = cjose_jwe_decrypt(jwe, jwk, plaintext_length, &err);
    if (plaintext == NULL) {
        *error_code = (int)err.code;
        *plaintext_length = 0;
    }
    cjose_jwe_release(jwe);
    cjose_jwk_release(jwk);
    return plaintext;
}

/// Encrypts `plaintext` as a compact JWE, alg A256KW, enc A256GCM, under a 32-byte AES key
/// (fresh CEK and IV from cjose's RNG). Returns the text (NUL-terminated, free with CJOSE_free),
/// or NULL with `*error_code` set.
static inline char *CJOSE_encrypt_compact_a256kw_a256gcm(
    const uint8_t *key, size_t key_length, const uint8_t *plaintext, size_t plaintext_length, int *error_code) {
    cjose_err err;
    memset(&err, 0, sizeof(err));
    *error_code = 0;
    char *result = NULL;
    cjose_jwk_t *jwk = cjose_jwk_create_oct_spec(key, key_length, &err);
    cjose_header_t *header = jwk != NULL ? cjose_header_new(&err) : NULL;
    if (header != NULL && cjose_header_set(header, CJOSE_HDR_ALG, CJOSE_HDR_ALG_A256KW, &err)
        && cjose_header_set(header, CJOSE_HDR_ENC, CJOSE_HDR_ENC_A256GCM, &err)) {
        cjose_jwe_t *jwe = cjose_jwe_encrypt(jwk, header, plaintext, plaintext_length, &err);
        if (jwe != NULL) {
            char *serialized = cjose_jwe_export(jwe, &err);
            if (serialized != NULL) {
                result = serialized;
            }
            cjose_jwe_release(jwe);
        }
    }
    if (result == NULL) {
        *error_code = (int)err.code;
    }
    if (header != NULL) {
        cjose_header_release(header);
    }
    if (jwk != NULL) {
        cjose_jwk_release(jwk);
    }
    return result;
}

#endif
