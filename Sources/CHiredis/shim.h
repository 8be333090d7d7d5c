#ifndef C_HIREDIS_SHIM_H
#define C_HIREDIS_SHIM_H
// Include by the `hiredis/` prefix: works with and without pkg-config's -I.
// Do NOT include adapters/*.h: they pull in libevent/libev/libuv headers.
// `redisCommand`/`redisAsyncCommand` are variadic (not callable from Swift): use the *Argv variants.
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#endif
