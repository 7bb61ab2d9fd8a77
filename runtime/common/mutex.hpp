// common/mutex — a mutex and its locks that clang's thread-safety analysis understands
// (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html), so "mu_ held" is a checked
// contract instead of a comment:
//   - members say which mutex guards them: `int n_ SQLSTREAMS_GUARDED_BY(mu_);`
//   - functions say what they need: `void lose(Slot&) SQLSTREAMS_REQUIRES(mu_);`
//   - `MutexLock lock(mu_);` holds it for a scope (and hands condition variables the
//     std::unique_lock they need through native()).
// scripts/thread_safety.sh compiles the runtime with clang -Wthread-safety -Werror (part of
// scripts/test.sh); GCC builds see plain std::mutex and no attributes.
// A condition-variable predicate runs with the mutex held but the analysis cannot see that:
// write it as a lambda annotated `SQLSTREAMS_REQUIRES(mu_)`.
// Threading: Mutex is a std::mutex; MutexLock belongs to the thread that made it.
#pragma once

#include <mutex>

#if defined(__clang__)
#define SQLSTREAMS_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define SQLSTREAMS_THREAD_ANNOTATION(x)
#endif

#define SQLSTREAMS_CAPABILITY(x) SQLSTREAMS_THREAD_ANNOTATION(capability(x))
#define SQLSTREAMS_SCOPED_CAPABILITY SQLSTREAMS_THREAD_ANNOTATION(scoped_lockable)
#define SQLSTREAMS_GUARDED_BY(x) SQLSTREAMS_THREAD_ANNOTATION(guarded_by(x))
#define SQLSTREAMS_PT_GUARDED_BY(x) SQLSTREAMS_THREAD_ANNOTATION(pt_guarded_by(x))
#define SQLSTREAMS_REQUIRES(...) SQLSTREAMS_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define SQLSTREAMS_EXCLUDES(...) SQLSTREAMS_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define SQLSTREAMS_ACQUIRE(...) SQLSTREAMS_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define SQLSTREAMS_RELEASE(...) SQLSTREAMS_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
// On a getter: the mutex it returns is `x` (so GUARDED_BY(other.mu()) names other's mutex).
#define SQLSTREAMS_RETURN_CAPABILITY(x) SQLSTREAMS_THREAD_ANNOTATION(lock_returned(x))
#define SQLSTREAMS_NO_THREAD_SAFETY_ANALYSIS SQLSTREAMS_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace sqlstreams {

class SQLSTREAMS_CAPABILITY("mutex") Mutex {
 public:
  void lock() SQLSTREAMS_ACQUIRE() { mu_.lock(); }
  void unlock() SQLSTREAMS_RELEASE() { mu_.unlock(); }
  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

// Holds a Mutex for its scope. unlock()/lock() in between are tracked by the analysis.
class SQLSTREAMS_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) SQLSTREAMS_ACQUIRE(mu) : lock_(mu.native()) {}
  ~MutexLock() SQLSTREAMS_RELEASE() {}
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void unlock() SQLSTREAMS_RELEASE() { lock_.unlock(); }
  void lock() SQLSTREAMS_ACQUIRE() { lock_.lock(); }
  // For std::condition_variable::wait / wait_until / wait_for.
  std::unique_lock<std::mutex>& native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace sqlstreams
