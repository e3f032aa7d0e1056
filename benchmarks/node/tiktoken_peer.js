#!/usr/bin/env node
// The peer of //benchmarks:tokenizer_throughput: the npm tiktoken package
// (Rust's tiktoken compiled to WebAssembly) encoding the same corpus on one
// thread, encode_ordinary as Strata encodes it. Prints one JSON line:
// {"mb_per_s": ..., "tokens": ..., "seconds": ...}.
//
//   node tiktoken_peer.js <node_modules> <encoding> <corpus> <min seconds>
'use strict';
const fs = require('fs');
const path = require('path');

const [modules, encoding, corpus, minSecondsArg] = process.argv.slice(2);
if (!modules || !encoding || !corpus) {
  console.error('usage: tiktoken_peer.js <node_modules> <encoding> <corpus> [min seconds]');
  process.exit(2);
}
const minSeconds = Number(minSecondsArg || 2);
const {get_encoding} = require(path.join(modules, 'tiktoken'));
const bytes = fs.readFileSync(corpus);
const text = new TextDecoder('utf-8', {ignoreBOM: true}).decode(bytes);
const enc = get_encoding(encoding);
let tokens = enc.encode_ordinary(text).length;  // Warm-up.
let rounds = 0;
const start = process.hrtime.bigint();
let seconds = 0;
while (seconds < minSeconds) {
  tokens = enc.encode_ordinary(text).length;
  rounds++;
  seconds = Number(process.hrtime.bigint() - start) / 1e9;
}
enc.free();
console.log(JSON.stringify({mb_per_s: bytes.length * rounds / seconds / 1e6, tokens, seconds}));
