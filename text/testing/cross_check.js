#!/usr/bin/env node
// Token-for-token check of Strata's tokenizers against independent
// implementations from the npm registry, over every text file under
// /usr/share/common-licenses and /usr/share/doc (.gz decompressed; a file is
// text when it has no NUL byte) and a generated corpus of mixed scripts,
// emoji, whitespace runs and ill-formed UTF-8:
//
//   GPT-2 tokenizer.json, ordinary   vs tiktoken (gpt2) encode_ordinary
//   GPT-2 encoder.json + vocab.bpe   vs the same ids from tokenizer.json
//   cl100k_base.tiktoken, ordinary   vs tiktoken (cl100k_base)
//   GPT-2 tokenizer.json             vs @huggingface/tokenizers (same file)
//   Llama 3-style tokenizer.json     vs @huggingface/tokenizers (same file):
//     cl100k_base's ranks in Llama 3's layout (Split + ByteLevel,
//     ignore_merges), built here: Llama 3's own file is not to be had
//     offline, and its pattern is cl100k's
//   GPT-2 tokenizer.json, ordinary   vs gpt-3-encoder
//
// tiktoken sees every document. The pure-JavaScript implementations are
// 3x (tokenizers.js) and 100x+ (gpt-3-encoder, quadratic in a word's
// length) slower than that, so they see a sample: all of
// /usr/share/common-licenses and the generated corpus, plus every k-th
// other document (by path), k chosen so the sample stays within
// --hf_sample_bytes and --gpt3_sample_bytes.
//
// The JavaScript implementations take strings, so documents that are not
// well-formed UTF-8 are compared by round trip only: strata_tokenize checks
// decode(encode(x)) == x for every document and fails otherwise.
//
//   (cd /tmp/npm && npm install tiktoken gpt-3-encoder @huggingface/tokenizers)
//   bazel build //text:strata_tokenize
//   node text/testing/cross_check.js --modules=/tmp/npm/node_modules \
//     --strata_tokenize=bazel-bin/text/strata_tokenize [--work=/tmp/xcheck]
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const zlib = require('zlib');
const {execFileSync} = require('child_process');
const refsLib = require('./references.js');

function flag(name, fallback) {
  const prefix = `--${name}=`;
  const arg = process.argv.find((a) => a.startsWith(prefix));
  if (arg) return arg.slice(prefix.length);
  if (fallback === undefined) {
    console.error(`missing --${name}=...`);
    process.exit(2);
  }
  return fallback;
}

const modules = flag('modules');
const strataTokenize = path.resolve(flag('strata_tokenize'));
const work = flag('work', fs.mkdtempSync(path.join(os.tmpdir(), 'xcheck-')));
const roots = flag('roots', '/usr/share/common-licenses,/usr/share/doc').split(',');
const hfSampleBytes = Number(flag('hf_sample_bytes', String(16e6)));
const gpt3SampleBytes = Number(flag('gpt3_sample_bytes', String(1e6)));
const testdata = path.join(__dirname, '..', 'testdata');
fs.mkdirSync(work, {recursive: true});

// --- Documents ---------------------------------------------------------------
function walk(dir, out, seen) {
  let entries;
  try {
    entries = fs.readdirSync(dir, {withFileTypes: true});
  } catch (e) {
    return;
  }
  for (const e of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) {
      walk(p, out, seen);
    } else if (e.isFile() || e.isSymbolicLink()) {
      let real;
      try {
        real = fs.realpathSync(p);
        if (!fs.statSync(real).isFile()) continue;
      } catch (err) {
        continue;
      }
      if (seen.has(real)) continue;
      seen.add(real);
      out.push(real);
    }
  }
}

function lcg(seed) {
  let s = seed >>> 0;
  return () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 4294967296;
}

// Mixed scripts, emoji (with joiners, modifiers, flags), runs of every kind
// of white space, digits, contractions, and ill-formed UTF-8.
function generated() {
  const rnd = lcg(35);
  const pick = (a) => a[Math.floor(rnd() * a.length)];
  const words = ['hello', 'World', "don't", "WE'LL", 'naïve', 'Straße', 'ǅemal',
    'Ελληνικά', 'русский', 'עברית', 'العربية', 'हिन्दी', 'বাংলা', 'ไทย',
    '日本語', '中文字符', '한국어', 'ᚠᛇᚻ', '𝐁𝐨𝐥𝐝', 'Ⅻ', '½', '١٢٣', '४५६',
    '12345678', '3.14159', '😀', '👍🏽', '👨‍👩‍👧‍👦', '🇫🇷🇯🇵', '✨', '🧑🏿‍🚀',
    'e\u0301', 'ﬁ', '\u200b', '\ufeff', '\u00ad', '<|endoftext|>', "'ſ", '#$%&',
    '...', '—', '«»', '()', '{}', '->', '\\n', 'http://x.y/z?a=1'];
  const spaces = [' ', '  ', '\t', '\n', '\r\n', '\n\n\n', '   \n  ', '\u00a0',
    '\u2003', '\u3000', '\u0085', '\u2028', '\v\f', ' \t \n'];
  const bad = [[0x80], [0xc3], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80],
    [0xff], [0xfe, 0xfe], [0xe2, 0x82], [0xf0, 0x9f, 0x98]];
  const docs = [];
  // Half the documents leave out U+0085 and U+FEFF (see JS_SPACE_DIFFERENCE).
  const noJsDifference = (x) => !/[\u0085\ufeff]/.test(x);
  const plainWords = words.filter(noJsDifference);
  const plainSpaces = spaces.filter(noJsDifference);
  for (let d = 0; d < 400; d++) {
    const parts = [];
    const invalid = d % 4 === 3;
    const w = d % 2 === 0 ? plainWords : words;
    const sp = d % 2 === 0 ? plainSpaces : spaces;
    const n = 20 + Math.floor(rnd() * 400);
    for (let i = 0; i < n; i++) {
      const r = rnd();
      if (invalid && r < 0.05) {
        parts.push(Buffer.from(pick(bad)));
      } else if (r < 0.3) {
        parts.push(Buffer.from(pick(sp)));
      } else if (r < 0.33) {
        parts.push(Buffer.from(' '.repeat(1 + Math.floor(rnd() * 80))));
      } else {
        parts.push(Buffer.from(pick(w)));
      }
    }
    docs.push({name: `generated/${d}`, bytes: Buffer.concat(parts)});
  }
  return docs;
}

function documents() {
  const files = [];
  const seen = new Set();
  for (const r of roots) walk(r, files, seen);
  const docs = [];
  let skipped = 0;
  for (const f of files) {
    let bytes = fs.readFileSync(f);
    if (f.endsWith('.gz')) {
      try {
        bytes = zlib.gunzipSync(bytes);
      } catch (e) {
        skipped++;
        continue;
      }
    }
    if (bytes.includes(0)) {
      skipped++;
      continue;
    }
    docs.push({name: f, bytes});
  }
  return {docs: docs.concat(generated()), skipped, files: files.length};
}

// ignoreBOM: keep a leading U+FEFF in the text (TextDecoder drops it).
const utf8 = new TextDecoder('utf-8', {fatal: true, ignoreBOM: true});
function asText(bytes) {
  try {
    return utf8.decode(bytes);
  } catch (e) {
    return null;
  }
}

// --- Strata ------------------------------------------------------------------
function writeDocs(docs, file) {
  const parts = [];
  for (const d of docs) {
    const h = Buffer.alloc(8);
    h.writeBigUInt64LE(BigInt(d.bytes.length));
    parts.push(h, d.bytes);
  }
  fs.writeFileSync(file, Buffer.concat(parts));
}

function strata(tokenizer, special, docsFile) {
  const out = path.join(work, 'ids.bin');
  const started = process.hrtime.bigint();
  execFileSync(strataTokenize, [`--tokenizer=${tokenizer}`, `--documents=${docsFile}`,
    `--output=${out}`, `--special_tokens_in_text=${special}`], {stdio: ['ignore', 'inherit', 'inherit']});
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  console.log(`strata_tokenize --tokenizer=${path.basename(tokenizer)}: ${seconds.toFixed(1)} s ` +
              '(loading, encoding, decoding back)');
  const buf = fs.readFileSync(out);
  const ids = [];
  let pos = 0;
  while (pos < buf.length) {
    const n = Number(buf.readBigUInt64LE(pos));
    pos += 8;
    ids.push(new Int32Array(buf.buffer.slice(buf.byteOffset + pos, buf.byteOffset + pos + 4 * n)));
    pos += 4 * n;
  }
  return {ids, seconds};
}

// --- Comparison ----------------------------------------------------------------
// JavaScript's \s is not Unicode's White_Space: it adds U+FEFF and leaves
// out U+0085 (NEXT LINE), so the JavaScript implementations split text with
// either character differently from tiktoken's Rust regex and Hugging
// Face's Oniguruma, which Strata follows. Their comparisons count those
// documents apart.
const JS_SPACE_DIFFERENCE = /[\u0085\ufeff]/;

// Marks docs[i].sample[key] for a sample of about `budget` bytes: every
// document of /usr/share/common-licenses and the generated corpus, and every
// k-th of the others.
function sample(docs, key, budget) {
  const always = (d) => d.name.startsWith('generated/') ||
                        d.name.startsWith('/usr/share/common-licenses/');
  const fixed = docs.filter(always).reduce((s, d) => s + d.bytes.length, 0);
  const rest = docs.filter((d) => !always(d));
  const restBytes = rest.reduce((s, d) => s + d.bytes.length, 0);
  const k = Math.max(1, Math.ceil(restBytes / Math.max(1, budget - fixed)));
  for (const d of docs) d[key] = always(d);
  rest.forEach((d, i) => { d[key] = i % k === 0; });
  return k;
}

function compare(label, docs, ours, reference, jsRegex, key) {
  let compared = 0, bytes = 0, tokens = 0, mismatches = 0, apart = 0, apartMismatches = 0;
  const examples = [];
  for (let i = 0; i < docs.length; i++) {
    const text = docs[i].text;
    if (text === null || (key && !docs[i][key])) continue;
    if (jsRegex && JS_SPACE_DIFFERENCE.test(text)) {
      const theirs = reference(text, i);
      apart++;
      if (theirs.length !== ours[i].length || theirs.some((t, k) => t !== ours[i][k])) {
        apartMismatches++;
      }
      continue;
    }
    const theirs = reference(text, i);
    const mine = ours[i];
    compared++;
    bytes += docs[i].bytes.length;
    tokens += theirs.length;
    let same = theirs.length === mine.length;
    let at = -1;
    for (let k = 0; k < Math.min(theirs.length, mine.length); k++) {
      if (theirs[k] !== mine[k]) {
        same = false;
        at = k;
        break;
      }
    }
    if (!same) {
      mismatches++;
      if (examples.length < 5) {
        if (at < 0) at = Math.min(theirs.length, mine.length);
        examples.push(`${docs[i].name}: token ${at}: strata ` +
            `[${Array.from(mine.slice(Math.max(0, at - 2), at + 3))}] vs ` +
            `[${Array.from(theirs.slice(Math.max(0, at - 2), at + 3))}]`);
      }
    }
  }
  console.log(`${label}: ${compared} documents, ${bytes} bytes, ${tokens} tokens, ` +
              `${mismatches} mismatches` +
              (jsRegex ? ` (apart: ${apart} documents with U+0085 or U+FEFF, ` +
                         `${apartMismatches} of them differ)` : ''));
  for (const e of examples) console.log(`  ${e}`);
  return mismatches;
}

function main() {
  const refs = refsLib.load(modules);
  const {docs, skipped, files} = documents();
  for (const d of docs) d.text = asText(d.bytes);
  const invalid = docs.filter((d) => d.text === null).length;
  const totalBytes = docs.reduce((s, d) => s + d.bytes.length, 0);
  console.log(`${files} files under ${roots.join(', ')}: ${files - skipped} text ` +
              `(${skipped} binary or unreadable skipped); with the generated corpus ` +
              `${docs.length} documents, ${totalBytes} bytes, ${invalid} not well-formed ` +
              `UTF-8 (round trip only)`);
  const docsFile = path.join(work, 'docs.bin');
  writeDocs(docs, docsFile);

  const gpt2Json = path.join(testdata, 'gpt2', 'tokenizer.json');
  const gpt2Files = path.join(testdata, 'gpt2', 'encoder.json');
  const cl100k = path.join(testdata, 'cl100k_base.tiktoken');
  const llama3 = path.join(work, 'llama3_style_tokenizer.json');
  const llama3Json = refsLib.llama3StyleTokenizerJson(refsLib.tiktokenRanks(refs, 'cl100k_base'));
  fs.writeFileSync(llama3, JSON.stringify(llama3Json));

  const tGpt2 = refs.tiktoken.get_encoding('gpt2');
  const tCl = refs.tiktoken.get_encoding('cl100k_base');
  const hfGpt2 = new refs.hf.Tokenizer(JSON.parse(fs.readFileSync(gpt2Json, 'utf8')), {});
  const hfLlama3 = new refs.hf.Tokenizer(llama3Json, {});
  const kHf = sample(docs, 'hf', hfSampleBytes);
  const kGpt3 = sample(docs, 'gpt3', gpt3SampleBytes);
  console.log(`samples: tokenizers.js every ${kHf}th other document, ` +
              `gpt-3-encoder every ${kGpt3}th`);
  let bad = 0;
  const gpt2Ordinary = strata(gpt2Json, false, docsFile).ids;
  bad += compare('GPT-2 tokenizer.json vs tiktoken gpt2', docs, gpt2Ordinary,
                 (t) => tGpt2.encode_ordinary(t));
  const gpt2FilesIds = strata(gpt2Files, false, docsFile).ids;
  bad += compare('GPT-2 encoder.json + vocab.bpe vs GPT-2 tokenizer.json', docs,
                 gpt2FilesIds, (t, i) => gpt2Ordinary[i]);
  bad += compare('cl100k_base.tiktoken vs tiktoken cl100k_base', docs,
                 strata(cl100k, false, docsFile).ids, (t) => tCl.encode_ordinary(t));
  bad += compare('GPT-2 tokenizer.json vs @huggingface/tokenizers', docs,
                 strata(gpt2Json, true, docsFile).ids,
                 (t) => hfGpt2.encode(t, {add_special_tokens: false}).ids, true, 'hf');
  bad += compare('Llama 3-style tokenizer.json vs @huggingface/tokenizers', docs,
                 strata(llama3, true, docsFile).ids,
                 (t) => hfLlama3.encode(t, {add_special_tokens: false}).ids, true, 'hf');
  bad += compare('GPT-2 tokenizer.json vs gpt-3-encoder', docs, gpt2Ordinary,
                 (t) => refs.gpt3encoder.encode(t), true, 'gpt3');
  tGpt2.free();
  tCl.free();
  console.log(bad === 0 ? 'cross_check: no mismatches (documents with U+0085 or U+FEFF ' +
                          'counted apart for the JavaScript implementations)'
                        : `cross_check: ${bad} mismatching document comparisons`);
  process.exit(bad === 0 ? 0 : 1);
}

main();
