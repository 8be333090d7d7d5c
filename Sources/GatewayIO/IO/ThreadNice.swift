import Glibc

/// The nice value of a loop's thread: the process's, not the one libdispatch gives the queue.
///
/// libdispatch on Linux stands in for QoS with the thread's nice value: the loop's queue
/// (`.userInitiated`) ran its thread at nice -2, above every other process of the same user
/// (nginx's worker runs at the nice it was started with). A higher-weight thread preempts the
/// running task as soon as one socket becomes readable, so on a busy machine the loop woke up
/// for one or two events where nginx, at 0, found a batch: 2-3x nginx's `epoll_wait`s and
/// context switches per echoed WebSocket message, each one kernel time
/// (docs/design-notes.md, "The kernel's side of an echoed message"). A loop therefore runs at
/// the process's nice (what `nice -n` or systemd's `Nice=` set), and its thread gets
/// libdispatch's value back when the loop ends.
///
/// Linux keeps a nice value per thread: `setpriority(PRIO_PROCESS, 0, n)` sets the calling
/// thread's, `getpriority(PRIO_PROCESS, getpid())` reads the main thread's.
enum ThreadNice {
    /// Sets the calling thread's nice to the main thread's; returns the thread's previous value
    /// (nil when either could not be read, and nothing was changed).
    static func adoptProcessNice() -> Int32? {
        guard let process = self.nice(of: id_t(getpid())), let current = self.nice(of: 0) else { return nil }
        if current != process {
            _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, process)
        }
        return current
    }

    /// Gives the calling thread `nice` back (a value from `adoptProcessNice`).
    static func restore(_ nice: Int32?) {
        guard let nice, self.nice(of: 0) != nice else { return }
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, nice)
    }

    /// `getpriority` of a thread (0: the calling one); -1 is a valid nice, so errno tells.
    private static func nice(of thread: id_t) -> Int32? {
        errno = 0
        let value = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), thread)
        return value == -1 && errno != 0 ? nil : value
    }
}
