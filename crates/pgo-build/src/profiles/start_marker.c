/* Linked into pgo-build's instrumented binaries only (never into baseline or optimized ones).
 *
 * Children of an instrumented process inherit __LLVM_PROFILE_RT_INIT_ONCE and then skip the
 * profile file's truncation at start-up, so a child killed by a signal leaves no file at all:
 * it could not be told from a process that never ran. This constructor records every start as
 * `$PGO_BUILD_START_DIR/<pid>.start` holding the executable's path and, on a second line, the
 * parent's pid; a start without a profile of the same pid is a process that died before its
 * exit handlers ran, and one whose parent is the same program is what a launcher started
 * (a daemon forking its server). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void pgo_build_mark_start(void) {
    const char *dir = getenv("PGO_BUILD_START_DIR");
    char path[4096];
    char exe[4096];
    int fd;
    ssize_t length;
    if (dir == NULL || snprintf(path, sizeof path, "%s/%d.start", dir, (int)getpid()) >= (int)sizeof path) {
        return;
    }
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        return;
    }
    length = readlink("/proc/self/exe", exe, sizeof exe);
    if (length > 0) {
        char parent[32];
        int written = snprintf(parent, sizeof parent, "\n%d", (int)getppid());
        (void)!write(fd, exe, (size_t)length);
        if (written > 0 && written < (int)sizeof parent) {
            (void)!write(fd, parent, (size_t)written);
        }
    }
    close(fd);
}
