// Loads GGUF files with llama.cpp (node-llama-cpp, CPU build) and prints, for each, one
// JSON line: the greedy completion of a fixed prompt as token ids, the load time, and
// the chat template llama.cpp's loader read from the file (null when it has none).
//   node greedy.mjs [--no-mmap | --both] [--tokens N] [--load-only] MODEL.gguf...
// --both loads each file twice, with mmap and with --no-mmap's reads. Greedy decoding
// (temperature 0) is deterministic for one machine and build, so two loads of the same
// bytes give the same tokens: the tests compare them. One process loads every file, as
// starting llama.cpp costs more than loading the test model.
import { getLlama, LlamaCompletion } from "node-llama-cpp";

const args = process.argv.slice(2);
const flag = (f) => args.includes(f);
const ti = args.indexOf("--tokens");
const maxTokens = ti >= 0 ? Number(args[ti + 1]) : 8;
const paths = args.filter((a, i) => !a.startsWith("--") && !(ti >= 0 && i === ti + 1));
const modes = flag("--both") ? [true, false] : [!flag("--no-mmap")];

const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });
for (const path of paths) {
  for (const useMmap of modes) {
    const t0 = performance.now();
    const model = await llama.loadModel({ modelPath: path, useMmap, gpuLayers: 0 });
    const loadMs = performance.now() - t0;
    const tokens = [];
    if (!flag("--load-only")) {
      const context = await model.createContext({ contextSize: 256, threads: 2 });
      const completion = new LlamaCompletion({ contextSequence: context.getSequence() });
      await completion.generateCompletion(model.tokenize("The capital of France is"), {
        maxTokens, temperature: 0,
        onToken: (chunk) => { tokens.push(...chunk); },
      });
      await context.dispose();
    }
    const chatTemplate = model.fileInfo.metadata?.tokenizer?.chat_template ?? null;
    console.log(JSON.stringify({ path, mmap: useMmap, tokens, chat_template: chatTemplate,
                                 load_ms: Math.round(loadMs * 10) / 10 }));
    await model.dispose();
  }
}
await llama.dispose();
