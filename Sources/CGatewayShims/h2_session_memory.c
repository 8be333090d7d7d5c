// libnghttp2's memory for the gateway's HTTP/2 *server* sessions (an `nghttp2_mem` passed to
// nghttp2_session_server_new3). Everything goes to malloc/calloc/realloc/free, except two
// blocks libnghttp2 1.52 makes for every session when it is created and that an idle
// connection does not need of its own (BENCHMARKS.md "Idle HTTP/2 connections: libnghttp2's
// memory"; docs/design-notes.md, same heading):
//
// 1. The outbound frame buffer: the first 16,394-byte chunk of `session->aob.framebufs`
//    (NGHTTP2_FRAMEBUF_CHUNKLEN = 9-byte frame header + 1 pad-length byte + 16,384 payload,
//    made by nghttp2_bufs_init3 -> buf_chain_new -> nghttp2_buf_init2 -> nghttp2_buf_reserve
//    as realloc(NULL, 16394)). All server sessions created on one thread (one event loop: a
//    session never leaves its loop's thread) share ONE such chunk: it is what nginx does with
//    its per-worker read buffer. Why that is safe, from libnghttp2 1.52's source
//    (lib/nghttp2_session.c, lib/nghttp2_buf.c):
//    - Bytes are written into framebufs only inside nghttp2_session_mem_send: state
//      NGHTTP2_OB_POP_ITEM calls session_prep_frame, which packs the next frame (HEADERS via
//      the HPACK deflater, DATA via nghttp2_session_pack_data, which also calls the data
//      provider's read callback with a pointer into the chunk), sets NGHTTP2_OB_SEND_DATA, and
//      the same call returns `buf->pos` of the current chunk with ALL its bytes
//      (`datalen = nghttp2_buf_len(buf); buf->pos += datalen;`). No later call reads that
//      chunk's bytes again: the next call finds `pos == last` and moves on
//      (session_after_frame_sent2: to the next chunk of a CONTINUATION chain, or
//      active_outbound_item_reset -> nghttp2_bufs_reset, which only resets the chains'
//      pointers, kept in the private 48-byte nghttp2_buf_chain, never the bytes).
//      nghttp2_session_mem_recv never touches aob.framebufs; nghttp2_submit_* only queue
//      items.
//    - A header block longer than one chunk continues in extra chunks (CONTINUATION frames,
//      bufs_alloc_chain -> buf_chain_new, the same size) whose bytes DO wait for later
//      mem_send calls: those are allocated outside session creation and stay private here.
//      Only the first chunk, allocated while CGatewayShims_h2_creating is set, is shared.
//    - nghttp2_bufs_realloc (which would free and remake the chunk) runs only with a
//      data_source_read_length_callback, which the gateway does not set; if it ran, the
//      shared chunk's free is a no-op and the new chunk is private: still correct.
//    - The gateway copies every chunk mem_send returns into the socket's output before it
//      calls mem_send again (HTTP2Library.send's sink). One window remains: mem_send runs
//      session_after_frame_sent1 (on_frame_send / on_stream_close callbacks) after it set
//      the returned pointer; a callback that made ANOTHER server session on this thread
//      mem_send would overwrite the chunk before it is copied. The gateway's callbacks do not
//      (they count, reset the same session, release upstreams and mark repumps), and
//      CGatewayShims_h2_send_begin/_generation turn such a nesting into a failed send (the
//      connection closes) rather than a corrupt frame.
//    free() of the shared chunk is a no-op; it lives as long as its thread's slot (the loops
//    run for the process's life). Without room for another slot, a session gets its own.
// 2. The stream map's table, nghttp2_map_init's calloc(256, 16) (4,096 bytes), and the two
//    HPACK rings, hd_ringbuf_init's malloc(1024) for the deflater's and the inflater's dynamic
//    tables: pages of a pool (the map one page, the two rings one page at offsets 0 and 2048)
//    that are zero because they were never written or were given back with
//    madvise(MADV_DONTNEED). A heap block (calloc's memset, malloc's chunk headers beside it)
//    would make them resident for a connection that never opens a stream or sends a header.
//    libnghttp2 reads a ring's entries only after it stored them (first/len), and the map's
//    buckets as calloc'd, so both are correct on a zero page. A page whose blocks are all freed
//    goes back to the kernel and to the pool. When the map or a ring grows, libnghttp2 frees
//    this block and makes a bigger one from malloc as usual.
//
// Both come from one region reserved at first use (mmap, MAP_NORESERVE: address space only;
// pages become resident when written). If the reservation fails, everything is malloc's.

#include "CGatewayShims.h"
#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

/// libnghttp2's NGHTTP2_FRAMEBUF_CHUNKLEN (lib/nghttp2_session.h: NGHTTP2_FRAME_HDLEN + 1 +
/// NGHTTP2_MAX_PAYLOADLEN), not in its public header. CGatewayShims_h2_thread_memory_stats
/// counts hand-outs so a library that changed it is seen (the tests check a session shares).
#define FRAMEBUF_CHUNKLEN (9 + 1 + 16384)
/// nghttp2_map_init's table: 256 buckets of 16 bytes (lib/nghttp2_map.c, 1.52).
#define STREAM_MAP_BYTES 4096
/// hd_ringbuf_init's buffer: 128 entry pointers (lib/nghttp2_hd.c, 1.52), one for the
/// deflater's dynamic table and one for the inflater's.
#define HPACK_RING_BYTES 1024
#define PAGE_BYTES 4096

/// Shared frame buffers: one slot per thread that creates a server session.
#define FRAMEBUF_SLOT_BYTES 20480
#define FRAMEBUF_SLOTS 256
/// Pool pages: two per live server session (its stream map; its two HPACK rings), so
/// ~131,000 sessions before new ones fall back to malloc (1 GiB of address space, resident
/// only where written).
#define POOL_PAGES 262144

static const size_t region_framebufs = (size_t)FRAMEBUF_SLOT_BYTES * FRAMEBUF_SLOTS;
static const size_t region_bytes = (size_t)FRAMEBUF_SLOT_BYTES * FRAMEBUF_SLOTS + (size_t)PAGE_BYTES * POOL_PAGES;

static pthread_once_t region_once = PTHREAD_ONCE_INIT;
static unsigned char *region; // NULL: the reservation failed, all is malloc's
static uint32_t *free_pages;  // stack of given-back page indices (in `bookkeeping`)
static uint8_t *page_blocks;  // blocks still live in each page (in `bookkeeping`)
static const size_t bookkeeping_bytes = (sizeof(uint32_t) + sizeof(uint8_t)) * POOL_PAGES;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t next_page;       // pages below it were handed out at least once
static uint32_t free_page_count; // entries in free_pages
static atomic_uint next_slot;

static __thread int creating;
static __thread unsigned char *thread_framebuf;
static __thread int thread_framebuf_tried;
static __thread int creation_took_framebuf;
static __thread unsigned char *creation_ring_page; // the session being created's ring page
static __thread int creation_rings;
static __thread uint64_t send_generation;
static __thread void *last_map_page; // the last stream map page handed out on this thread
static __thread long thread_handouts, thread_pages_taken, thread_pages_given_back;

static void reserve_region(void) {
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    void *pages = mmap(NULL, region_bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
    void *books = mmap(NULL, bookkeeping_bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (pages == MAP_FAILED || books == MAP_FAILED) {
        if (pages != MAP_FAILED) munmap(pages, region_bytes);
        if (books != MAP_FAILED) munmap(books, bookkeeping_bytes);
        return;
    }
    region = pages;
    free_pages = books;
    page_blocks = (uint8_t *)books + sizeof(uint32_t) * POOL_PAGES;
}

static int in_framebufs(const void *ptr) {
    return region && (const unsigned char *)ptr >= region && (const unsigned char *)ptr < region + region_framebufs;
}

static int in_pool(const void *ptr) {
    return region && (const unsigned char *)ptr >= region + region_framebufs &&
           (const unsigned char *)ptr < region + region_bytes;
}

/// This thread's shared frame buffer (its slot, taken at first use), or NULL.
static unsigned char *shared_framebuf(void) {
    if (thread_framebuf || thread_framebuf_tried) return thread_framebuf;
    thread_framebuf_tried = 1;
    pthread_once(&region_once, reserve_region);
    if (!region) return NULL;
    unsigned slot = atomic_fetch_add(&next_slot, 1);
    if (slot >= FRAMEBUF_SLOTS) return NULL;
    thread_framebuf = region + (size_t)slot * FRAMEBUF_SLOT_BYTES;
    return thread_framebuf;
}

/// A zero page, not resident, for `blocks` blocks; NULL when the pool is out.
static unsigned char *pool_page_take(uint8_t blocks) {
    pthread_once(&region_once, reserve_region);
    if (!region) return NULL;
    uint32_t index = POOL_PAGES;
    pthread_mutex_lock(&pool_lock);
    if (free_page_count > 0) {
        index = free_pages[--free_page_count];
    } else if (next_page < POOL_PAGES) {
        index = next_page++;
    }
    if (index < POOL_PAGES) page_blocks[index] = blocks;
    pthread_mutex_unlock(&pool_lock);
    if (index == POOL_PAGES) return NULL;
    thread_pages_taken += 1;
    return region + region_framebufs + (size_t)index * PAGE_BYTES;
}

/// One block of a pool page is freed; the page's last one gives it back.
static void pool_block_free(void *block) {
    size_t index = ((unsigned char *)block - region - region_framebufs) / PAGE_BYTES;
    pthread_mutex_lock(&pool_lock);
    int last = --page_blocks[index] == 0;
    pthread_mutex_unlock(&pool_lock);
    if (!last) return;
    // Zero again and not resident: the next session's map reads as calloc'd without a write.
    madvise(region + region_framebufs + index * PAGE_BYTES, PAGE_BYTES, MADV_DONTNEED);
    pthread_mutex_lock(&pool_lock);
    free_pages[free_page_count++] = (uint32_t)index;
    pthread_mutex_unlock(&pool_lock);
    thread_pages_given_back += 1;
}

static void *h2_malloc(size_t size, void *user) {
    (void)user;
    if (creating && size == HPACK_RING_BYTES && creation_rings < 2) {
        // The session's two HPACK rings share a page (at 0 and 2048), written only when a
        // header field enters a dynamic table (libnghttp2 reads only the entries it stored).
        if (!creation_ring_page) creation_ring_page = pool_page_take(2);
        if (creation_ring_page) return creation_ring_page + 2048 * creation_rings++;
    }
    return malloc(size);
}

static void h2_free(void *ptr, void *user) {
    (void)user;
    if (!ptr || in_framebufs(ptr)) return;
    if (in_pool(ptr)) {
        pool_block_free(ptr);
        return;
    }
    free(ptr);
}

static void *h2_calloc(size_t count, size_t size, void *user) {
    (void)user;
    if (creating && size != 0 && count == STREAM_MAP_BYTES / size && count * size == STREAM_MAP_BYTES) {
        void *page = pool_page_take(1);
        if (page) {
            last_map_page = page;
            return page;
        }
    }
    return calloc(count, size);
}

static void *h2_realloc(void *ptr, size_t size, void *user) {
    (void)user;
    if (!ptr) {
        if (creating && size == FRAMEBUF_CHUNKLEN && !creation_took_framebuf) {
            unsigned char *shared = shared_framebuf();
            if (shared) {
                creation_took_framebuf = 1;
                thread_handouts += 1;
                return shared;
            }
        }
        return malloc(size);
    }
    if (in_framebufs(ptr) || in_pool(ptr)) {
        // Not made by libnghttp2 1.52 (it frees and remakes these); kept correct regardless.
        // (Copying to the end of the pool page may copy more than the block: harmless.)
        size_t old = in_framebufs(ptr) ? FRAMEBUF_CHUNKLEN : PAGE_BYTES - ((uintptr_t)ptr & (PAGE_BYTES - 1));
        void *moved = malloc(size);
        if (!moved) return NULL;
        memcpy(moved, ptr, size < old ? size : old);
        h2_free(ptr, user);
        return moved;
    }
    return realloc(ptr, size);
}

static nghttp2_mem server_memory = {NULL, h2_malloc, h2_free, h2_calloc, h2_realloc};

void *CGatewayShims_h2_server_memory(void) { return &server_memory; }

void CGatewayShims_h2_creating(int inside) {
    if (!inside && creation_ring_page && creation_rings < 2) {
        // A library that made fewer rings than two: the page's unused block is freed now.
        for (; creation_rings < 2; creation_rings++) pool_block_free(creation_ring_page + 2048 * creation_rings);
    }
    creating = inside;
    creation_took_framebuf = 0;
    creation_ring_page = NULL;
    creation_rings = 0;
}

uint64_t CGatewayShims_h2_send_begin(void) { return ++send_generation; }

uint64_t CGatewayShims_h2_send_generation(void) { return send_generation; }

void CGatewayShims_h2_thread_memory_stats(long *framebuf_handouts, long *pool_pages_taken,
                                          long *pool_pages_given_back) {
    *framebuf_handouts = thread_handouts;
    *pool_pages_taken = thread_pages_taken;
    *pool_pages_given_back = thread_pages_given_back;
}

const void *CGatewayShims_h2_thread_framebuf(void) { return thread_framebuf; }

int CGatewayShims_h2_last_map_page_resident(void) {
    // /proc/self/pagemap: bit 63 present, bit 56 mapped exclusively. A page only read is
    // present as the kernel's shared zero page (not counted in RSS, never exclusive); a
    // written one is a page of its own. (mincore cannot tell the two apart.)
    if (!last_map_page) return -1;
    int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    uint64_t entry = 0;
    off_t offset = (off_t)((uintptr_t)last_map_page / PAGE_BYTES * sizeof(entry));
    ssize_t got = pread(fd, &entry, sizeof(entry), offset);
    close(fd);
    if (got != (ssize_t)sizeof(entry)) return -1;
    return (entry >> 63 & 1) && (entry >> 56 & 1);
}
