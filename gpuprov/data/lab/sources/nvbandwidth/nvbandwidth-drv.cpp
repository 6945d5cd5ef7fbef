// nvbandwidth (gpuprov lab stand-in). The lab's GPUs are simulated by the driver package's
// libraries, so this binary hands its arguments to that simulator. Like the real one, it
// cannot start without libcuda and libnvidia-ml.
#include <cstdio>
#include <unistd.h>
#include <vector>

static const char *kLibs[] = {"/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                              "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"};
static const char *kSimulator =
    "import sys; sys.path.insert(0, '/usr/lib/gpuprov-sim'); "
    "from gpuprov_sim import nvbandwidth; sys.exit(nvbandwidth.main(sys.argv[1:]))";

int main(int argc, char **argv) {
    for (const char *lib : kLibs) {
        if (access(lib, R_OK) != 0) {
            const char *name = lib + 26;  // past /usr/lib/x86_64-linux-gnu/
            fprintf(stderr, "%s: error while loading shared libraries: %s: cannot open "
                    "shared object file: No such file or directory\n", argv[0], name);
            return 127;
        }
    }
    std::vector<char *> args = {(char *)"python3", (char *)"-c", (char *)kSimulator};
    for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
    args.push_back(nullptr);
    execv("/usr/bin/python3", args.data());
    perror("execv /usr/bin/python3");
    return 1;
}
