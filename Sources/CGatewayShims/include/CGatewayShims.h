#ifndef C_GATEWAY_SHIMS_H
#define C_GATEWAY_SHIMS_H

// Linux syscalls that Swift's Glibc module does not export (accept4, epoll_*),
// wrapped so the gateway can call them. Every symbol is prefixed CGatewayShims_.

#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>

/// One ready event from CGatewayShims_epoll_wait: the fd-owner token and the event bits.
typedef struct {
    uint64_t token;
    uint32_t events;
} CGatewayShims_event;

extern const uint32_t CGatewayShims_EPOLLIN;
extern const uint32_t CGatewayShims_EPOLLOUT;
extern const uint32_t CGatewayShims_EPOLLERR;
extern const uint32_t CGatewayShims_EPOLLHUP;
extern const uint32_t CGatewayShims_EPOLLRDHUP;
extern const uint32_t CGatewayShims_EPOLLET;

int CGatewayShims_epoll_create(void);
int CGatewayShims_epoll_add(int epfd, int fd, uint32_t events, uint64_t token);
int CGatewayShims_epoll_modify(int epfd, int fd, uint32_t events, uint64_t token);
int CGatewayShims_epoll_remove(int epfd, int fd);
/// Returns the number of events written to `out` (at most `capacity`), or -1 with errno.
int CGatewayShims_epoll_wait(int epfd, CGatewayShims_event *out, int capacity, int timeout_ms);
/// eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC): the fd that wakes a parked event loop.
int CGatewayShims_eventfd(void);
/// accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC.
int CGatewayShims_accept_nonblocking(int fd, struct sockaddr *addr, socklen_t *len);

// MARK: - The event loop this thread runs
//
// A loop runs as one long block on its queue, so the thread it runs on is fixed while it runs.
// The loop notes itself in a thread-local when it starts; "am I on this loop?" is then one
// thread-local load and a compare, cheap enough to check in release builds (a Dispatch
// queue-specific lookup is a hash-table walk). Swift cannot import a thread-local itself.

/// Set by a loop on its own thread as it starts (NULL when it ends).
void CGatewayShims_set_current_loop(const void *loop);
/// The loop running on this thread, or NULL.
const void *CGatewayShims_current_loop(void);

// MARK: - TLS session ticket keys
//
// The ticket key callback is real C: OpenSSL calls it from inside the handshake on any
// loop's thread, it must build OSSL_PARAMs (which keep pointers, see COpenSSL/shim.h), and
// the key ring it reads is replaced by a rotation timer on another thread, under a mutex.
// OpenSSL types are forward-declared so this header does not include OpenSSL's (Swift sees
// the same opaque pointers as through COpenSSL).

struct ssl_ctx_st;

/// Size of one ticket key, nginx's `ssl_session_ticket_key` layout: name (16), HMAC-SHA256
/// key (32), AES-256-CBC key (32).
#define CGatewayShims_TICKET_KEY_BYTES 80
/// At most this many keys are kept (the first encrypts, all decrypt).
#define CGatewayShims_TICKET_KEY_CAPACITY 8

typedef struct CGatewayShims_ticket_keys CGatewayShims_ticket_keys;

/// An empty key ring (no keys: no tickets are issued), or NULL when out of memory.
CGatewayShims_ticket_keys *CGatewayShims_ticket_keys_create(void);
/// Frees the ring (after every SSL_CTX using it is freed) and wipes its keys.
void CGatewayShims_ticket_keys_destroy(CGatewayShims_ticket_keys *keys);
/// Replaces the keys with `count` keys of CGatewayShims_TICKET_KEY_BYTES at `material`
/// (count <= CGatewayShims_TICKET_KEY_CAPACITY). Returns 1, or 0 when count is out of range.
int CGatewayShims_ticket_keys_set(CGatewayShims_ticket_keys *keys, const void *material, int count);
/// Makes `ctx` encrypt and decrypt session tickets with `keys` (SSL_CTX ex_data + the
/// ticket key callback). Returns 1 on success.
int CGatewayShims_SSL_CTX_use_ticket_keys(struct ssl_ctx_st *ctx, CGatewayShims_ticket_keys *keys);

// MARK: - TLS socket reads that know when the socket is drained
//
// The loops' epoll is edge-triggered: after a read that leaves the socket empty, the next data
// brings a new edge, so the read that would only find EAGAIN can be skipped. With TLS the
// owner cannot see the socket reads (OpenSSL makes them, reading ahead into its buffer), so
// the read side of a TLS connection is this BIO instead of OpenSSL's socket BIO: the same
// read(2), plus a note of whether the last one came back short of the room offered.

struct ssl_st;

/// Gives `ssl` a read BIO over `fd` that watches for drained reads, and OpenSSL's socket BIO
/// over the same `fd` for writing (what SSL_set_fd does, in two BIOs). Neither closes `fd`.
/// Returns 1 on success, 0 when out of memory.
int CGatewayShims_SSL_set_watched_fd(struct ssl_st *ssl, int fd);
/// 1 when the last read(2) of `ssl`'s watched read BIO came back short of the room offered,
/// would block or saw the end of the stream, and OpenSSL holds no byte it read (decrypted or
/// not): the kernel was empty after everything read, so new data brings a new edge. 0
/// otherwise, and for an `ssl` without a watched BIO.
int CGatewayShims_SSL_read_drained(const struct ssl_st *ssl);

// MARK: - TLS over a byte stream that is not a socket
//
// TLSTransport runs over another transport (the tests' in-memory pipe) through a BIO whose
// reads and writes call back into Swift. The socket path above does not use it.

/// What a stream callback returns instead of a byte count when the stream has nothing to give
/// (read) or no room (write) now; any other negative value is a failure. A read returns 0 at
/// the end of the stream.
static const long CGatewayShims_STREAM_WOULD_BLOCK = -1;

/// Reads up to `length` bytes of the stream into `buffer`.
typedef long (*CGatewayShims_stream_read)(void *context, void *buffer, long length);
/// Writes up to `length` bytes from `buffer` to the stream.
typedef long (*CGatewayShims_stream_write)(void *context, const void *buffer, long length);

/// Gives `ssl` one BIO for both directions that calls `read` and `write` with `context` (which
/// must outlive `ssl`). Returns 1 on success, 0 when out of memory.
int CGatewayShims_SSL_set_stream(struct ssl_st *ssl, void *context, CGatewayShims_stream_read read,
                                 CGatewayShims_stream_write write);

// MARK: - libnghttp2's memory for server sessions (h2_session_memory.c)
//
// An `nghttp2_mem` for nghttp2_session_server_new3: malloc's, except that the sessions a
// thread (an event loop) creates share one outbound frame buffer, and each session's stream
// map and HPACK rings are on pages that stay zero and not resident until written. Why the
// sharing is safe is written in h2_session_memory.c. The type is nghttp2's (this header does
// not include nghttp2.h): the pointer is an `nghttp2_mem *`.

/// The allocator (an `nghttp2_mem *`, static: valid for the process's life).
void *CGatewayShims_h2_server_memory(void);
/// 1 just before nghttp2_session_server_new3 and 0 just after it, on the creating thread:
/// only blocks made inside it are shared or pooled.
void CGatewayShims_h2_creating(int inside);
/// Around each nghttp2_session_mem_send of a server session: begin returns this thread's new
/// send generation; if the generation differs after mem_send returned, another server
/// session's mem_send ran inside it (from a callback) and the returned chunk may have been
/// overwritten: the send must fail.
uint64_t CGatewayShims_h2_send_begin(void);
uint64_t CGatewayShims_h2_send_generation(void);
/// On this thread, ever: sessions that got the shared frame buffer, pool pages (stream maps,
/// HPACK rings) taken and given back (for the tests: other threads' sessions do not count).
void CGatewayShims_h2_thread_memory_stats(long *framebuf_handouts, long *pool_pages_taken,
                                          long *pool_pages_given_back);
/// This thread's shared frame buffer, or NULL before its first server session.
const void *CGatewayShims_h2_thread_framebuf(void);
/// Whether the last stream map page this thread handed out is a page of its own, written
/// (/proc/self/pagemap): 1 or 0 (never touched, given back, or only read: the kernel's zero
/// page, not in RSS); -1 when none was handed out or pagemap cannot be read. For the tests.
int CGatewayShims_h2_last_map_page_resident(void);

#endif
