// Death tests for the simulator's reports: run a piece of code in a child process and look at how it ended.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <string>

namespace testing {

// Runs fn in a child process with its stderr captured in `err`; returns the child's wait status.
inline int run_child(const std::function<void()>& fn, std::string& err) {
    std::fflush(stdout);
    std::fflush(stderr);
    err.clear();
    int fds[2];
    if (pipe(fds) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        fn();
        _exit(0);
    }
    close(fds[1]);
    char buf[512];
    ssize_t r;
    while ((r = read(fds[0], buf, sizeof buf)) > 0) err.append(buf, (size_t)r);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
}

// True if fn, in a child process, aborted (SIGABRT: how the simulator stops after a report) and its stderr contains
// every one of `needles`.
inline bool aborts_with(const std::function<void()>& fn, std::initializer_list<std::string> needles, std::string& err) {
    const int status = run_child(fn, err);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT) return false;
    for (const std::string& n : needles)
        if (err.find(n) == std::string::npos) return false;
    return true;
}
inline bool aborts_with(const std::function<void()>& fn, const std::string& needle, std::string& err) {
    return aborts_with(fn, {needle}, err);
}

// True if fn, in a child process, returned normally (nothing was reported).
inline bool runs_clean(const std::function<void()>& fn, std::string& err) {
    const int status = run_child(fn, err);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace testing
