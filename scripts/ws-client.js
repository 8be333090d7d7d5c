#!/usr/bin/node
// A WebSocket client on Debian's node-ws, for the gateway's end-to-end tests (issue 33).
// Usage: ws-client.js URL [MESSAGES] [NAME:VALUE ...]
// Prints {"status": 101, "hello": <the upstream's first message>, "echoes": [...]} after
// MESSAGES round trips (binary ones: node-ws sends Buffers as binary frames), or
// {"status": S} when the handshake is answered with S.
'use strict';
// Debian installs node-ws under /usr/share/nodejs, which node does not search by itself.
module.paths.push('/usr/share/nodejs');
const WebSocket = require('ws');

const [url, count = '2', ...headerArguments] = process.argv.slice(2);
const headers = {};
for (const argument of headerArguments) {
  const colon = argument.indexOf(':');
  headers[argument.slice(0, colon)] = argument.slice(colon + 1);
}
const socket = new WebSocket(url, { headers, handshakeTimeout: 10000 });
let hello = null;
const echoes = [];
socket.on('unexpected-response', (request, response) => {
  console.log(JSON.stringify({ status: response.statusCode }));
  process.exit(0);
});
socket.on('error', (error) => {
  console.log(JSON.stringify({ error: String(error) }));
  process.exit(1);
});
socket.on('message', (data, isBinary) => {
  if (hello === null) {
    hello = JSON.parse(data.toString());
  } else {
    echoes.push(isBinary ? `binary:${data.toString('hex')}` : data.toString());
  }
  if (echoes.length === Number(count)) {
    console.log(JSON.stringify({ status: 101, hello, echoes }));
    socket.close(1000);
    return;
  }
  const index = echoes.length;
  socket.send(index % 2 === 0 ? `message ${index}` : Buffer.from([0, index, 255]));
});
