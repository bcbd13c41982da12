// Loads a GGUF file with llama.cpp (node-llama-cpp, CPU build) and prints the greedy
// completion of a fixed prompt as token ids, one JSON line, with the load time:
//   node greedy.mjs MODEL.gguf [--no-mmap] [--tokens N] [--load-only]
// Greedy (temperature 0) decoding is deterministic on one machine and build, so two
// loads of the same bytes give the same tokens; the tests compare them.
import { getLlama, LlamaCompletion } from "node-llama-cpp";

const args = process.argv.slice(2);
const path = args[0];
const useMmap = !args.includes("--no-mmap");
const loadOnly = args.includes("--load-only");
const ti = args.indexOf("--tokens");
const maxTokens = ti >= 0 ? Number(args[ti + 1]) : 8;

const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });
const t0 = performance.now();
const model = await llama.loadModel({ modelPath: path, useMmap, gpuLayers: 0 });
const loadMs = performance.now() - t0;
let tokens = [];
if (!loadOnly) {
  const context = await model.createContext({ contextSize: 256, threads: 2 });
  const completion = new LlamaCompletion({ contextSequence: context.getSequence() });
  const prompt = model.tokenize("The capital of France is");
  // generateCompletion with temperature 0 picks the most likely token each time
  await completion.generateCompletion(prompt, {
    maxTokens, temperature: 0,
    onToken: (chunk) => { tokens.push(...chunk); },
  });
  await context.dispose();
}
console.log(JSON.stringify({ tokens, load_ms: Math.round(loadMs * 10) / 10, mmap: useMmap }));
await model.dispose();
await llama.dispose();
