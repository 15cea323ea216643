// Reference GPT-2 encoders in JavaScript, for the tokenizer tests and the benchmark.
//
// Usage: node test/helpers/tokenizer_reference.js ENCODER [--stats] FILE...
//   ENCODER  gpt-3-encoder (a port of GPT-2's encoder.py) or js-tiktoken (tiktoken's "gpt2" encoding)
// Prints one line per FILE: its token ids separated by spaces (the same format as ./gpt2_tokenizer encode FILE...).
// Files are read as UTF-8 (the test feeds valid UTF-8 only: a JS string cannot hold invalid UTF-8).
// --stats prints tokens, encoding seconds and tokens/s on stderr (encoding time only, not loading).
// The packages are installed into data/npm by dev/data/fetch_tokenizer.sh.
'use strict';
const fs = require('fs');
const path = require('path');

const args = process.argv.slice(2);
const which = args.shift();
const stats = args[0] === '--stats' ? (args.shift(), true) : false;
const modules = path.resolve(__dirname, '..', '..', 'data', 'npm', 'node_modules');
let encode;
if (which === 'gpt-3-encoder') {
    encode = require(path.join(modules, 'gpt-3-encoder')).encode;
} else if (which === 'js-tiktoken') {
    const enc = require(path.join(modules, 'js-tiktoken')).getEncoding('gpt2');
    // No special tokens: "<|endoftext|>" in the text is ordinary text, as in GPT-2's encoder and ours.
    encode = text => enc.encode(text, [], []);
} else {
    console.error('usage: node test/helpers/tokenizer_reference.js gpt-3-encoder|js-tiktoken [--stats] FILE...');
    process.exit(1);
}
let tokens = 0, seconds = 0, bytes = 0;
const out = [];
for (const f of args) {
    const text = fs.readFileSync(f, 'utf8');
    const t0 = process.hrtime.bigint();
    const ids = encode(text);
    seconds += Number(process.hrtime.bigint() - t0) / 1e9;
    tokens += ids.length;
    bytes += Buffer.byteLength(text);
    out.push(ids.join(' '));
}
fs.writeSync(1, out.join('\n') + (out.length ? '\n' : ''));
if (stats) {
    console.error(`${which}: encoded ${bytes} bytes into ${tokens} tokens in ${seconds.toFixed(3)} s ` +
                  `(${Math.round(tokens / seconds)} tokens/s, ${(bytes / seconds / 1e6).toFixed(2)} MB/s)`);
}
