// The `streamrt` command-line tool: subcommands built on the public API only.
#include <cstdio>
#include <cstring>
#include <string>

#include "commands.hpp"
#include "streamrt/version.hpp"

namespace {

void usage(std::FILE* out) {
  std::fputs(
      "usage: streamrt <command> [options]\n"
      "\n"
      "commands:\n"
      "  demo    run stream and event scenarios on CPU streams and report timings (demo --help)\n"
      "  bench   compare streamrt with other ways to run stream-ordered work (bench --help)\n"
      "  stress  run model-checked random programs for a while (stress --help)\n"
      "  help    show this text\n"
      "\n"
      "  --version  the library's version, build type, compiler, backends and worker count\n",
      out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const std::string cmd = argv[1];
  if (cmd == "demo") return streamrt_tool::run_demo(argc - 1, argv + 1);
  if (cmd == "stress") return streamrt_tool::run_stress(argc - 1, argv + 1);
  if (cmd == "bench") return streamrt_tool::run_bench(argc - 1, argv + 1);
  if (cmd == "--version" || cmd == "version") {
    std::fputs(streamrt::version_text().c_str(), stdout);
    return 0;
  }
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    usage(stdout);
    return 0;
  }
  std::fprintf(stderr, "streamrt: unknown command '%s'\n\n", cmd.c_str());
  usage(stderr);
  return 2;
}
