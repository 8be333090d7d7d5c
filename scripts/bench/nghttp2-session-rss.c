/* RSS per idle libnghttp2 server session (BENCHMARKS.md "HTTP/2"): N sessions created as the
   gateway creates them (HTTP2Session.swift: no auto window update, deflate table 4096, SETTINGS
   submitted), each fed a client preface + empty SETTINGS + SETTINGS ACK and drained with
   mem_send; ONLY_NEW=1: nghttp2_session_server_new2 alone.
   MEM_LOG=1: one session through nghttp2_session_server_new3 with a logging nghttp2_mem (for
   measuring only; the gateway uses libnghttp2's default allocator): every block it allocates
   and frees, at creation and during the handshake, with the bytes it holds after each step.
   gcc -O2 -o /tmp/nghttp2-session-rss scripts/bench/nghttp2-session-rss.c -lnghttp2 && /tmp/nghttp2-session-rss 10000
   MEM_LOG=1 /tmp/nghttp2-session-rss
   SHARED=1: the sessions through nghttp2_session_server_new3 with the gateway's allocator
   (Sources/CGatewayShims/h2_session_memory.c: one shared outbound frame buffer, the stream map
   on a page of its own), compiled in:
   gcc -O2 -DWITH_GATEWAY_MEMORY -D_GNU_SOURCE -I Sources/CGatewayShims/include -o /tmp/nghttp2-session-rss \
     scripts/bench/nghttp2-session-rss.c Sources/CGatewayShims/h2_session_memory.c -lnghttp2
   SHARED=1 /tmp/nghttp2-session-rss 10000
   CHURN=1 [SHARED=1]: instead, N sessions one after the other, each created, fed a preface,
   SETTINGS and one GET's HEADERS, drained and deleted: microseconds per session (wall clock,
   so load-dependent: compare the two in one run). */
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
#include <time.h>
#ifdef WITH_GATEWAY_MEMORY
#include "CGatewayShims.h"
#endif
static long live, blocks; static const char *phase = "new";
static void *log_malloc(size_t n, void *u) { (void)u; void *p = malloc(n);
  live += malloc_usable_size(p); blocks++; printf("  %-9s malloc  %6zu\n", phase, n); return p; }
static void log_free(void *p, void *u) { (void)u; if (!p) return; live -= malloc_usable_size(p); blocks--;
  printf("  %-9s free    %6zu\n", phase, malloc_usable_size(p)); free(p); }
static void *log_calloc(size_t k, size_t n, void *u) { (void)u; void *p = calloc(k, n);
  live += malloc_usable_size(p); blocks++; printf("  %-9s calloc  %6zu\n", phase, k * n); return p; }
static void *log_realloc(void *p, size_t n, void *u) { (void)u; if (p) live -= malloc_usable_size(p); else blocks++;
  void *q = realloc(p, n); live += malloc_usable_size(q); printf("  %-9s realloc %6zu\n", phase, n); return q; }
static long rss_kb(void) { FILE *f = fopen("/proc/self/status", "r"); char l[256]; long v = 0;
  while (fgets(l, sizeof l, f)) if (!strncmp(l, "VmRSS:", 6)) v = atol(l + 6); fclose(f); return v; }
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 10000;
  nghttp2_session_callbacks *cb; nghttp2_session_callbacks_new(&cb);
  nghttp2_option *opt; nghttp2_option_new(&opt);
  nghttp2_option_set_no_auto_window_update(opt, 1);
  nghttp2_option_set_max_deflate_dynamic_table_size(opt, 4096);
  nghttp2_session **s = calloc(n, sizeof *s);
  static const unsigned char in[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    "\0\0\0\x04\0\0\0\0\0" "\0\0\0\x04\x01\0\0\0\0";
  if (getenv("MEM_LOG")) {
    nghttp2_mem mem = {NULL, log_malloc, log_free, log_calloc, log_realloc};
    nghttp2_session *one;
    printf("libnghttp2 %s, one server session's blocks (usable sizes held after each step):\n", NGHTTP2_VERSION);
    nghttp2_session_server_new3(&one, cb, NULL, opt, &mem);
    printf("after new: %ld blocks, %ld bytes\n", blocks, live);
    nghttp2_settings_entry e[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 65535}, {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, 20000}};
    phase = "handshake"; nghttp2_submit_settings(one, 0, e, 3);
    if (nghttp2_session_mem_recv(one, in, sizeof in - 1) < 0) return 1;
    const uint8_t *d; while (nghttp2_session_mem_send(one, &d) > 0) {}
    printf("after the preface, SETTINGS both ways and their ACKs: %ld blocks, %ld bytes\n", blocks, live);
    return 0;
  }
  if (getenv("CHURN")) {
    static const unsigned char get[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" "\0\0\0\x04\0\0\0\0\0"
      "\0\0\x0f\x01\x05\0\0\0\x01" "\x82\x87\x84\x41\x0alocalhost:";
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n; i++) {
      nghttp2_session *one;
#ifdef WITH_GATEWAY_MEMORY
      if (getenv("SHARED")) {
        CGatewayShims_h2_creating(1);
        nghttp2_session_server_new3(&one, cb, NULL, opt, CGatewayShims_h2_server_memory());
        CGatewayShims_h2_creating(0);
      } else
#endif
      nghttp2_session_server_new2(&one, cb, NULL, opt);
      if (nghttp2_session_mem_recv(one, get, sizeof get - 1) < 0) return 1;
      const uint8_t *d; while (nghttp2_session_mem_send(one, &d) > 0) {}
      nghttp2_session_del(one);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%d libnghttp2 %s server sessions%s, one after the other (new, preface, SETTINGS, one GET, del): "
           "%.2f us each\n", n, NGHTTP2_VERSION, getenv("SHARED") ? " (the gateway's allocator)" : "",
           ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / n);
    return 0;
  }
  long before = rss_kb();
  for (int i = 0; i < n; i++) {
#ifdef WITH_GATEWAY_MEMORY
    if (getenv("SHARED")) {
      CGatewayShims_h2_creating(1);
      nghttp2_session_server_new3(&s[i], cb, NULL, opt, CGatewayShims_h2_server_memory());
      CGatewayShims_h2_creating(0);
    } else
#endif
    nghttp2_session_server_new2(&s[i], cb, NULL, opt);
    nghttp2_settings_entry e[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 65535}, {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, 20000}};
    if (getenv("ONLY_NEW")) continue; nghttp2_submit_settings(s[i], 0, e, 3);
    if (nghttp2_session_mem_recv(s[i], in, sizeof in - 1) < 0) return 1;
    const uint8_t *d; while (nghttp2_session_mem_send(s[i], &d) > 0) {}
  }
  long after = rss_kb();
  printf("%d idle libnghttp2 %s server sessions%s: RSS %ld -> %ld KB, %.1f KB each\n", n,
         NGHTTP2_VERSION, getenv("SHARED") ? " (the gateway's allocator)" : "", before, after, (double)(after - before) / n);
  return 0;
}
