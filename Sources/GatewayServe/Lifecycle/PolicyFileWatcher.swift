package import Dispatch
import Glibc
import PolicyModel

/// Calls `onChange` when the policy file's content changes, however the change arrives:
/// written in place, renamed over (editors, `mv`, config-management tools), or a Kubernetes
/// ConfigMap update (the kubelet writes a new timestamped directory, then renames a `..data_tmp`
/// symlink over `..data`; the file itself is a symlink through `..data`, so the file never
/// changes in place).
///
/// How: inotify on the file's *directory* (a watch on the file itself would follow the old
/// inode and go quiet after the first rename); every event about the file's name, or about the
/// first step of its symlink in that directory (`..data` for a ConfigMap's
/// `policies.yaml -> ..data/policies.yaml`), restarts a `debounce` timer, and when the timer
/// fires the file is read again and compared with the content seen last: `onChange` runs only
/// when the bytes differ. So a burst (an editor's write-rename-chmod, the kubelet's several
/// renames) gives one call. Events about other files are ignored: a log file written on every
/// request in the same directory used to restart the timer forever, and no edit ever applied
/// under traffic.
///
/// Everything runs on `queue` (the caller's: `GatewayService` passes its signal queue so that
/// watch reloads and SIGHUP reloads never overlap). The file is read there, never on an event
/// loop. Limits: a change to the *target* of a symlink that lives in another directory is not
/// seen (the watch is on the link's directory); send SIGHUP for those.
package final class PolicyFileWatcher: @unchecked Sendable {
    // @unchecked: every mutable field is touched only on `queue` (the sources' handlers
    // and `start`/`stop`, which hop onto it).

    /// The default quiet time before a burst of events counts as one change.
    package static let defaultDebounce: Duration = .milliseconds(500)

    private let path: String
    private let directory: String
    private let debounce: Duration
    private let queue: DispatchQueue
    private let onChange: @Sendable () -> Void
    private var fd: Int32 = -1
    private var readSource: (any DispatchSourceRead)?
    private var timer: (any DispatchSourceTimer)?
    private var lastContent: [UInt8]?
    /// The directory entries whose events matter (`relevantNames`), refreshed at every compare.
    private var watchedNames: Set<String> = []

    /// - Parameters:
    ///   - path: the policy file as given to `serve --config`.
    ///   - debounce: quiet time after the last event before the file is compared (500 ms).
    ///   - queue: where the file is read and `onChange` runs.
    package init(
        path: String,
        debounce: Duration = PolicyFileWatcher.defaultDebounce,
        queue: DispatchQueue,
        onChange: @escaping @Sendable () -> Void
    ) {
        self.path = path
        let slash = path.lastIndex(of: "/")
        self.directory = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        self.debounce = debounce
        self.queue = queue
        self.onChange = onChange
    }

    deinit {
        // The sources hold `self` weakly; a cancelled read source closes the fd.
        self.timer?.cancel()
        self.readSource?.cancel()
    }

    /// Starts watching. `baseline`: the bytes the running policy was loaded from, read before the
    /// load (`GatewayService.start`), so that a change made between the load and this call is
    /// reported (it used to be lost: an edit right after start-up never applied). nil: the
    /// content seen now. Call it, and `stop`, from outside `queue`: both
    /// hop onto it synchronously. Throws the errno of `inotify_init1`/`inotify_add_watch` (ENOSPC: the
    /// `fs.inotify.max_user_watches` limit; ENOENT: the directory is missing).
    package func start(baseline: [UInt8]? = nil) throws(PolicyFileWatcherError) {
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { throw PolicyFileWatcherError(operation: "inotify_init1", errno: errno) }
        let mask: UInt32 =
            UInt32(IN_CLOSE_WRITE) | UInt32(IN_MOVED_TO) | UInt32(IN_MOVED_FROM) | UInt32(IN_CREATE)
            | UInt32(IN_DELETE) | UInt32(IN_ATTRIB) | UInt32(IN_MODIFY)
        guard inotify_add_watch(fd, self.directory, mask) >= 0 else {
            let error = PolicyFileWatcherError(operation: "inotify_add_watch \(self.directory)", errno: errno)
            close(fd)
            throw error
        }
        self.queue.sync {
            self.fd = fd
            self.lastContent = baseline ?? Self.content(of: self.path)
            self.watchedNames = Self.relevantNames(of: self.path, in: self.directory)
            // Compared once now: a change already made is reported after the quiet time.
            let timer = DispatchSource.makeTimerSource(queue: self.queue)
            timer.setEventHandler { [weak self] in self?.settled() }
            timer.schedule(deadline: baseline == nil ? .distantFuture : .now() + Self.interval(self.debounce))
            timer.activate()
            self.timer = timer
            let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: self.queue)
            source.setEventHandler { [weak self] in self?.drain() }
            source.setCancelHandler { close(fd) }
            source.activate()
            self.readSource = source
        }
    }

    /// Stops watching and closes the inotify descriptor. Idempotent.
    package func stop() {
        self.queue.sync {
            self.timer?.cancel()
            self.timer = nil
            self.readSource?.cancel()
            self.readSource = nil
        }
    }

    /// Reads every queued inotify event and restarts the quiet timer when one is about a
    /// watched name (or the queue overflowed: then any of them may have been).
    private func drain() {
        dispatchPrecondition(condition: .onQueue(self.queue))
        var buffer = [UInt8](repeating: 0, count: 4096)
        var sawEvent = false
        while true {
            let count = buffer.withUnsafeMutableBytes { read(self.fd, $0.baseAddress, $0.count) }
            if count > 0 {
                if !sawEvent { sawEvent = Self.names(in: buffer[..<count]).contains { self.matters($0) } }
                continue
            }
            if count < 0, errno == EINTR { continue }
            break  // EAGAIN: drained (or an error: the next event retries)
        }
        guard sawEvent, let timer = self.timer else { return }
        timer.schedule(deadline: .now() + Self.interval(self.debounce))
    }

    /// nil stands for an event without a name (the queue overflowed): it always matters.
    private func matters(_ name: String?) -> Bool {
        guard let name else { return true }
        return self.watchedNames.contains(name)
    }

    /// The names of the events in `bytes` (whole `struct inotify_event`s, as `read` returns
    /// them: wd, mask, cookie, len, then `len` bytes of NUL-padded name); nil for a nameless one.
    static func names(in bytes: ArraySlice<UInt8>) -> [String?] {
        var names: [String?] = []
        var offset = bytes.startIndex
        let header = 16
        while offset + header <= bytes.endIndex {
            let length = Int(
                UInt32(bytes[offset + 12]) | UInt32(bytes[offset + 13]) << 8 | UInt32(bytes[offset + 14]) << 16
                    | UInt32(bytes[offset + 15]) << 24)
            let start = offset + header
            guard length > 0, start + length <= bytes.endIndex else {
                names.append(nil)
                offset = start + length
                continue
            }
            let field = bytes[start..<(start + length)]
            names.append(String(decoding: field.prefix { $0 != 0 }, as: UTF8.self))
            offset = start + length
        }
        return names
    }

    /// The entries of `directory` whose changes can change what `path` reads: its own name and,
    /// when it is a symlink into the same directory, the first step of the link's target
    /// (`..data` for `policies.yaml -> ..data/policies.yaml`; `other.yaml` for a link to a
    /// sibling). A target elsewhere is not watched (see the type's limits).
    static func relevantNames(of path: String, in directory: String) -> Set<String> {
        let name = String(path.split(separator: "/").last ?? Substring(path))
        var names: Set<String> = [name]
        var target = [CChar](repeating: 0, count: 4096)
        let count = readlink(path, &target, target.count - 1)
        guard count > 0 else { return names }
        var text = String(decoding: target[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if text.hasPrefix("/") {
            guard text.hasPrefix(directory + "/") else { return names }
            text = String(text.dropFirst(directory.count + 1))
        }
        if let first = text.split(separator: "/").first, first != ".." { names.insert(String(first)) }
        return names
    }

    private static func interval(_ duration: Duration) -> DispatchTimeInterval {
        .nanoseconds(Int(duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000))
    }

    /// The directory has been quiet for `debounce`: compare the file and report a change.
    private func settled() {
        dispatchPrecondition(condition: .onQueue(self.queue))
        self.timer?.schedule(deadline: .distantFuture)
        let content = Self.content(of: self.path)
        // A missing file (mid-swap, or deleted) is not a change: the next event retries, and
        // the running policy stays (a reload would fail anyway).
        self.watchedNames = Self.relevantNames(of: self.path, in: self.directory)
        guard let content, content != self.lastContent else { return }
        self.lastContent = content
        self.onChange()
    }

    /// The file's bytes through any symlinks, or nil when unreadable. Bounded by the policy
    /// size limit (a bigger file changes too, and the reload reports it as too large).
    package static func content(of path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while bytes.count <= PolicyLoader.maximumFileBytes {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return count == 0 ? bytes : nil }
            bytes.append(contentsOf: chunk[0..<count])
        }
        return bytes
    }
}

/// A system call of `PolicyFileWatcher.start` failed.
package struct PolicyFileWatcherError: Error, CustomStringConvertible {
    package var operation: String
    package var errno: Int32

    package var description: String {
        "\(self.operation): \(String(cString: strerror(self.errno)))"
    }
}
