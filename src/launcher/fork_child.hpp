// Forking a child of the launcher (a rank, the output keeper) safely.
#pragma once

#include <pthread.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>

namespace traceml::launcher {

/// Forks with every signal blocked across the fork, so that the child cannot
/// run the launcher's handlers (which write to the launcher's self-pipe)
/// before it has replaced them. The child runs `child`, which must not return
/// (it execs or _exits) and may only make async-signal-safe calls. Returns
/// fork's result; after a failed fork, errno is fork's.
template <class Child>
pid_t fork_with_signals_blocked(Child&& child) {
  sigset_t all;
  sigset_t previous;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &previous);
  const pid_t pid = ::fork();
  if (pid == 0) child();
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  errno = fork_errno;
  return pid;
}

}  // namespace traceml::launcher
