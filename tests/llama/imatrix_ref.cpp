// llama-quantize's own reading of an importance matrix, for tests: this file is compiled
// together with the pinned llama.cpp's tools/quantize/quantize.cpp (llama_tools.py puts
// it in the same translation unit), so that its load_imatrix -- the function
// llama-quantize runs on --imatrix FILE -- writes what it read to OUT, in the form
// tests/imatrix_dump.c writes ggufs's reading:
//
//     chunks N                    the chunk count load_imatrix returns
//     dataset HEX | dataset -     the first dataset's bytes, or none
//     HEX N HEX...                per entry, by name: its name's bytes, its number of
//                                 weights, each weight's float32 bits (8 hex digits)
//
//     imatrix_ref FILE OUT        (exit 1 where llama-quantize refuses FILE)
#include "quantize.cpp"

static void hex(FILE *f, const std::string &s)
{
    for (unsigned char ch : s)
        fprintf(f, "%02x", ch);
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    std::vector<std::string> datasets;
    std::unordered_map<std::string, std::vector<float>> data;
    int chunks = load_imatrix(argv[1], datasets, data);
    std::map<std::string, std::vector<float>> sorted(data.begin(), data.end());
    FILE *f = fopen(argv[2], "w");
    if (!f)
        return 2;
    fprintf(f, "chunks %d\ndataset ", chunks);
    if (datasets.empty())
        fputs("-", f);
    else
        hex(f, datasets[0]);
    fputc('\n', f);
    for (const auto &kv : sorted) {
        hex(f, kv.first);
        fprintf(f, " %zu ", kv.second.size());
        for (float v : kv.second) {
            uint32_t u;
            memcpy(&u, &v, 4);
            fprintf(f, "%08x", u);
        }
        fputc('\n', f);
    }
    return fclose(f) == 0 ? 0 : 2;
}
