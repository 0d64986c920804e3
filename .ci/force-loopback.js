// force-loopback.js: a Node preload that keeps local emulators off the network.
//
// Load it with NODE_OPTIONS='--require "<repo>/.ci/force-loopback.js"'. It
// replaces net.Server.prototype.listen (which http, https, http2 and tls
// servers all inherit) so that every TCP listen binds 127.0.0.1, whatever
// host the program asked for. Listens on a unix socket path or on an existing
// handle or file descriptor are passed through untouched.
//
// Set ESM_FORCE_LOOPBACK_QUIET=1 to silence the one-line note written to
// stderr when a requested host is overridden.
//
// It also keeps an emulator running when a client goes away in the middle of
// a request: dynalite's request handler rethrows the request's "aborted"
// error, which is uncaught and ends the process, so one worker killed while
// its request was being sent took the emulator down for every later test.
// Such an error now ends only that request, which has nobody left to answer.
'use strict';

const net = require('net');
const http = require('http');

const LOOPBACK = '127.0.0.1';
const quiet = process.env.ESM_FORCE_LOOPBACK_QUIET === '1';
const originalListen = net.Server.prototype.listen;

// isPort reports whether v is what Node would read as a TCP port: a number,
// or a string holding only digits. Other strings are unix socket paths.
function isPort(v) {
  return typeof v === 'number' || (typeof v === 'string' && /^\s*\d+\s*$/.test(v));
}

// isPassThrough reports whether an options object names something other than
// a TCP host/port pair: a socket path, a handle, or a file descriptor.
function isPassThrough(o) {
  return (o.path !== undefined && o.path !== null) ||
    o._handle !== undefined ||
    o.handle !== undefined ||
    typeof o.fd === 'number';
}

function note(asked, port) {
  if (quiet || asked === LOOPBACK) {
    return;
  }
  const shown = asked === undefined || asked === null || asked === '' ? '(all interfaces)' : asked;
  process.stderr.write(`force-loopback: listen on port ${port}: host ${shown} replaced by ${LOOPBACK}\n`);
}

function loopbackListen(...args) {
  const first = args[0];

  // listen() and listen(callback): Node picks a random port on all interfaces.
  if (first === undefined || first === null || typeof first === 'function') {
    note(undefined, 0);
    const rest = typeof first === 'function' ? [first] : [];
    return originalListen.call(this, { port: 0, host: LOOPBACK }, ...rest);
  }

  // listen(options[, callback]).
  if (typeof first === 'object') {
    if (isPassThrough(first)) {
      return originalListen.apply(this, args);
    }
    note(first.host, first.port);
    return originalListen.call(this, { ...first, host: LOOPBACK }, ...args.slice(1));
  }

  // listen(port[, host][, backlog][, callback]).
  if (isPort(first)) {
    const options = { port: first, host: LOOPBACK };
    let callback;
    let asked;
    let i = 1;
    if (typeof args[i] === 'string') {
      asked = args[i];
      i++;
    }
    // What is left is an optional backlog and an optional callback; an
    // undefined or null placeholder (listen(port, undefined, cb)) is skipped.
    for (; i < args.length; i++) {
      if (typeof args[i] === 'function') {
        callback = args[i];
      } else if (typeof args[i] === 'number' && options.backlog === undefined) {
        options.backlog = args[i];
      }
    }
    note(asked, first);
    return callback === undefined
      ? originalListen.call(this, options)
      : originalListen.call(this, options, callback);
  }

  // listen(path[, backlog][, callback]): a unix socket, left alone.
  return originalListen.apply(this, args);
}

net.Server.prototype.listen = loopbackListen;

// isAborted reports whether err is the error Node gives a request whose client
// closed the connection before the request's body was complete.
function isAborted(err) {
  return err instanceof Error && err.code === 'ECONNRESET' && err.message === 'aborted';
}

const originalOn = http.IncomingMessage.prototype.on;

function onWithoutAborted(event, listener) {
  if (event !== 'error' || typeof listener !== 'function') {
    return originalOn.call(this, event, listener);
  }
  return originalOn.call(this, event, function (err, ...rest) {
    if (isAborted(err)) {
      return undefined;
    }
    return listener.call(this, err, ...rest);
  });
}

http.IncomingMessage.prototype.on = onWithoutAborted;
http.IncomingMessage.prototype.addListener = onWithoutAborted;
