// Encodes and decodes a corpus with Hugging Face's tokenizers (the Node
// binding) for the Go reference test (reference_test.go).
//
// usage: node reference.js TOKENIZER_JSON CORPUS OUT
//
// CORPUS holds records of a 4-byte little-endian length and that many bytes
// of text (any bytes: ill-formed UTF-8 is decoded with U+FFFD per maximal
// subpart, the WHATWG rule). OUT gets one JSON line per record:
// {"ids": [...], "prompt_ids": [...], "text": "..."}: the ids without and
// with the post-processor's special tokens, and decode(ids, true).
'use strict';
const fs = require('fs');
const { Tokenizer } = require('tokenizers');

async function main() {
  const [tokPath, corpusPath, outPath] = process.argv.slice(2);
  const tok = Tokenizer.fromFile(tokPath);
  const buf = fs.readFileSync(corpusPath);
  const utf8 = new TextDecoder('utf-8', { fatal: false });
  const texts = [];
  for (let off = 0; off < buf.length; ) {
    const n = buf.readUInt32LE(off);
    texts.push(utf8.decode(buf.subarray(off + 4, off + 4 + n)));
    off += 4 + n;
  }
  const out = fs.openSync(outPath, 'w');
  const chunk = 1000;
  for (let lo = 0; lo < texts.length; lo += chunk) {
    const part = texts.slice(lo, lo + chunk);
    const plain = await tok.encodeBatch(part, { addSpecialTokens: false });
    const prompt = await tok.encodeBatch(part, { addSpecialTokens: true });
    const ids = plain.map((e) => e.getIds());
    const decoded = await tok.decodeBatch(ids, true);
    let lines = '';
    for (let i = 0; i < part.length; i++) {
      lines += JSON.stringify({ ids: ids[i], prompt_ids: prompt[i].getIds(), text: decoded[i] }) + '\n';
    }
    fs.writeSync(out, lines);
  }
  fs.closeSync(out);
}

main().catch((e) => {
  console.error(String(e && e.stack ? e.stack : e));
  process.exit(1);
});
