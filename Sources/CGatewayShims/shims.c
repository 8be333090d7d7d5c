#ifndef _GNU_SOURCE
#error "_GNU_SOURCE must be set (Package.swift cSettings) for accept4"
#endif
#include "CGatewayShims.h"
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <errno.h>
#include <stddef.h>

const uint32_t CGatewayShims_EPOLLIN = EPOLLIN;
const uint32_t CGatewayShims_EPOLLOUT = EPOLLOUT;
const uint32_t CGatewayShims_EPOLLERR = EPOLLERR;
const uint32_t CGatewayShims_EPOLLHUP = EPOLLHUP;
const uint32_t CGatewayShims_EPOLLRDHUP = EPOLLRDHUP;
const uint32_t CGatewayShims_EPOLLET = EPOLLET;

_Static_assert(sizeof(((struct epoll_event *)0)->data.u64) == sizeof(uint64_t), "epoll data is 64-bit");

int CGatewayShims_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int CGatewayShims_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

int CGatewayShims_epoll_add(int epfd, int fd, uint32_t events, uint64_t token) {
    struct epoll_event ev = { .events = events, .data.u64 = token };
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

int CGatewayShims_epoll_modify(int epfd, int fd, uint32_t events, uint64_t token) {
    struct epoll_event ev = { .events = events, .data.u64 = token };
    return epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev);
}

int CGatewayShims_epoll_remove(int epfd, int fd) {
    return epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
}

int CGatewayShims_epoll_wait(int epfd, CGatewayShims_event *out, int capacity, int timeout_ms) {
    struct epoll_event events[256];
    if (capacity > 256) capacity = 256;
    int n;
    do {
        n = epoll_wait(epfd, events, capacity, timeout_ms);
    } while (n < 0 && errno == EINTR);
    for (int i = 0; i < n; i++) {
        out[i].token = events[i].data.u64;
        out[i].events = events[i].events;
    }
    return n;
}

static __thread const void *current_loop;

void CGatewayShims_set_current_loop(const void *loop) { current_loop = loop; }

const void *CGatewayShims_current_loop(void) { return current_loop; }

int CGatewayShims_accept_nonblocking(int fd, struct sockaddr *addr, socklen_t *len) {
    int r;
    do {
        r = accept4(fd, addr, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    } while (r < 0 && errno == EINTR);
    return r;
}
