#!/usr/bin/node
// A WebSocket echo upstream on Debian's node-ws, for the gateway's end-to-end tests (issue 33):
// the first message reports the handshake it received ({"path", "headers": [[name, value], ...]}),
// then every message is echoed. The first stdout line is `listening PORT` (a free loopback port).
'use strict';
// Debian installs node-ws under /usr/share/nodejs, which node does not search by itself.
module.paths.push('/usr/share/nodejs');
const { WebSocketServer } = require('ws');

const server = new WebSocketServer({ host: '127.0.0.1', port: 0 }, () => {
  console.log(`listening ${server.address().port}`);
});
server.on('connection', (socket, request) => {
  const headers = [];
  for (let i = 0; i < request.rawHeaders.length; i += 2) {
    headers.push([request.rawHeaders[i], request.rawHeaders[i + 1]]);
  }
  socket.send(JSON.stringify({ path: request.url, headers }));
  socket.on('message', (data, isBinary) => socket.send(data, { binary: isBinary }));
});
