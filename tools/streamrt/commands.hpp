#pragma once
// Subcommands of the streamrt tool. Each takes argv with argv[0] = the subcommand name and
// returns the process exit code.
namespace streamrt_tool {

int run_demo(int argc, char** argv);
int run_stress(int argc, char** argv);  // stress.cpp: the model-checked random programs
int run_bench(int argc, char** argv);   // bench.cpp

}  // namespace streamrt_tool
