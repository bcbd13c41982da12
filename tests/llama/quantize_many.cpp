// llama-quantize run many times in one process, for tests: this file is compiled
// together with the pinned llama.cpp's tools/quantize/quantize.cpp (llama_tools.py puts
// it in the same translation unit), and runs its llama_quantize -- llama-quantize's
// whole main -- once per line of standard input, each line the tool's arguments
// separated by tabs, writing its exit status to OUT, a line each. One process builds
// ggml's i-quant grids once, where llama-quantize would build them for every file.
//
//     quantize_many OUT < JOBS        (llama-quantize's own exit(1) ends the batch)
#include "quantize.cpp"

#include <iostream>
#include <sstream>

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    FILE *out = fopen(argv[1], "w");
    if (!out)
        return 2;
    std::string line;
    while (std::getline(std::cin, line)) {
        std::vector<std::string> words{"llama-quantize"};
        std::stringstream ss(line);
        for (std::string w; std::getline(ss, w, '\t');)
            words.push_back(w);
        std::vector<char *> args;
        for (auto &w : words)
            args.push_back(w.data());
        args.push_back(nullptr);
        int rc = llama_quantize((int)words.size(), args.data());
        fprintf(out, "%d\n", rc);
        fflush(out);
    }
    return fclose(out) == 0 ? 0 : 2;
}
