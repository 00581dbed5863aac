// Test kernel that does nothing: a descriptor's kernel for tests about the program itself (names,
// cores, args in the run report), not about what a kernel does.
void kernel_main() {}
