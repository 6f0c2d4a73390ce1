#include <cstdio>
int main() { std::puts("specgen 0.1.0"); return 0; }
