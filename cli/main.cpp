// Temporary entry point; replaced by the real subcommand dispatcher.
#include <cstdio>
int main() { std::puts("wick"); return 0; }
