import Foundation
import GatewayTesting
import Glibc
import Synchronization

/// Listens on 127.0.0.1, accepts one connection on a thread and hands it to `serve`
/// (a blocking socket: SSL calls block, which is fine on a test thread).
final class TLSOneShotServer: Sendable {
    let port: UInt16
    private let listener: Int32
    private let finished = DispatchSemaphore(value: 0)
    private let outcome = TLSOneShotOutcome()

    init(serve: @escaping @Sendable (Int32) -> String) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound, listen(fd, 4) == 0 else { throw TestFailure("listen: errno \(errno)") }
        self.listener = fd
        self.port = UInt16(bigEndian: address.sin_port)
        let finished = self.finished
        let outcome = self.outcome
        Thread.detachNewThread {
            let client = accept(fd, nil, nil)
            let result = client >= 0 ? serve(client) : "accept failed"
            outcome.value.withLock { $0 = result }
            finished.signal()
        }
    }

    /// What `serve` returned (waits up to 10 s for it).
    func wait() -> String {
        _ = self.finished.wait(timeout: .now() + 10)
        close(self.listener)
        return self.outcome.value.withLock { $0 }
    }
}

/// What the server thread reports back.
final class TLSOneShotOutcome: Sendable {
    let value = Mutex<String>("")
}
