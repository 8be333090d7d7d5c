'use strict';
// The doors check's Express 4 upstream (Debian's node-express; run with NODE_PATH=/usr/share/nodejs).
//
//   node express-upstream.js RECORD_FILE
//
// Listens on a free loopback port and prints `listening 127.0.0.1:PORT` first. Every request
// that reaches it appends one JSON line to RECORD_FILE *before* the answer is sent:
//   {"upstream": "express", "id": <X-Doors-Id>, "handler": <name or null>, "protected": bool,
//    "method": <method after the overrides>, "wire_method": <method on the wire>,
//    "target": <original URL>, "headers": [[name, value], ...] (as received, duplicates kept)}
// `handler` null: no route matched (404), the request still reached this upstream.
//
// Method overrides ON, as an Express app with the `method-override` npm package would have them.
// That package is not in Debian: `methodOverride` below re-implements its documented behaviour
// (method-override 3.x): it acts only on requests whose method is in `options.methods`, default
// ['POST']; the getter's value (a header's *first* comma-separated value, since Node joins
// repeated fields with ", "; or a query parameter; or a function's result) replaces req.method,
// upper-cased, when it is a method Node knows (the `methods` package = http.METHODS).
const express = require('express');
const fs = require('fs');
const http = require('http');
const querystring = require('querystring');
const url = require('url');

const recordFile = process.argv[2];
if (!recordFile) {
  console.error('usage: express-upstream.js RECORD_FILE');
  process.exit(2);
}
const KNOWN_METHODS = http.METHODS.map((m) => m.toLowerCase()); // the `methods` package

// method-override's createHeaderGetter: the header's first value (Node joins repeats with ", ").
function headerGetter(name) {
  const key = name.toLowerCase();
  return (req) => {
    const header = req.headers[key];
    if (!header) return undefined;
    const index = header.indexOf(',');
    return index !== -1 ? header.substr(0, index).trim() : header.trim();
  };
}

// method-override's createQueryGetter: querystring.parse of the URL's query, the key as given.
function queryGetter(key) {
  return (req) => querystring.parse(url.parse(req.url).query || '')[key];
}

// method-override's middleware with its default options ({methods: ['POST']}).
function methodOverride(getter) {
  return (req, res, next) => {
    req.originalMethod = req.originalMethod || req.method;
    if (req.method !== 'POST') return next();
    const value = getter(req, res);
    const method = Array.isArray(value) ? value[0] : value;
    if (method && typeof method === 'string' && KNOWN_METHODS.indexOf(method.toLowerCase()) !== -1) {
      req.method = method.toUpperCase();
    }
    next();
  };
}

// A multipart/form-data POST's `_method` field, as Rails (Rack::MethodOverride reads
// req.POST["_method"]) and Laravel (Request::getMethod reads the `_method` input) honour it in
// multipart forms too. body-parser has no multipart parser, so the field is found by hand.
function multipartMethodField(req, res, next) {
  const type = req.headers['content-type'] || '';
  const match = /^multipart\/form-data;.*boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(type);
  if (req.method !== 'POST' || !match) return next();
  const boundary = '--' + (match[1] || match[2]);
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => {
    const text = Buffer.concat(chunks).toString('latin1');
    req.body = req.body || {};
    for (const part of text.split(boundary)) {
      const head = part.indexOf('\r\n\r\n');
      if (head === -1) continue;
      const name = /content-disposition:[^\r\n]*\bname="([^"]*)"/i.exec(part.slice(0, head));
      if (name) req.body[name[1]] = part.slice(head + 4).replace(/\r\n$/, '');
    }
    next();
  });
}

// The form-field getter from method-override's README ("override using a custom logic"), the
// Rails / Laravel `_method` hidden field.
function bodyMethodGetter(req) {
  if (req.body && typeof req.body === 'object' && '_method' in req.body) {
    const method = req.body._method;
    delete req.body._method;
    return method;
  }
  return undefined;
}

const app = express();
app.disable('x-powered-by');
// methodOverride('X-HTTP-Method-Override'): the package's default getter.
app.use(methodOverride(headerGetter('X-HTTP-Method-Override')));
// methodOverride('X-HTTP-Method'): Microsoft's (OData, ASP.NET) header, as the README shows.
app.use(methodOverride(headerGetter('X-HTTP-Method')));
// methodOverride('X-Method-Override'): Google APIs' / Symfony-style header, as the README shows.
app.use(methodOverride(headerGetter('X-Method-Override')));
// methodOverride('_method'): a query parameter (`?_method=DELETE`), as the README shows.
app.use(methodOverride(queryGetter('_method')));
// A `_method` field in a POST form body, urlencoded (body-parser, as the README's example) or
// multipart (above), as Rails and Laravel do.
app.use(express.urlencoded({ extended: false }));
app.use(multipartMethodField);
app.use(methodOverride(bodyMethodGetter));

function pairs(rawHeaders) {
  const out = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) out.push([rawHeaders[i], rawHeaders[i + 1]]);
  return out;
}

function record(req, handler, isProtected) {
  const line = {
    upstream: 'express',
    id: req.headers['x-doors-id'] || null,
    handler,
    protected: isProtected,
    method: req.method,
    wire_method: req.originalMethod || req.method,
    target: req.originalUrl,
    headers: pairs(req.rawHeaders),
  };
  fs.appendFileSync(recordFile, JSON.stringify(line) + '\n');
}

function handler(name, isProtected) {
  return (req, res) => {
    record(req, name, isProtected);
    res.json({ upstream: 'express', handler: name });
  };
}

// (Debian's Express 4 uses path-to-regexp 6: '(.*)' where upstream Express 4 wrote '*'.)
// Protected handlers: the policy enforces App Attest on these (method-restricted where the route is).
app.post('/buy', handler('buy', true));
app.delete('/item', handler('item-delete', true));
app.put('/item', handler('item-put', true));
app.get('/v1/admin/(.*)', handler('v1-admin', true));
app.post('/v1/head/(.*)', handler('v1-head', true));
app.get('/v1/(.*)', handler('v1', true));
app.get('/cs/(.*)', handler('cs', true));
// Open handlers.
app.get('/public/(.*)', handler('public', false));
app.get('/', handler('root', false));
// Anything else reached the upstream but ran no handler.
app.use((req, res) => {
  record(req, null, false);
  res.status(404).json({ upstream: 'express', handler: null });
});

const server = app.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`listening 127.0.0.1:${address.port}\n`);
});
process.on('SIGTERM', () => process.exit(0));
