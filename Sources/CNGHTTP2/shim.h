#ifndef C_NGHTTP2_SHIM_H
#define C_NGHTTP2_SHIM_H

// libnghttp2 (Debian libnghttp2-dev): HTTP/2 framing, HPACK, flow control and the protocol's
// message rules for the gateway's server side. Every function the gateway calls imports into
// Swift as is (no variadic calls, no function-like macros), so this header only includes.
#include <nghttp2/nghttp2.h>

#endif
