// Links against syncline::ddp; compiles no libtorch code.
int main() { return 0; }
