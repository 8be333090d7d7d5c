package import GatewayIO
import Glibc

/// The standard `process_*` families Prometheus client libraries export, read from
/// `/proc/self` at each scrape (nothing is kept between scrapes):
///
/// | Family | Source |
/// | --- | --- |
/// | `process_cpu_seconds_total` | `/proc/self/stat` utime + stime, in clock ticks |
/// | `process_resident_memory_bytes` | `/proc/self/statm` resident pages × page size |
/// | `process_virtual_memory_bytes` | `/proc/self/statm` size pages × page size |
/// | `process_open_fds` | entries of `/proc/self/fd` |
/// | `process_max_fds` | `RLIMIT_NOFILE` soft limit |
/// | `process_start_time_seconds` | `/proc/self/stat` starttime (ticks since boot) + `/proc/stat` btime |
///
/// A file that cannot be read drops its families from that scrape rather than exporting a 0.
package enum ProcessMetrics {
    package static func export(through registry: MetricsRegistry) {
        registry.scraped(
            "process_cpu_seconds_total", help: "User and system CPU time spent, in seconds.", kind: .counter
        ) { Self.stat().map { [ScrapedFamily.Sample(value: $0.cpuSeconds)] } ?? [] }
        registry.scraped(
            "process_resident_memory_bytes", help: "Resident memory size in bytes.", kind: .gauge
        ) { Self.memory().map { [ScrapedFamily.Sample(value: $0.resident)] } ?? [] }
        registry.scraped(
            "process_virtual_memory_bytes", help: "Virtual memory size in bytes.", kind: .gauge
        ) { Self.memory().map { [ScrapedFamily.Sample(value: $0.virtual)] } ?? [] }
        registry.scraped("process_open_fds", help: "Number of open file descriptors.", kind: .gauge) {
            Self.openFileDescriptors().map { [ScrapedFamily.Sample(value: $0)] } ?? []
        }
        registry.scraped("process_max_fds", help: "Maximum number of open file descriptors.", kind: .gauge) {
            var limit = rlimit()
            guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return [] }
            return [ScrapedFamily.Sample(value: Double(limit.rlim_cur))]
        }
        registry.scraped(
            "process_start_time_seconds", help: "Start time of the process since the Unix epoch, in seconds.",
            kind: .gauge
        ) {
            guard let stat = Self.stat(), let boot = Self.bootTime() else { return [] }
            return [ScrapedFamily.Sample(value: boot + stat.startSecondsAfterBoot)]
        }
    }

    struct Stat {
        var cpuSeconds: Double
        var startSecondsAfterBoot: Double
    }

    /// Fields 14 (utime), 15 (stime) and 22 (starttime) of `/proc/self/stat`, counted after the
    /// `)` that closes field 2 (the command name may contain spaces and parentheses).
    static func parseStat(_ text: String, ticksPerSecond: Double) -> Stat? {
        guard let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (state): field n is fields[n - 3].
        guard fields.count > 19, let utime = Double(fields[11]), let stime = Double(fields[12]),
            let start = Double(fields[19]), ticksPerSecond > 0
        else { return nil }
        return Stat(cpuSeconds: (utime + stime) / ticksPerSecond, startSecondsAfterBoot: start / ticksPerSecond)
    }

    private static func stat() -> Stat? {
        guard let text = Self.read("/proc/self/stat") else { return nil }
        return Self.parseStat(text, ticksPerSecond: Double(sysconf(Int32(_SC_CLK_TCK))))
    }

    private static func memory() -> (resident: Double, virtual: Double)? {
        guard let text = Self.read("/proc/self/statm") else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count >= 2, let size = Double(fields[0]), let resident = Double(fields[1]) else { return nil }
        let page = Double(sysconf(Int32(_SC_PAGESIZE)))
        return (resident * page, size * page)
    }

    private static func bootTime() -> Double? {
        guard let text = Self.read("/proc/stat") else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("btime ") {
            return Double(line.dropFirst("btime ".count).trimmingPrefix(" "))
        }
        return nil
    }

    private static func openFileDescriptors() -> Double? {
        guard let directory = opendir("/proc/self/fd") else { return nil }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            let first = entry.pointee.d_name.0
            if first != 0x2e { count += 1 }  // skip "." and ".."
        }
        // The directory stream itself holds one descriptor while it is counted.
        return Double(max(0, count - 1))
    }

    /// A small text file of /proc, whole (these are a few hundred bytes).
    private static func read(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 65_536 {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += buffer[0..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
