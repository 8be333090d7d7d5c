#ifndef C_HIREDIS_SHIM_H
#define C_HIREDIS_SHIM_H
// Include by the `hiredis/` prefix: works with and without pkg-config's -I.
// Only the RESP reply parser is used (redisReaderCreate/Feed/GetReply, freeReplyObject,
// in `RedisReplyReader`): the gateway does its own socket and TLS I/O (`RedisSocketDriver`),
// so neither hiredis' contexts nor async.h nor the adapters/*.h are needed.
#include <hiredis/hiredis.h>
#endif
