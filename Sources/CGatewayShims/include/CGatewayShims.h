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
/// accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC.
int CGatewayShims_accept_nonblocking(int fd, struct sockaddr *addr, socklen_t *len);

#endif
