// ecma_regex_std: for each line "PATTERN<TAB>NAME" of standard input, what llama-quantize's
// std::regex makes of it, one line: "ERR" when std::regex(PATTERN) throws, else
// std::regex_search's answer (1 or 0), or "TIMEOUT" when the search runs past 2 s (each
// line in a child process under alarm(2)). Built by tests/ecma_regex_ref.py with g++.
#include <cstdio>
#include <iostream>
#include <regex>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

int main()
{
    std::string line;
    while (std::getline(std::cin, line)) {
        const auto tab = line.find('\t');
        if (tab == std::string::npos)
            return 2;
        std::fflush(stdout);
        const pid_t pid = fork();
        if (pid < 0)
            return 2;
        if (pid == 0) {
            alarm(2);
            try {
                std::regex re(line.substr(0, tab));
                std::printf("%d\n", (int)std::regex_search(line.substr(tab + 1), re));
            } catch (const std::exception &) {
                std::printf("ERR\n");
            }
            std::fflush(stdout);
            _exit(0);
        }
        int status;
        if (waitpid(pid, &status, 0) != pid)
            return 2;
        if (!WIFEXITED(status))
            std::printf("TIMEOUT\n");
    }
    return 0;
}
